//! Placement with quota sharding end to end: concurrent shoots fill exactly ⌈n/limit⌉
//! shards, entries in their grace period still count, freed room is refilled first-fit,
//! and a `granary garden` process aborted by a failpoint between committing a placement
//! and writing the entry resumes (after its leader Lease expires) with every invariant
//! intact.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::future::join_all;
use granary_api::core::{BackupEntry, LABEL_SHARD, Shoot};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use granary_api::core::CloudProfile;
use granary_test_support::garden::{
    backup, buckets, config, create_profile, create_seed, create_shoot, entries, events_about,
    garden_cluster, renew, start,
};
use granary_test_support::{TestCluster, poll_until};

/// Per shard: (bucket name, entries that reference it, status.entryCount).
async fn fill(tc: &TestCluster) -> BTreeMap<u32, (String, u32, u32)> {
    let entries = entries(tc).await;
    buckets(tc)
        .await
        .iter()
        .map(|b| {
            let shard: u32 = b
                .labels()
                .get(LABEL_SHARD)
                .and_then(|s| s.parse().ok())
                .expect("shard label");
            let actual = entries
                .iter()
                .filter(|e| e.spec.bucket_name == b.name_any())
                .count() as u32;
            let recorded = b.status.as_ref().and_then(|s| s.entry_count).unwrap_or(0);
            (shard, (b.name_any(), actual, recorded))
        })
        .collect()
}

/// True when the pool is settled as first fit over `total` entries with `limit`:
/// ⌈total/limit⌉ shards numbered from 0, all full but the last, counts exact.
async fn settled_first_fit(tc: &TestCluster, limit: u32, total: u32) -> bool {
    let fill = fill(tc).await;
    let shards = total.div_ceil(limit);
    let expected: Vec<u32> = (0..shards)
        .map(|i| {
            if i + 1 < shards {
                limit
            } else {
                total - i * limit
            }
        })
        .collect();
    fill.len() as u32 == shards
        && fill.keys().copied().eq(0..shards)
        && fill
            .values()
            .zip(&expected)
            .all(|((_, actual, recorded), want)| actual == want && recorded == want)
}

/// The value of `series` (name and labels, as rendered) in a metrics text; 0 when absent.
fn counter(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().expect("a number"))
}

/// Creates shoots `s<i>` for every `i` in `range`, all at once.
async fn create_shoots(
    tc: &TestCluster,
    ns: &str,
    range: std::ops::Range<u32>,
    profile: &str,
    seed: &str,
) {
    let names: Vec<String> = range.map(|i| format!("s{i:02}")).collect();
    join_all(names.iter().map(|n| create_shoot(tc, ns, n, profile, seed))).await;
}

async fn landscape(tc: &TestCluster) -> (String, String) {
    let (profile, seed) = (tc.name("aws"), tc.name("s"));
    renew(&tc.client(), &tc.instance_label(), &seed).await;
    create_seed(tc, &seed, "aws", "eu-1", None).await;
    create_profile(tc, &profile, "aws", Some(backup("aws", None, "backup"))).await;
    (profile, seed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_shoots_fill_exactly_the_needed_shards_and_freed_room_is_refilled_first() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let (profile, seed) = landscape(&tc).await;
    let garden = start(&tc, config(Some(10), None));
    let ns = tc.namespace("garden-q").await;
    create_shoots(&tc, &ns, 0..30, &profile, &seed).await;
    poll_until("30 entries in exactly 3 full shards", || {
        settled_first_fit(&tc, 10, 30)
    })
    .await;
    let before: BTreeMap<String, String> = entries(&tc)
        .await
        .into_iter()
        .map(|e| (e.name_any(), e.spec.bucket_name))
        .collect();

    // Four shoots of shard 1 go. The test plays the seed: its finalizer keeps the
    // entries through their grace period, during which they still count.
    let shard1 = fill(&tc).await[&1].0.clone();
    let leaving: Vec<BackupEntry> = entries(&tc)
        .await
        .into_iter()
        .filter(|e| e.spec.bucket_name == shard1)
        .take(4)
        .collect();
    let entry_api: Api<BackupEntry> = Api::namespaced(client.clone(), &ns);
    let shoot_api: Api<Shoot> = Api::namespaced(client.clone(), &ns);
    for e in &leaving {
        entry_api
            .patch(
                &e.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": ["gardener"]}})),
            )
            .await
            .expect("seed finalizer added");
        let owner = &e.owner_references()[0];
        assert_eq!(owner.block_owner_deletion, Some(false));
        shoot_api
            .delete(&owner.name, &DeleteParams::default())
            .await
            .expect("shoot deleted");
    }
    poll_until("entries in their grace period", || async {
        let all = entries(&tc).await;
        leaving.iter().all(|l| {
            all.iter()
                .any(|e| e.name_any() == l.name_any() && e.metadata.deletion_timestamp.is_some())
        })
    })
    .await;
    assert_eq!(fill(&tc).await[&1].2, 10, "entries in grace still count");
    for e in &leaving {
        entry_api
            .patch(
                &e.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await
            .expect("seed finalizer removed");
    }
    poll_until("shard 1 down to 6", || async {
        let f = fill(&tc).await;
        f[&1].1 == 6 && f[&1].2 == 6
    })
    .await;

    // New shoots refill shard 1 before anything else.
    create_shoots(&tc, &ns, 30..34, &profile, &seed).await;
    poll_until("shard 1 refilled", || settled_first_fit(&tc, 10, 30)).await;
    let after = entries(&tc).await;
    for e in &after {
        match before.get(&e.name_any()) {
            Some(bucket) => assert_eq!(&e.spec.bucket_name, bucket, "an entry never moves"),
            None => assert_eq!(e.spec.bucket_name, shard1, "new entries go to shard 1"),
        }
    }
    // One more: every shard is full, so a fourth appears.
    create_shoot(&tc, &ns, "s99", &profile, &seed).await;
    poll_until("a fourth shard", || settled_first_fit(&tc, 10, 31)).await;
    let text = garden.metrics().render();
    assert!(
        text.contains("granary_garden_placements_total{outcome=\"existing\"}"),
        "{text}"
    );
    assert!(text.contains("granary_garden_bucket_entries{bucket="));
    // The 35 shoots were placed by the placer, in batches, not by a reconcile each:
    // the shoot controller only hears of a shoot the placer cannot place.
    let shoot_reconciles = counter(
        &text,
        "granary_reconcile_total{controller=\"garden-shoot\"}",
    );
    assert!(
        shoot_reconciles < 5.0,
        "{shoot_reconciles} shoot reconciles for 35 placements"
    );
    garden.stop().await;
}

/// Shoots waiting on a broken profile are heard of twice when it is fixed: the placer
/// gets them from the profile's change, the shoot controller retries them. Each is
/// placed once: the counts are exact and every placement was made once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shoots_waiting_on_a_broken_profile_are_placed_once_each_when_it_is_fixed() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let (profile, seed) = (tc.name("cross"), tc.name("s"));
    renew(&client, &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    // Cross-provider without a region: invalid (fixed by backing up at aws, quota 4).
    create_profile(&tc, &profile, "aws", Some(backup("gcp", None, "backup"))).await;
    let garden = start(&tc, config(Some(4), None));
    let ns = tc.namespace("garden-w").await;
    create_shoots(&tc, &ns, 0..18, &profile, &seed).await;
    poll_until("the shoots say why they wait", || async {
        let events = events_about(&client, "s17").await;
        events.iter().any(|(_, reason, note)| {
            reason == "BackupEntryPending" && note.contains("unusable spec.backup")
        })
    })
    .await;
    assert!(entries(&tc).await.is_empty());
    Api::<CloudProfile>::all(client.clone())
        .patch(
            &profile,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backup": {"provider": "aws"}}})),
        )
        .await
        .expect("profile fixed");
    poll_until("18 entries in exactly 5 shards", || {
        settled_first_fit(&tc, 4, 18)
    })
    .await;
    let text = garden.metrics().render();
    let placements = counter(
        &text,
        "granary_garden_placements_total{outcome=\"existing\"}",
    );
    assert_eq!(placements, 18.0, "one placement per shoot");
    garden.stop().await;
}

fn spawn_garden(
    tc: &TestCluster,
    config: &std::path::Path,
    log: &std::path::Path,
    failpoints: Option<&str>,
    metrics_address: &str,
) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args(["garden", "--kubeconfig"])
        .arg(&tc.garden.kubeconfig_path)
        .arg("--config")
        .arg(config)
        .args([
            "--object-selector",
            &tc.object_selector,
            "--metrics-bind-address",
            metrics_address,
            "--leader-elect=true",
        ])
        .env("RUST_LOG", "granary=debug,info")
        .env_remove("GRANARY_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"));
    if let Some(spec) = failpoints {
        cmd.env("GRANARY_FAILPOINTS", spec);
    }
    cmd.spawn().expect("granary garden starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_aborted_between_commit_and_entry_resumes_with_the_invariants_intact() {
    let tc = garden_cluster().await;
    let (profile, seed) = landscape(&tc).await;
    let ns = tc.namespace("garden-f").await;
    create_shoots(&tc, &ns, 0..14, &profile, &seed).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("garden.yaml");
    std::fs::write(
        &config,
        "apiVersion: granary.gardener.cloud/v1alpha1\n\
         kind: ControllerManagerConfiguration\n\
         controllers:\n  backupInfrastructure:\n    quota: [{provider: aws, limit: 4}]\n\
         seedLiveness: {readyWithin: 1h}\n\
         leaderElection: {enabled: true, namespace: garden, leaseDuration: 2s, renewDeadline: 1s, retryPeriod: 200ms}\n",
    )
    .expect("config written");

    // The 7th placement commits its count and the process dies before the entry exists.
    let log = dir.path().join("first.log");
    let mut first = spawn_garden(
        &tc,
        &config,
        &log,
        Some("garden.placement.committed=7:abort"),
        "127.0.0.1:0",
    );
    let deadline = tokio::time::Instant::now() + granary_test_support::DEADLINE;
    let status = loop {
        if let Some(status) = first.try_wait().expect("child status") {
            break status;
        }
        if tokio::time::Instant::now() > deadline {
            let _ = first.kill();
            panic!(
                "the failpoint never fired:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success(), "aborted by the failpoint");
    let placed: BTreeMap<String, String> = entries(&tc)
        .await
        .into_iter()
        .map(|e| (e.name_any(), e.spec.bucket_name))
        .collect();
    // Entries of placements 1–6 at most; the 7th count was raised, its entry never written.
    let recorded: u32 = fill(&tc).await.values().map(|f| f.2).sum();
    assert!(placed.len() <= 6, "{placed:?}");
    assert!(
        recorded >= 7,
        "the seventh placement was committed: {recorded}"
    );

    // Restarted (after the dead leader's lease expires), it re-derives the counts and
    // finishes: ⌈14/4⌉ shards, first fit, nothing over the limit, nothing moved.
    let log = dir.path().join("second.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let metrics_address = format!("127.0.0.1:{port}");
    let mut second = spawn_garden(&tc, &config, &log, None, &metrics_address);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut settled = false;
    while !settled && tokio::time::Instant::now() < deadline {
        settled = settled_first_fit(&tc, 4, 14).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The binary serves its health, readiness and metrics endpoints.
    let addr: std::net::SocketAddr = metrics_address.parse().expect("socket address");
    // A deadline of its own: settling may have used most of the first under load.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut endpoints_ok = false;
    while !endpoints_ok && tokio::time::Instant::now() < deadline {
        endpoints_ok = granary_test_support::try_http_get(addr, "/healthz")
            .await
            .is_some_and(|b| b.ends_with("ok"))
            && granary_test_support::try_http_get(addr, "/readyz")
                .await
                .is_some_and(|b| b.ends_with("ok"))
            && granary_test_support::try_http_get(addr, "/metrics")
                .await
                .is_some_and(|b| b.contains("granary_garden_placements_total"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every controller counted in granary_reconcile_total has a duration series too.
    let metrics = granary_test_support::try_http_get(addr, "/metrics")
        .await
        .unwrap_or_default();
    let _ = second.kill();
    let _ = second.wait();
    let counted: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("granary_reconcile_total{controller=\""))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert!(!counted.is_empty(), "{metrics}");
    for controller in counted {
        assert!(
            metrics.contains(&format!(
                "granary_reconcile_duration_seconds_count{{controller=\"{controller}\"}}"
            )),
            "{controller} has no duration series:\n{metrics}"
        );
    }
    assert!(
        !metrics.contains("granary_garden_pool_shards{kind="),
        "one label name for the pool kind: {metrics}"
    );
    assert!(
        endpoints_ok,
        "/healthz, /readyz and /metrics answer on {addr}; its log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert!(
        settled,
        "not settled: {:?}\n{}",
        fill(&tc).await,
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    for e in entries(&tc).await {
        if let Some(bucket) = placed.get(&e.name_any()) {
            assert_eq!(&e.spec.bucket_name, bucket, "an entry never moves");
        }
    }
}

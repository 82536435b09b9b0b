//! Leader election (`runtime::leader`) against an API server: of two candidates one
//! leads; when the leader dies without releasing, the other takes over once the lease
//! has expired; a leader that shuts down releases the lease at once. The same with two
//! `granary garden` processes, which must never place a shoot's entry twice.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use granary_runtime::clock::Clock;
use granary_runtime::leader::{ElectionSettings, run_as_leader};
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::Api;

use granary_test_support::garden::{
    backup, buckets, create_profile, create_seed, create_shoot, entries, garden_cluster, renew,
};
use granary_test_support::signals::{lease_holder, send_signal, wait_exit};
use granary_test_support::{TestCluster, poll_until};

/// Counts who is working: `leading[i]` is 1 while candidate `i` runs its work.
struct Witness {
    leading: [AtomicUsize; 2],
}

impl Witness {
    fn leaders(&self) -> usize {
        self.leading.iter().map(|l| l.load(Ordering::SeqCst)).sum()
    }
}

struct Working(Arc<Witness>, usize);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.leading[self.1].fetch_sub(1, Ordering::SeqCst);
    }
}

fn candidate(
    tc: &TestCluster,
    lease: &str,
    i: usize,
    witness: Arc<Witness>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
) {
    let api: Api<Lease> = Api::namespaced(tc.client(), "default");
    let settings = ElectionSettings {
        lease_name: lease.to_string(),
        identity: format!("candidate-{i}"),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        labels: BTreeMap::from([tc.instance_label()]),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let work = move || {
            let witness = witness.clone();
            async move {
                witness.leading[i].fetch_add(1, Ordering::SeqCst);
                let _working = Working(witness, i);
                std::future::pending::<()>().await;
            }
        };
        run_as_leader(api, settings, Clock::system(), work, async {
            let _ = rx.await;
        })
        .await
        .expect("leader election runs");
    });
    (task, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_leads_and_the_other_takes_over_when_it_dies() {
    let tc = TestCluster::start().await;
    let lease = tc.name("leader");
    let witness = Arc::new(Witness {
        leading: [AtomicUsize::new(0), AtomicUsize::new(0)],
    });
    let (first, _stop_first) = candidate(&tc, &lease, 0, witness.clone());
    poll_until("candidate 0 leads", || async {
        witness.leading[0].load(Ordering::SeqCst) == 1
    })
    .await;
    let (second, stop_second) = candidate(&tc, &lease, 1, witness.clone());
    // The second stands by while the first renews (several retry periods).
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(witness.leaders(), 1, "exactly one leader");
        assert_eq!(witness.leading[1].load(Ordering::SeqCst), 0);
    }
    // The leader dies without releasing the lease (aborted like a crashed process).
    let died = tokio::time::Instant::now();
    first.abort();
    let _ = first.await;
    poll_until("candidate 1 takes over", || async {
        witness.leading[1].load(Ordering::SeqCst) == 1
    })
    .await;
    let took = died.elapsed();
    assert!(
        took <= Duration::from_millis(2000 + 2 * 200 + 500),
        "take-over within the lease duration (plus a retry): {took:?}"
    );
    assert_eq!(witness.leaders(), 1);
    let held = Api::<Lease>::namespaced(tc.client(), "default")
        .get(&lease)
        .await
        .expect("lease");
    let spec = held.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("candidate-1"));
    assert!(spec.lease_transitions.unwrap_or(0) >= 1);

    // A leader that shuts down releases the lease.
    let _ = stop_second.send(());
    second.await.expect("clean shutdown");
    let released = Api::<Lease>::namespaced(tc.client(), "default")
        .get(&lease)
        .await
        .expect("lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(released, None);
    assert_eq!(witness.leaders(), 0);
}

/// Starts `granary garden` with leader election, as pod `host`.
fn spawn_garden(
    tc: &TestCluster,
    config: &std::path::Path,
    host: &str,
    log: &std::path::Path,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_granary"))
        .arg("garden")
        .arg("--kubeconfig")
        .arg(&tc.garden.kubeconfig_path)
        .arg("--config")
        .arg(config)
        .args(["--object-selector", &tc.object_selector])
        .args([
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--leader-elect=true",
        ])
        .env("HOSTNAME", host)
        .env("RUST_LOG", "info")
        .env_remove("GRANARY_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("granary garden starts")
}

/// Two `granary garden` processes: one leads and places; killed (no lease release), the
/// other takes over within 3× the lease duration and goes on placing; every shoot ends
/// with exactly one BackupEntry and every bucket's count matches its entries. The
/// survivor then exits 0 on SIGTERM, releasing the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_garden_processes_hand_over_without_placing_twice() {
    let tc = garden_cluster().await;
    let client = tc.client();
    let (profile, seed) = (tc.name("aws"), tc.name("s"));
    renew(&client, &tc.instance_label(), &seed).await;
    create_seed(&tc, &seed, "aws", "eu-1", None).await;
    create_profile(&tc, &profile, "aws", Some(backup("aws", None, "backup"))).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("garden.yaml");
    let lease_duration = Duration::from_secs(2);
    std::fs::write(
        &config,
        "apiVersion: granary.gardener.cloud/v1alpha1\nkind: GardenConfiguration\n\
         controllers:\n  backupBucket:\n    quota: [{provider: aws, limit: 3}]\n\
         seedLiveness: {readyWithin: 1h}\n\
         leaderElection: {enabled: true, namespace: garden, leaseDuration: 2s, renewDeadline: 1s, retryPeriod: 200ms}\n",
    )
    .expect("config written");
    let logs = [dir.path().join("a.log"), dir.path().join("b.log")];
    let mut children = [
        spawn_garden(&tc, &config, "garden-a", &logs[0]),
        spawn_garden(&tc, &config, "garden-b", &logs[1]),
    ];
    let lease = format!("granary-garden-{}", tc.object_selector);
    let holder = || lease_holder(&client, "garden", &lease);
    poll_until("one process leads", || async { holder().await.is_some() }).await;
    let leader = usize::from(!holder().await.expect("held").starts_with("garden-a"));
    let standby = 1 - leader;

    let ns = tc.namespace("garden-l").await;
    for i in 0..5 {
        create_shoot(&tc, &ns, &format!("s{i}"), &profile, &seed).await;
    }
    poll_until("5 entries placed", || async {
        entries(&tc).await.len() == 5
    })
    .await;

    // The leader dies without releasing its lease.
    let died = tokio::time::Instant::now();
    children[leader].kill().expect("leader killed");
    let _ = children[leader].wait();
    let prefix = if standby == 0 { "garden-a" } else { "garden-b" };
    let deadline = died + 3 * lease_duration;
    loop {
        if holder().await.is_some_and(|h| h.starts_with(prefix)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the standby did not take over within 3× the lease duration:\n{}",
            std::fs::read_to_string(&logs[standby]).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for i in 5..10 {
        create_shoot(&tc, &ns, &format!("s{i}"), &profile, &seed).await;
    }
    poll_until("10 entries placed, counts settled", || async {
        let entries = entries(&tc).await;
        let buckets = buckets(&tc).await;
        let counted: i64 = buckets
            .iter()
            .map(|b| i64::from(b.status.as_ref().and_then(|s| s.entry_count).unwrap_or(0)))
            .sum();
        entries.len() == 10 && counted == 10
    })
    .await;
    let mut per_shoot: BTreeMap<String, usize> = BTreeMap::new();
    for e in entries(&tc).await {
        let owner = e
            .owner_references()
            .iter()
            .find(|o| o.kind == "Shoot")
            .map(|o| o.name.clone())
            .expect("owned by its shoot");
        *per_shoot.entry(owner).or_default() += 1;
    }
    assert_eq!(per_shoot.len(), 10, "{per_shoot:?}");
    assert!(
        per_shoot.values().all(|n| *n == 1),
        "placed twice: {per_shoot:?}"
    );
    let all = entries(&tc).await;
    for b in buckets(&tc).await {
        let actual = all
            .iter()
            .filter(|e| e.spec.bucket_name == b.name_any())
            .count();
        assert!(actual <= 3, "bucket {} over quota: {actual}", b.name_any());
        assert_eq!(
            b.status.as_ref().and_then(|s| s.entry_count),
            Some(actual as u32),
            "bucket {} count",
            b.name_any()
        );
    }

    // The survivor stops on SIGTERM and releases the lease.
    send_signal(&children[standby], "TERM");
    let status = wait_exit(&mut children[standby], &logs[standby]).await;
    assert!(status.success(), "exit 0 on SIGTERM: {status:?}");
    assert_eq!(holder().await, None, "the lease is released");
}

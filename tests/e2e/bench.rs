//! Every benchmark runs once at a tiny size, so none can rot: the library
//! entry behind `granary bench` and `cargo bench`, its JSON written and shaped as the
//! README describes. No time is checked; peers that are not installed must say so.
//! `delete`, `copy` and `migrate` need moto (found or started like the provider
//! tests'); without it they are skipped loudly (under CI=true, the emulator finder fails
//! instead).

use granary_bench::{BenchOptions, NAMES, run};
use serde_json::Value;

use granary_test_support::emulators;

const SIZE: usize = 20;

/// Runs `name` at [`SIZE`] into a temporary results directory; its JSON, checked for
/// the fields every benchmark has.
async fn smoke(name: &str, s3_endpoint: Option<String>) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = BenchOptions {
        size: Some(SIZE),
        results_dir: Some(dir.path().to_path_buf()),
        s3_endpoint,
        // The garden benchmark's medians over rounds (the others run once).
        rounds: (name == "garden").then_some(2),
        heap: None,
        // The garden benchmark runs `granary garden` and its API server with the
        // `granary` binary (this test binary is neither).
        granary_exe: Some(env!("CARGO_BIN_EXE_granary").into()),
    };
    let report = run(name, &opts)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert_eq!(report.path, dir.path().join(format!("{name}.json")));
    let written: Value =
        serde_json::from_slice(&std::fs::read(&report.path).expect("results written"))
            .expect("results are JSON");
    // (Floats may not round-trip through text exactly; the rest must.)
    assert_eq!(
        written["rows"].as_array().map(Vec::len),
        report.json["rows"].as_array().map(Vec::len)
    );
    assert_eq!(written["bench"], name);
    assert!(written["sizes"].is_object(), "{name}: sizes");
    assert!(written["machine"]["nproc"].as_u64().is_some_and(|n| n > 0));
    let rows = written["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{name}: no rows");
    for row in rows {
        assert!(
            row["measure"].as_str().is_some_and(|m| !m.is_empty()),
            "{row}"
        );
        assert!(row["unit"].is_string(), "{row}");
        assert!(row["granary"].as_f64().is_some_and(f64::is_finite), "{row}");
        let status = row["peer_status"].as_str().expect("peer_status");
        assert!(
            ["measured", "reference", "not installed", "failed", "none"].contains(&status),
            "{row}"
        );
        match status {
            "measured" | "reference" => assert!(row["peer_figure"].is_number(), "{row}"),
            _ => {
                assert!(row["peer_figure"].is_null(), "{row}");
                assert!(row["ratio"].is_null(), "{row}");
            }
        }
        assert_ne!(status, "failed", "{name}: a peer failed: {row}");
    }
    assert!(
        report
            .table
            .contains(rows[0]["measure"].as_str().expect("measure"))
    );
    written
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_benchmark_has_a_smoke_test() {
    // The list below and the library's must not drift apart.
    let covered = [
        "delete",
        "copy",
        "migrate",
        "garden",
        "embedded",
        "velero_archive",
        "velero_backup",
        "velero_queue",
        "velero_restore",
        "velero_verify",
        "seed_failover",
        "velero_scale",
    ];
    assert_eq!(NAMES, covered);
    let dir = tempfile::tempdir().expect("temp dir");
    let err = run(
        "nope",
        &BenchOptions {
            results_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        },
    )
    .await
    .expect_err("an unknown benchmark");
    assert!(err.to_string().contains("velero_restore"), "{err}");
    // A size or a round count of 0 is refused, naming its flag.
    for (opts, flag) in [
        (
            BenchOptions {
                size: Some(0),
                ..Default::default()
            },
            "--size",
        ),
        (
            BenchOptions {
                rounds: Some(0),
                ..Default::default()
            },
            "--rounds",
        ),
    ] {
        let err = run("garden", &opts).await.expect_err(flag);
        assert!(err.to_string().contains(flag), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_delete_at_a_tiny_size() {
    let Some(endpoint) = emulators::s3() else {
        return;
    };
    let j = smoke("delete", Some(endpoint)).await;
    // 20 objects: one list page and one DeleteObjects are the minimum, and Granary's.
    assert_eq!(j["minimal_requests"], 2);
    assert_eq!(
        j["runs"]["granary"]["requests"], 2,
        "{}",
        j["runs"]["granary"]
    );
    assert_eq!(j["granary"]["deleted"], SIZE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_copy_at_a_tiny_size() {
    let Some(endpoint) = emulators::s3() else {
        return;
    };
    let j = smoke("copy", Some(endpoint)).await;
    assert_eq!(j["granary"]["server_side_copies"], SIZE);
    // Server-side: not one object byte through Granary's process.
    assert_eq!(j["granary"]["object_bytes_through_proxy"], 0);
    assert_eq!(j["goal"]["bytes_met"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_migrate_at_a_tiny_size() {
    let Some(endpoint) = emulators::s3() else {
        return;
    };
    let j = smoke("migrate", Some(endpoint)).await;
    // Server-side: not one object byte through the migration, every object copied once.
    assert_eq!(j["bulk_copy"]["bytes_through_process"], 0);
    assert_eq!(j["bulk_copy"]["copy_requests"], SIZE);
    assert!(
        j["cut_over"]["etcd_downtime_seconds"]
            .as_f64()
            .is_some_and(|d| d > 0.0),
        "{}",
        j["cut_over"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_garden_at_a_tiny_size() {
    let j = smoke("garden", None).await;
    assert_eq!(j["workload"]["shoots"], SIZE);
    assert_eq!(j["sizes"]["rounds"], 2);
    assert_eq!(j["rounds"]["each"].as_array().map(Vec::len), Some(2));
    // Every round placed every shoot's entry, with its first entry on the timeline.
    for round in j["rounds"]["each"].as_array().expect("rounds") {
        let timeline = round["cold_start"]["timeline"]
            .as_array()
            .expect("timeline");
        assert_eq!(
            timeline
                .first()
                .map(|t| t[0].as_u64().is_some_and(|c| c >= 1)),
            Some(true),
            "{round}"
        );
        assert_eq!(
            timeline.last().and_then(|t| t[0].as_u64()),
            Some(SIZE as u64),
            "{round}"
        );
        // And met a burst of as many new shoots in the steady state, beside its peer.
        let steady = &round["steady_state"];
        assert_eq!(steady["new_shoots"], SIZE, "{round}");
        assert!(steady["ratio"].as_f64().is_some_and(|r| r > 0.0), "{round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_embedded_at_a_tiny_size() {
    let j = smoke("embedded", None).await;
    assert_eq!(j["sizes"]["objects"][0], SIZE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_verify_at_a_tiny_size() {
    let j = smoke("velero_verify", None).await;
    assert!(j["tarball_bytes"].as_u64().is_some_and(|n| n > 0), "{j}");
    assert!(
        j["verify_deep_mb_per_second"]
            .as_f64()
            .is_some_and(|v| v > 0.0),
        "{j}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_seed_failover_at_a_tiny_size() {
    let j = smoke("seed_failover", None).await;
    assert_eq!(j["sizes"]["backups"], SIZE);
    for measure in ["read_before_seconds", "never_read_seconds"] {
        assert!(j[measure].as_f64().is_some_and(|v| v > 0.0), "{j}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_archive_at_a_tiny_size() {
    let j = smoke("velero_archive", None).await;
    assert_eq!(j["archive_write"]["items"], SIZE);
    assert!(
        j["archive_read"]["item_files"]
            .as_u64()
            .is_some_and(|n| n >= SIZE as u64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_backup_at_a_tiny_size() {
    let j = smoke("velero_backup", None).await;
    assert!(
        j["backup"]["items"]
            .as_u64()
            .is_some_and(|n| n >= SIZE as u64)
    );
    // The bare peer did the same work: every object, listed in pages by the server.
    assert_eq!(j["bare"]["objects"], SIZE, "{j}");
    for side in ["backup", "bare"] {
        let lists = &j[side]["api_requests"]["list configmaps"];
        assert!(lists.as_u64().is_some_and(|n| n >= 1), "{side}: {j}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_queue_at_a_tiny_size() {
    let j = smoke("velero_queue", None).await;
    assert_eq!(j["mixed"]["passes"], 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_restore_at_a_tiny_size() {
    let j = smoke("velero_restore", None).await;
    assert_eq!(j["restore"]["phase"], "Completed", "{}", j["restore"]);
    assert!(
        j["restore"]["items_restored"]
            .as_u64()
            .is_some_and(|n| n >= SIZE as u64),
        "{}",
        j["restore"]
    );
    // The same objects, half ConfigMaps and half Secrets, each created once by the peer.
    assert_eq!(j["workload"]["objects"], SIZE);
    assert_eq!(j["workload"]["secrets"], SIZE / 2);
    assert_eq!(
        j["bare_creates"]["failed_creates"], 0,
        "{}",
        j["bare_creates"]
    );
    assert!(j["bare_creates"]["seconds"].as_f64().is_some());
    assert!(j["restore"]["peak_rss_growth_mib"].as_f64().is_some());
    let rows = j["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(
        rows[0]["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("bare creates")),
        "{}",
        rows[0]
    );
    assert_eq!(
        rows[1]["peer"], "kubectl apply --server-side",
        "{}",
        rows[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_velero_scale_at_a_tiny_size() {
    let j = smoke("velero_scale", None).await;
    assert_eq!(j["sizes"]["backups"], SIZE);
    // A row per measure and one for its requests.
    let rows = j["rows"].as_array().expect("rows");
    for (measure, requests) in [
        ("sync of a location", "sync: API requests"),
        ("idle sync", "idle sync: API requests"),
        ("queue pass", "queue pass: API requests"),
        ("granary backup get", "granary backup get: API requests"),
        ("scrubbing round", "scrubbing round: API requests"),
    ] {
        let of = |what: &str, unit: &str| {
            rows.iter().any(|r| {
                r["measure"].as_str().is_some_and(|m| m.contains(what)) && r["unit"] == unit
            })
        };
        assert!(of(measure, "s"), "{measure}: no time row");
        assert!(of(requests, "requests"), "{measure}: no requests row");
    }
    // Each step's requests by kind add up to its total.
    for step in [
        "sync",
        "idle_sync",
        "queue_pass",
        "queue_pass_steady",
        "backup_get",
        "scrub",
    ] {
        let total = j[step]["requests_total"].as_u64().expect("requests_total");
        assert!(total > 0, "{step}: {}", j[step]);
        let by_kind: u64 = j[step]["requests"]
            .as_object()
            .expect("requests by kind")
            .values()
            .filter_map(serde_json::Value::as_u64)
            .sum();
        assert_eq!(by_kind, total, "{step}");
    }
    // The sync created every Backup; the idle sync wrote none.
    assert_eq!(j["goal"]["sync_backup_creates"], SIZE, "{}", j["sync"]);
    assert_eq!(
        j["goal"]["idle_sync_backup_writes"], 0,
        "{}",
        j["idle_sync"]
    );
}

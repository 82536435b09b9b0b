//! Graceful shutdown of the binary, as a pod is stopped: `granary seed` on SIGTERM and
//! `granary garden` on SIGINT (Ctrl-C) stop reconciling, release their leader Lease and
//! exit 0. (SIGTERM of `granary garden` is covered by the leader take-over test.)

use std::process::{Command, Stdio};

use super::ensure_namespace;
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, Landscape};

use granary_test_support::signals::{lease_holder, send_signal, wait_exit};

const ELECTION: &str = "leaderElection: {enabled: true, namespace: granary-system, \
                        leaseDuration: 2s, renewDeadline: 1s, retryPeriod: 200ms}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_seed_releases_its_lease_and_exits_0_on_sigterm() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let seed_side = l.cluster.seed.as_ref().unwrap_or(&l.cluster.garden);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("seed.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: granary.gardener.cloud/v1alpha1\nkind: SeedConfiguration\n{ELECTION}\n"
        ),
    )
    .expect("config written");
    let seed_name = l.cluster.name("sig");
    let log = dir.path().join("seed.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_granary"))
        .arg("seed")
        .args(["--seed-name", &seed_name])
        .arg("--garden-kubeconfig")
        .arg(&l.cluster.garden.kubeconfig_path)
        .arg("--kubeconfig")
        .arg(&seed_side.kubeconfig_path)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(l.data_dir.path())
        .args(["--object-selector", &l.cluster.object_selector])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("GRANARY_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("granary seed starts");
    let lease = format!("granary-seed-{seed_name}");
    poll_until("the seed agent leads", || async {
        lease_holder(&l.seed, "granary-system", &lease)
            .await
            .is_some()
    })
    .await;
    send_signal(&child, "TERM");
    let status = wait_exit(&mut child, &log).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "exit 0 on SIGTERM: {status:?}\n{text}");
    assert!(text.contains("SIGTERM"), "{text}");
    assert_eq!(
        lease_holder(&l.seed, "granary-system", &lease).await,
        None,
        "the lease is released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granary_garden_releases_its_lease_and_exits_0_on_sigint() {
    let tc = granary_test_support::garden::garden_cluster().await;
    ensure_namespace(&tc.client(), "granary-system").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("garden.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: granary.gardener.cloud/v1alpha1\nkind: GardenConfiguration\n{ELECTION}\n"
        ),
    )
    .expect("config written");
    let log = dir.path().join("garden.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_granary"))
        .arg("garden")
        .arg("--kubeconfig")
        .arg(&tc.garden.kubeconfig_path)
        .arg("--config")
        .arg(&config)
        .args(["--object-selector", &tc.object_selector])
        .args(["--metrics-bind-address", "127.0.0.1:0", "--leader-elect"])
        .env("RUST_LOG", "info")
        .env_remove("GRANARY_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("granary garden starts");
    let lease = format!("granary-garden-{}", tc.object_selector);
    poll_until("the garden controller leads", || async {
        lease_holder(&tc.client(), "granary-system", &lease)
            .await
            .is_some()
    })
    .await;
    send_signal(&child, "INT");
    let status = wait_exit(&mut child, &log).await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.success(), "exit 0 on SIGINT: {status:?}\n{text}");
    assert!(text.contains("SIGINT"), "{text}");
    assert_eq!(
        lease_holder(&tc.client(), "granary-system", &lease).await,
        None,
        "the lease is released"
    );
}

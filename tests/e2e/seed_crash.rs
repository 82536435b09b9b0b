//! `granary seed` as a user runs it (the debug binary), crashed by a failpoint after the
//! second delete batch of a 5,000-object prefix and started again: the deletion
//! completes and nothing outside the prefix is lost. On the `local`
//! store and on S3 (moto).

use granary_seed::FAILPOINT_DELETE_BATCH;
use granary_test_support::seed::{Backend, Landscape, ensure_namespace};
use kube::api::DeleteParams;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

const OBJECTS: usize = 5_000;
/// Small batches, so the crash leaves most of the prefix for the restarted process.
const BATCH: usize = 250;

fn spawn(l: &Landscape, config: &std::path::Path, failpoints: Option<&str>) -> Child {
    let seed = l.cluster.seed.as_ref().expect("separate seed");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args(["seed", "--seed-name", "seed-x", "--garden-kubeconfig"])
        .arg(&l.cluster.garden.kubeconfig_path)
        .arg("--kubeconfig")
        .arg(&seed.kubeconfig_path)
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(l.data_dir.path())
        .args(["--object-selector", &l.cluster.object_selector])
        .args(["--metrics-bind-address", "127.0.0.1:0"])
        .args(["--delete-batch-size", &BATCH.to_string()])
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        // Logs stay in the test's data dir (kept when a test fails with --no-capture).
        .stderr(
            std::fs::File::create(
                l.data_dir
                    .path()
                    .join(format!("seed-{}.log", failpoints.is_some())),
            )
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null()),
        )
        .kill_on_drop(true);
    match failpoints {
        Some(spec) => cmd.env("GRANARY_FAILPOINTS", spec),
        None => cmd.env_remove("GRANARY_FAILPOINTS"),
    };
    cmd.spawn().expect("granary seed starts")
}

/// Prints the agents' logs when the test fails, so a failure can be diagnosed.
struct DumpLogsOnPanic(std::path::PathBuf);

impl Drop for DumpLogsOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for run in ["true", "false"] {
            let path = self.0.join(format!("seed-{run}.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            eprintln!("--- {} ---\n{text}", path.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_s3_binary_resumes_prefix_deletion_after_crash() {
    resumes_prefix_deletion_after_crash(Backend::S3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_local_binary_resumes_prefix_deletion_after_crash() {
    resumes_prefix_deletion_after_crash(Backend::Local).await;
}

async fn resumes_prefix_deletion_after_crash(backend: Backend) {
    let Some(l) = Landscape::start(backend).await else {
        return;
    };
    let _logs = DumpLogsOnPanic(l.data_dir.path().to_path_buf());
    let config = l.data_dir.path().join("seed.yaml");
    std::fs::write(
        &config,
        "apiVersion: granary.gardener.cloud/v1alpha1\nkind: SeedConfiguration\n\
         leaderElection: {enabled: false}\nseedLiveness: {renewInterval: 1s}\n",
    )
    .unwrap();
    let mut first = spawn(
        &l,
        &config,
        Some(&format!("{FAILPOINT_DELETE_BATCH}=2:abort")),
    );

    let bucket = l.bucket_name("cx");
    let project = l.cluster.name("garden-x");
    ensure_namespace(&l.garden, &project).await;
    let (doomed, _) = l.entry_name("doomed");
    let (kept, _) = l.entry_name("kept");
    l.create_bucket(&bucket, "seed-x").await;
    l.create_entry(&project, &doomed, &bucket, "seed-x", &[])
        .await;
    l.create_entry(&project, &kept, &bucket, "seed-x", &[])
        .await;
    l.wait_entry_ready(&project, &doomed).await;
    l.wait_entry_ready(&project, &kept).await;
    l.fill(&bucket, &doomed, OBJECTS).await;
    l.fill(&bucket, &kept, 10).await;

    l.entries(&project)
        .delete(&doomed, &DeleteParams::default())
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), first.wait())
        .await
        .expect("the failpoint ends the process")
        .expect("wait");
    assert!(!status.success(), "aborted: {status}");
    let left = l.count(&bucket, &format!("{doomed}/")).await;
    assert_eq!(
        left,
        OBJECTS + 1 - 2 * BATCH,
        "two batches were deleted before the crash"
    );

    let mut second = spawn(&l, &config, None);
    l.wait_entry_gone(&project, &doomed).await;
    assert_eq!(l.count(&bucket, &format!("{doomed}/")).await, 0);
    assert_eq!(
        l.count(&bucket, &format!("{kept}/")).await,
        11,
        "nothing outside the prefix lost"
    );
    // Kills and reaps the process this test started.
    second.kill().await.expect("restarted seed stops");
}

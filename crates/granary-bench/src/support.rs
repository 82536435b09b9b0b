//! What the benchmarks share: /proc readings, and creates that wait for a kind to be
//! served.

/// A field of /proc/<pid>/status in KiB (`VmHWM:`, `VmRSS:`).
pub fn status_kib(pid: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU seconds (user and system, all threads) process `pid` has used so far, from
/// /proc/<pid>/stat (in USER_HZ ticks: 100 a second on Linux).
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (which may hold spaces) start at `state`.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Resets this process' peak RSS to its current RSS (Linux ≥ 4.0), so the peak read
/// afterwards is the measured step's.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Waits for `child`, sampling its peak RSS (`VmHWM`) every 10 ms: (status, peak KiB).
pub fn wait_sampling_peak(
    child: &mut std::process::Child,
) -> Result<(std::process::ExitStatus, u64), String> {
    let pid = child.id().to_string();
    let mut peak_kib = 0;
    loop {
        if let Some(hwm) = status_kib(&pid, "VmHWM:") {
            peak_kib = peak_kib.max(hwm);
        }
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => return Ok((s, peak_kib)),
            None => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

/// A `local` object store under `root` with the bucket `bench`, and the Velero layout of
/// that bucket's prefix `velero/bench`: where the Velero benchmarks keep their backups.
pub async fn local_bench_store(
    root: &std::path::Path,
) -> anyhow::Result<(
    std::sync::Arc<dyn granary_providers::ObjectStore>,
    granary_velero::layout::StorageLayout,
)> {
    use anyhow::Context;
    let store = granary_providers::open(
        "local",
        None,
        &Default::default(),
        &granary_providers::StoreOptions {
            local_root: Some(root.to_path_buf()),
            ..Default::default()
        },
    )
    .await
    .context("local store")?;
    store
        .ensure_bucket("bench", &granary_providers::BucketOptions::default())
        .await
        .context("bucket")?;
    let layout = granary_velero::layout::StorageLayout::new("bench", Some("velero/bench"))
        .context("layout")?;
    Ok((store, layout))
}

/// A scratch directory removed when dropped.
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> std::io::Result<Scratch> {
        let dir = std::env::temp_dir().join(format!(
            "granary-bench-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Creates `obj`; one that exists already counts as made. A 404 is retried for 30 s: a
/// CRD is served a moment after its create.
pub async fn create<K>(api: &kube::Api<K>, obj: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.create(&kube::api::PostParams::default(), obj).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => anyhow::bail!("create failed: {e}"),
        }
    }
}

/// A reference to the Secret `name` in the garden namespace (the benchmarks' cloud
/// credentials).
pub fn garden_secret(name: &str) -> granary_api::common::ObjectReference {
    granary_api::common::ObjectReference {
        api_version: "v1".into(),
        kind: "Secret".into(),
        name: name.into(),
        namespace: "garden".into(),
        ..Default::default()
    }
}

/// The async runtime every benchmark process runs on: two workers, as this machine has
/// (the benchmark itself, its API server child and the garden's restart peer alike).
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

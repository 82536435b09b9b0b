//! `granary dev` as a process: [`Dev`] starts it on a data directory, reads the
//! addresses it logs, and stops it (gracefully, within a grace period) when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use granary_api::common::LastOperationState;
use granary_api::core::{BackupBucket, BackupEntry};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, ResourceExt};

use crate::poll_until;

pub const GRACE: Duration = Duration::from_secs(5);

/// The logs of both runs, next to the data directory (which `granary dev` creates).
pub fn log_path(data_dir: &Path) -> PathBuf {
    data_dir.with_extension("log")
}

/// A running `granary dev`, stopped (killed) on drop if the test did not stop it.
pub struct Dev {
    pub child: Child,
    pub stdout: Arc<Mutex<Vec<String>>>,
    pub data_dir: PathBuf,
}

impl Dev {
    pub fn start(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Dev {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path(data_dir))
            .expect("log file");
        let mut cmd = Command::new(crate::granary_bin());
        cmd.arg("dev")
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--grace-period", &format!("{}s", GRACE.as_secs())])
            .args(["--metrics-bind-address", "127.0.0.1:0"])
            .args(extra)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("granary dev starts");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let pipe = child.stdout.take().expect("piped stdout");
        let lines = stdout.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().expect("output lines").push(line);
            }
        });
        Dev {
            child,
            stdout,
            data_dir: data_dir.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn output(&self) -> String {
        self.stdout.lock().expect("output lines").join("\n")
    }

    /// Waits for the banner and returns the garden client and the health address.
    pub async fn ready(&self) -> (Client, SocketAddr) {
        poll_until("granary dev prints where it serves", || async {
            self.output().contains("health and metrics: http://")
        })
        .await;
        let out = self.output();
        let addr = out
            .split("health and metrics: http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no health address in:\n{out}"));
        let kc = Kubeconfig::read_from(self.data_dir.join("garden.kubeconfig"))
            .expect("garden kubeconfig is written");
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("usable kubeconfig");
        (Client::try_from(config).expect("client"), addr)
    }

    /// Sends SIGINT and waits (with a deadline) for the process to end; returns whether
    /// it exited with code 0.
    pub fn interrupt(&mut self) -> bool {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGINT delivered");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                return status.success();
            }
            assert!(
                Instant::now() < deadline,
                "granary dev did not stop within 15s of SIGINT"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- granary dev stdout ---\n{}", self.output());
            let log = std::fs::read_to_string(log_path(&self.data_dir)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- granary dev stderr (last lines) ---");
            for line in tail.into_iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

pub fn succeeded(op: Option<&granary_api::common::LastOperation>) -> bool {
    op.is_some_and(|o| o.state == LastOperationState::Succeeded)
}

/// Waits until there are `entries` entries and every bucket and entry is Succeeded;
/// returns bucket name → its entries' names.
pub async fn all_succeeded(garden: &Client, entries: usize) -> BTreeMap<String, Vec<String>> {
    let buckets: Api<BackupBucket> = Api::all(garden.clone());
    let entry_api: Api<BackupEntry> = Api::all(garden.clone());
    poll_until(
        &format!("{entries} entries and their buckets Succeeded"),
        || async {
            let Ok(b) = buckets.list(&ListParams::default()).await else {
                return false;
            };
            let Ok(e) = entry_api.list(&ListParams::default()).await else {
                return false;
            };
            e.items.len() == entries
                && !b.items.is_empty()
                && b.items
                    .iter()
                    .all(|b| succeeded(b.status.as_ref().and_then(|s| s.last_operation.as_ref())))
                && e.items
                    .iter()
                    .all(|e| succeeded(e.status.as_ref().and_then(|s| s.last_operation.as_ref())))
        },
    )
    .await;
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in entry_api
        .list(&ListParams::default())
        .await
        .expect("entries")
        .items
    {
        out.entry(e.spec.bucket_name.clone())
            .or_default()
            .push(e.name_any());
    }
    out
}

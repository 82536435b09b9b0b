//! `granary backup|restore|backup-location …` as a user runs it: [`VeleroCli`] is the
//! granary binary pointed at one cluster (with the seed CRDs) and Velero namespace.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use granary_api::velero::{Backup, BackupSpec, Restore, SCHEDULE_NAME_LABEL};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::TestCluster;
use crate::seed::install_seed_crds;

/// The granary binary pointed at one cluster and Velero namespace.
pub struct VeleroCli {
    pub tc: TestCluster,
    pub kubeconfig: PathBuf,
    pub namespace: String,
}

impl VeleroCli {
    /// A cluster with the seed CRDs and a fresh Velero namespace.
    pub async fn start() -> Self {
        let tc = TestCluster::start().await;
        install_seed_crds(&tc, &tc.client()).await;
        let namespace = tc.namespace("velero").await;
        VeleroCli {
            kubeconfig: tc.garden.kubeconfig_path.clone(),
            tc,
            namespace,
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(crate::granary_bin());
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.namespace])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("KUBECONFIG");
        cmd
    }

    /// Runs `granary ARGS --kubeconfig … -n …` with `stdin` as its input.
    pub async fn run_with_input(&self, args: &[&str], stdin: &str) -> Output {
        let mut cmd = self.command(args);
        let input = stdin.to_string();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the granary binary runs");
            let _ = child
                .stdin
                .take()
                .expect("piped")
                .write_all(input.as_bytes());
            child.wait_with_output().expect("granary finishes")
        })
        .await
        .expect("the granary task")
    }

    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_with_input(args, "").await
    }

    /// Runs and expects success; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "granary {args:?} failed:\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// Runs and expects failure with `flag` in stderr; returns stderr.
    pub async fn fails(&self, args: &[&str], flag: &str) -> String {
        let out = self.run(args).await;
        assert!(!out.status.success(), "granary {args:?} succeeded");
        let err = stderr(&out);
        assert!(err.contains(flag), "granary {args:?}: {flag} not in {err}");
        err
    }

    pub fn backups(&self) -> Api<Backup> {
        Api::namespaced(self.tc.client(), &self.namespace)
    }

    pub async fn backup_json(&self, name: &str) -> Value {
        serde_json::to_value(self.backups().get(name).await.expect("backup exists")).expect("JSON")
    }

    /// Writes `status` into backup `name` (Backups have no status subresource, as in
    /// Velero, so a merge patch of the object carries it).
    pub async fn set_status(&self, name: &str, status: Value) {
        self.backups()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect("status is written");
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Restores, and the Backups they name.
impl VeleroCli {
    /// The Velero namespace's Restores.
    pub fn restores(&self) -> Api<Restore> {
        Api::namespaced(self.tc.client(), &self.namespace)
    }

    /// Restore `name` as JSON.
    pub async fn restore_json(&self, name: &str) -> Value {
        serde_json::to_value(self.restores().get(name).await.expect("restore exists"))
            .expect("JSON")
    }

    /// The names of the Restores, sorted.
    pub async fn restore_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .restores()
            .list(&ListParams::default())
            .await
            .expect("restores are listed")
            .items
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        names.sort();
        names
    }

    /// A Backup object (no controller: only its existence matters to the CLI).
    pub async fn backup_object(&self, name: &str, schedule: Option<&str>) {
        let mut b = Backup::new(name, BackupSpec::default());
        if let Some(s) = schedule {
            b.metadata.labels = Some([(SCHEDULE_NAME_LABEL.to_string(), s.to_string())].into());
        }
        self.backups()
            .create(&PostParams::default(), &b)
            .await
            .expect("backup is created");
    }

    /// Writes `status` (and `annotations`) into restore `name`, as the controller would;
    /// Restores have no status subresource, as in Velero.
    pub async fn set_restore(&self, name: &str, status: Value, annotations: Value) {
        self.restores()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": annotations}, "status": status})),
            )
            .await
            .expect("status is written");
    }
}

impl VeleroCli {
    /// `granary <args>` with `input` on stdin fails, saying `needle`.
    pub async fn fails_with_input(&self, args: &[&str], input: &str, needle: &str) {
        let out = self.run_with_input(args, input).await;
        assert!(!out.status.success(), "granary {args:?} succeeded");
        assert!(
            stderr(&out).contains(needle),
            "{needle} not in {}",
            stderr(&out)
        );
    }
}

//! The one way the tests run `kubectl`. The binary is `$GRANARY_KUBECTL` when set
//! (scripts/test.sh points it at Debian's kubernetes-client 1.20, the oldest kubectl
//! Granary supports), else `kubectl` on PATH; [`Kubectl::on_path`] is for the tests that
//! need a recent kubectl whatever `$GRANARY_KUBECTL` says.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The kubectl to run: `$GRANARY_KUBECTL`, else `kubectl` on PATH; and whether it was
/// chosen explicitly.
pub fn kubectl_bin() -> (String, bool) {
    match std::env::var("GRANARY_KUBECTL") {
        Ok(k) if !k.is_empty() => (k, true),
        _ => ("kubectl".to_string(), false),
    }
}

/// Whether [`kubectl_bin`] can be started at all.
pub fn installed() -> bool {
    Command::new(kubectl_bin().0)
        .args(["version", "--client"])
        .output()
        .is_ok()
}

/// Whether [`kubectl_bin`] runs (`kubectl version --client` succeeds).
pub fn runs() -> bool {
    Command::new(kubectl_bin().0)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether kubectl runs; prints its version so a log shows which one was tested. A
/// `$GRANARY_KUBECTL` that does not run is a failure, not a skip.
pub fn available() -> bool {
    let (bin, explicit) = kubectl_bin();
    let out = Command::new(&bin).args(["version", "--client"]).output();
    match out {
        Ok(o) if o.status.success() => {
            eprintln!(
                "using {bin}: {}",
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
            true
        }
        other => {
            assert!(!explicit, "GRANARY_KUBECTL={bin} does not run: {other:?}");
            false
        }
    }
}

/// kubectl for one test: which binary, which cluster (`--kubeconfig`), an optional
/// private discovery cache (`--cache-dir`) and default namespace (`-n`).
pub struct Kubectl {
    bin: String,
    kubeconfig: Option<PathBuf>,
    cache: Option<tempfile::TempDir>,
    namespace: Option<String>,
}

impl Kubectl {
    /// [`kubectl_bin`] against `kubeconfig`.
    pub fn new(kubeconfig: &Path) -> Self {
        Kubectl {
            bin: kubectl_bin().0,
            kubeconfig: Some(kubeconfig.to_path_buf()),
            cache: None,
            namespace: None,
        }
    }

    /// `kubectl` on PATH, against no cluster yet (`kubectl kustomize`, or
    /// [`Self::kubeconfig`]).
    pub fn on_path() -> Self {
        Kubectl {
            bin: "kubectl".into(),
            kubeconfig: None,
            cache: None,
            namespace: None,
        }
    }

    /// Against `kubeconfig`.
    pub fn kubeconfig(mut self, kubeconfig: &Path) -> Self {
        self.kubeconfig = Some(kubeconfig.to_path_buf());
        self
    }

    /// With a discovery and OpenAPI cache of its own (`--cache-dir`), private to the test.
    pub fn private_cache(mut self) -> Self {
        self.cache = Some(tempfile::tempdir().expect("cache dir"));
        self
    }

    /// `-n <namespace>` on every command.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// `kubectl <global flags> <args>`, not started.
    pub fn command<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new(&self.bin);
        if let Some(k) = &self.kubeconfig {
            cmd.arg("--kubeconfig").arg(k);
        }
        if let Some(c) = &self.cache {
            cmd.arg("--cache-dir").arg(c.path());
        }
        if let Some(ns) = &self.namespace {
            cmd.arg("-n").arg(ns);
        }
        cmd.args(args);
        cmd
    }

    /// Runs `kubectl <args>` off the runtime's thread (an embedded server may answer on
    /// this one) and returns what it did.
    pub async fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().expect("kubectl runs"))
            .await
            .expect("kubectl task")
    }

    /// [`Self::run`] that must succeed; its stdout.
    pub async fn ok<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.run(args).await;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

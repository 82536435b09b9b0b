//! The Velero-style CLI (`granary backup …`, `granary restore …`, `granary backup-location …`), client side
//! only: it creates, reads, patches and deletes `velero.io/v1` objects in the Velero
//! namespace, and reads a backup's files from its storage location; the controllers of
//! `granary seed`/`granary server` do the work. Shaped like velero's own CLI (its flags,
//! its columns, its describe layout) so its users feel at home.
//!
//! The command enums and flag structs here are what clap parses (`#[derive(clap::…)]`,
//! the `///` lines their help); `main.rs` only holds them in its `Command` and hands them
//! over. What turns flags into objects
//! and objects into text is pure ([`flags`], [`backup_spec`], [`location_spec`],
//! [`describe`], [`output`]) and tested beside it. This is the CLI edge, so errors are
//! `anyhow` with messages meant for stderr.

pub mod backup;
pub mod backup_spec;
pub mod describe;
pub mod download;
pub mod dry_run;
pub mod flags;
pub mod integrity;
pub mod location;
pub mod location_spec;
pub mod output;
pub mod restore;
pub mod restore_describe;
pub mod restore_spec;
pub mod schedule;
pub mod status;
pub mod store;
pub mod wait;

use std::path::PathBuf;

use anyhow::Context;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The namespace velero's CLI uses unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "velero";

/// Where the commands act: `--kubeconfig` and `-n/--namespace` (flags every
/// `backup`/`restore`/`schedule`/`backup-location` command takes; the `///` lines on the
/// fields are their help), and the `--data-dir` of the commands that read a location
/// themselves ([`LocalStore`]).
#[derive(Clone, Debug, clap::Args)]
pub struct Target {
    /// Kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The Velero namespace.
    #[arg(short = 'n', long, global = true, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    // Set from the subcommand's [`LocalStore`] ([`Target::reading`]).
    #[arg(skip)]
    pub data_dir: Option<PathBuf>,
}

/// `--data-dir`, on the commands that can read a location's files themselves instead of
/// through the server (describe --details, logs, download, verify, restore dry runs).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LocalStore {
    /// Read the location's files directly, a location on the `local` provider from
    /// this directory (`granary dev`: its data directory's `buckets`), instead of
    /// through the server.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

impl Target {
    /// This target, reading locations as `local` says.
    pub fn reading(&self, local: &LocalStore) -> Target {
        Target {
            data_dir: local.data_dir.clone(),
            ..self.clone()
        }
    }

    /// A client from `--kubeconfig`, else KUBECONFIG / `~/.kube/config` / in-cluster.
    pub async fn client(&self) -> anyhow::Result<Client> {
        match &self.kubeconfig {
            None => Client::try_default()
                .await
                .context("no cluster to talk to (give --kubeconfig or set KUBECONFIG)"),
            Some(p) => {
                let kc = Kubeconfig::read_from(p)
                    .with_context(|| format!("reading --kubeconfig {}", p.display()))?;
                let config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                        .await
                        .with_context(|| format!("using --kubeconfig {}", p.display()))?;
                Client::try_from(config).with_context(|| format!("client for {}", p.display()))
            }
        }
    }
}

/// Runs `f` on a fresh async runtime (the CLI's commands are short-lived).
pub fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
        .map_err(readable)
}

/// The error with an API server's refusal told by its message and reason, not by the
/// whole Status object kube's `Display` prints.
fn readable(err: anyhow::Error) -> anyhow::Error {
    let mut parts = Vec::new();
    for cause in err.chain() {
        if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
            parts.push(format!("{} ({})", status.message, status.reason));
            return anyhow::anyhow!("{}", parts.join(": "));
        }
        parts.push(cause.to_string());
    }
    err
}

/// A yes/no question on stdin, velero's `Are you sure you want to continue (Y/N)?`.
pub(crate) fn confirmed(question: &str) -> bool {
    use std::io::{BufRead, Write};
    print!("{question}\nAre you sure you want to continue (Y/N)? ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}

/// Creates `obj` (a `kind` named `name` in the Velero namespace `ns`), telling the two
/// refusals people meet in words: the name is taken, or the namespace does not exist.
pub(crate) async fn create_in_velero_namespace<K>(
    api: &kube::Api<K>,
    obj: &K,
    kind: &str,
    name: &str,
    ns: &str,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    match api.create(&kube::api::PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => {
            anyhow::bail!("{kind} {name:?} already exists in namespace {ns}")
        }
        Err(e) if is_not_found(&e) => {
            anyhow::bail!("namespace {ns} does not exist: give the Velero namespace with -n")
        }
        Err(e) => Err(e).with_context(|| format!("creating {kind} {name}")),
    }
}

/// Whether a kube error is a 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is a 409 on create.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_refusals_read_as_their_message() {
        let status = kube::core::Status::failure("namespaces \"velero\" not found", "NotFound");
        let err =
            anyhow::Error::from(kube::Error::Api(Box::new(status))).context("creating backup b1");
        assert_eq!(
            readable(err).to_string(),
            "creating backup b1: namespaces \"velero\" not found (NotFound)"
        );
        let other = anyhow::anyhow!("plain").context("outer");
        assert_eq!(format!("{:#}", readable(other)), "outer: plain");
    }
}

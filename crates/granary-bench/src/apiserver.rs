//! The embedded API server in a process of its own, for benchmarks that measure a
//! client's CPU and memory (the garden's): the child is `granary bench <name>` (the
//! `granary` executable given, else this process' own executable with its own
//! arguments) with [`CHILD_ENV`] set, which [`super::main_blocking`] turns into the
//! server; it serves until its stdin closes.
//!
//! The parent talks to the child over its stdin and stdout, one line each way:
//! `ready` (the kubeconfig is written), `record` → `ok` (record requests from now on;
//! recording costs the server the same in every phase it is on), `requests` → a JSON
//! object of the requests recorded since the last `record`, reads included, by `verb
//! resource[/subresource]`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::support::Scratch;
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};

/// Set (to a directory for the kubeconfig) in the environment of the child.
pub(crate) const CHILD_ENV: &str = "GRANARY_BENCH_APISERVER_DIR";

/// The child's side: an embedded API server on 127.0.0.1 that writes its kubeconfig
/// into `dir` and answers the parent's lines until its stdin closes.
pub(crate) fn serve(dir: &Path) -> anyhow::Result<()> {
    let runtime = super::support::runtime()?;
    runtime.block_on(async {
        let server = EmbeddedServer::start(EmbeddedOptions::default())
            .await
            .context("embedded server starts")?;
        server
            .write_kubeconfig(&dir.join("kubeconfig"))
            .context("writing the kubeconfig")?;
        let mut out = tokio::io::stdout();
        let mut say = async |line: String| -> anyhow::Result<()> {
            out.write_all(format!("{line}\n").as_bytes()).await?;
            out.flush().await?;
            Ok(())
        };
        say("ready".into()).await?;
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            match line.trim() {
                "record" => {
                    server.record_requests();
                    // The log of each phase starts empty (it costs the same in each).
                    drop(server.take_recorded_requests());
                    say("ok".into()).await?;
                }
                "requests" => {
                    let by_kind = super::velero_scale::tally(server.take_recorded_requests());
                    say(serde_json::to_string(&by_kind)?).await?;
                }
                other => bail!("the benchmark's API server got an unknown line {other:?}"),
            }
        }
        server.shutdown().await;
        Ok(())
    })
}

/// A client of the server whose kubeconfig is at `path`.
pub(crate) async fn new_client(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .context("the API server's kubeconfig")?;
    kube::Client::try_from(config).context("a client of the API server")
}

/// The parent's side: the child process and a client of its server.
pub(crate) struct ApiServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    pub client: kube::Client,
    scratch: Scratch,
}

impl ApiServerProcess {
    /// Starts the child (`exe bench <bench>`, or this executable with this process'
    /// arguments) and waits until its kubeconfig is written.
    pub(crate) async fn start(exe: Option<&Path>, bench: &str) -> anyhow::Result<ApiServerProcess> {
        let scratch = Scratch::new("apiserver").context("a scratch directory")?;
        let mut command = match exe {
            Some(exe) => {
                let mut c = tokio::process::Command::new(exe);
                c.args(["bench", bench]);
                c
            }
            None => {
                let mut c = tokio::process::Command::new(
                    std::env::current_exe().context("the benchmark's own executable")?,
                );
                c.args(std::env::args_os().skip(1));
                c
            }
        };
        let mut child = command
            .env(CHILD_ENV, scratch.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting the API server process")?;
        let stdin = child.stdin.take().context("the child's stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("the child's stdout")?).lines();
        let ready = next_line(&mut stdout).await?;
        if ready != "ready" {
            bail!("the API server process said {ready:?} instead of ready");
        }
        let client = new_client(&scratch.path().join("kubeconfig")).await?;
        Ok(ApiServerProcess {
            child,
            stdin,
            stdout,
            client,
            scratch,
        })
    }

    /// A new client of the server, with no connection yet: a measured peer made with it
    /// opens its own connections (TLS handshakes included) within its measured time, as
    /// the garden's process must.
    pub(crate) async fn fresh_client(&self) -> anyhow::Result<kube::Client> {
        new_client(&self.kubeconfig_path()).await
    }

    /// The kubeconfig of the server (0600, in a scratch directory removed with it).
    pub(crate) fn kubeconfig_path(&self) -> std::path::PathBuf {
        self.scratch.path().join("kubeconfig")
    }

    /// The child's pid, for its /proc readings.
    pub(crate) fn pid(&self) -> String {
        self.child.id().map(|p| p.to_string()).unwrap_or_default()
    }

    async fn ask(&mut self, line: &str) -> anyhow::Result<String> {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .context("writing to the API server process")?;
        self.stdin.flush().await?;
        next_line(&mut self.stdout).await
    }

    /// Records the server's requests from now on (the writes counted start here).
    pub(crate) async fn record(&mut self) -> anyhow::Result<()> {
        match self.ask("record").await?.as_str() {
            "ok" => Ok(()),
            other => bail!("the API server process said {other:?} to record"),
        }
    }

    /// The requests recorded since the last [`Self::record`], reads included, by `verb
    /// resource[/subresource]` (`verb /path` for non-resource URLs).
    pub(crate) async fn requests(&mut self) -> anyhow::Result<BTreeMap<String, usize>> {
        let line = self.ask("requests").await?;
        serde_json::from_str(&line).context("the API server process' requests")
    }

    /// Closes the child's stdin and waits for it to end.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let ApiServerProcess {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = child.wait().await.context("waiting for the API server")?;
        if !status.success() {
            bail!("the API server process ended with {status}");
        }
        Ok(())
    }
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> anyhow::Result<String> {
    lines
        .next_line()
        .await
        .context("reading from the API server process")?
        .context("the API server process ended")
}

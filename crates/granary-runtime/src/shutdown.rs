//! The signals that stop a long-running subcommand gracefully: SIGTERM (how Kubernetes
//! stops a pod) and SIGINT (Ctrl-C). The handlers are installed when
//! [`ShutdownSignals::install`] is called, before any work starts, so a signal that
//! arrives during start-up is not lost to the default action (which would kill the
//! process without releasing its leader Lease).

/// Installed SIGTERM/SIGINT handlers; [`ShutdownSignals::wait`] resolves on the first.
pub struct ShutdownSignals {
    #[cfg(unix)]
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl ShutdownSignals {
    /// Installs the handlers (must run inside a tokio runtime). Should that fail, Ctrl-C
    /// alone is waited for, with a warning.
    pub fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let handlers = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot handle SIGTERM; only Ctrl-C stops gracefully");
                    None
                }
            };
            ShutdownSignals { handlers }
        }
        #[cfg(not(unix))]
        {
            ShutdownSignals {}
        }
    }

    /// Waits for the first signal and returns its name.
    pub async fn wait(self) -> &'static str {
        #[cfg(unix)]
        if let Some((mut term, mut int)) = self.handlers {
            return tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

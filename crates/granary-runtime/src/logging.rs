//! Log setup for every subcommand: `tracing` to stderr (or a file), as text for people
//! or JSON lines for log collectors (`--log-format`), filtered by `--log-level` or
//! `RUST_LOG`.
//!
//! Whatever the filter, kube's client never gets to log a response body: when a
//! response does not decode it logs the whole body at WARN (`"{text}, {error:?}"`), and
//! a body can be a list of Secrets with their data. [`NoResponseBodies`] drops those
//! events; the error itself still reaches the caller, which logs it without the body.

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// The log formats `--log-format` accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber, writing to stderr. `level` is a tracing filter
/// (`info`, `granary=debug,kube=warn`); `RUST_LOG` wins when set. Calling it twice keeps
/// the first.
pub fn init(format: LogFormat, level: &str) -> Result<(), LoggingError> {
    // Colours only for a person at a terminal: piped or collected logs get none.
    use std::io::IsTerminal;
    init_with(
        format,
        level,
        std::io::stderr().is_terminal(),
        std::io::stderr,
    )
}

/// [`init`] writing to `writer` (`ansi`: colours, for a terminal).
pub fn init_with<W>(
    format: LogFormat,
    level: &str,
    ansi: bool,
    writer: W,
) -> Result<(), LoggingError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => EnvFilter::try_new(env),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|e| LoggingError::Filter(e.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    let result = match format {
        LogFormat::Text => builder.finish().with(NoResponseBodies).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .finish()
            .with(NoResponseBodies)
            .try_init(),
    };
    // Already initialised (e.g. by a test harness): keep the existing subscriber.
    let _ = result;
    Ok(())
}

/// The only messages kube's client modules may log: their own short notes. Everything
/// else they log embeds a response body or a Status built from one (a failed decode, an
/// error response); the caller gets that as the error and logs it without the body.
const KUBE_CLIENT_MESSAGES: [&str; 8] = [
    "timeout in poll",
    "eof in poll",
    "requesting",
    "stream closed",
    "failed with status",
    "failed with error",
    "Server cert bypassed",
    "failed to reload CA bundle",
];

/// A layer that vetoes kube client events carrying a response body (see the module
/// docs). Events of every other target pass untouched.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoResponseBodies;

impl NoResponseBodies {
    /// Whether an event of `target` with `message` may be logged.
    pub fn allows(target: &str, message: &str) -> bool {
        if !target.starts_with("kube_client::client") {
            return true;
        }
        KUBE_CLIENT_MESSAGES
            .iter()
            .any(|known| message.starts_with(known))
    }
}

struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for NoResponseBodies {
    fn event_enabled(&self, event: &Event<'_>, _: Context<'_, S>) -> bool {
        let target = event.metadata().target();
        if !target.starts_with("kube_client::client") {
            return true;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        Self::allows(target, &message.0)
    }
}

/// A log level or filter that tracing cannot parse.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("--log-level: {0}")]
    Filter(String),
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn rejects_a_bad_filter_naming_the_flag() {
        // SAFETY of the test: RUST_LOG is not set by the test runner here.
        if std::env::var("RUST_LOG").is_ok() {
            return;
        }
        let err = init(LogFormat::Text, "granary=loud").expect_err("bad level");
        assert!(err.to_string().starts_with("--log-level"));
        init(LogFormat::Json, "info").expect("valid filter");
    }

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// kube-client 5 logs `"{}, {:?}", text, e` at WARN when a response does not decode
    /// (`Client::request`); a Secret list's body holds the Secrets' data.
    #[test]
    fn a_kube_client_decode_failure_never_logs_the_body() {
        let out = Lines::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new("debug"))
            .with_writer(move || writer.clone())
            .finish()
            .with(NoResponseBodies);
        tracing::subscriber::with_default(subscriber, || {
            let body = r#"{"kind":"SecretList","items":[{"data":{"key":"c2VjcmV0LXZhbHVl"}}]}"#;
            tracing::warn!(target: "kube_client::client", "{}, {:?}", body, "Error(\"invalid type\")");
            tracing::debug!(target: "kube_client::client", "Unsuccessful data error parse: {}", body);
            tracing::warn!(target: "kube_client::client", "eof in poll: {:?}", "closed");
            tracing::warn!(target: "granary_seed", error = "Error deserializing response", "watch failed; retrying");
        });
        let logged = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(!logged.contains("c2VjcmV0LXZhbHVl"), "{logged}");
        assert!(logged.contains("eof in poll"), "{logged}");
        assert!(logged.contains("watch failed; retrying"), "{logged}");
    }

    #[test]
    fn only_known_kube_client_messages_pass() {
        assert!(NoResponseBodies::allows(
            "granary_seed",
            "anything {\"data\"}"
        ));
        assert!(NoResponseBodies::allows(
            "kube_client::client::builder",
            "requesting"
        ));
        assert!(!NoResponseBodies::allows(
            "kube_client::client",
            "Unsuccessful: Status { message: \"x\" }"
        ));
        assert!(!NoResponseBodies::allows(
            "kube_client::client",
            "{\"items\":[]}, Error(\"x\")"
        ));
        assert!(!NoResponseBodies::allows(
            "kube_client::client",
            "Status from {\"kind\":\"Status\"}"
        ));
    }
}

//! Log setup for every subcommand: `tracing` to stderr, as text for people or JSON lines
//! for log collectors (`--log-format`), filtered by `--log-level` or `RUST_LOG`.
//!
//! Whatever the filter, response bodies never reach a log line: kube's client logs the
//! whole body of a response it cannot decode (`Client::request`:
//! `warn!("{}, {:?}", text, e)`), and that body can be a Secret list with every
//! credential in it. [`WithoutResponseBodies`] drops those events; the caller still gets
//! the error (`kube::Error::SerdeError`, which names a position, not the body) and
//! reports it.

use std::fmt::Debug;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
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

/// The target of kube's client module, whose decode-failure warnings carry bodies.
const KUBE_CLIENT: &str = "kube_client::client";
/// Warnings of that module that carry no body (a watch's timeout or end of stream).
const BODILESS_KUBE_WARNINGS: &[&str] = &["timeout in poll", "eof in poll"];

/// A layer that disables, for every other layer, the kube client's warnings that quote
/// a response body. It fails closed: a warning of that module is let through only when
/// it is one known to carry no body.
#[derive(Clone, Copy, Debug, Default)]
pub struct WithoutResponseBodies;

/// The `message` field of an event, formatted.
#[derive(Default)]
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for WithoutResponseBodies {
    fn event_enabled(&self, event: &Event<'_>, _ctx: Context<'_, S>) -> bool {
        let meta = event.metadata();
        if meta.target() != KUBE_CLIENT || *meta.level() != Level::WARN {
            return true;
        }
        let mut message = Message::default();
        event.record(&mut message);
        BODILESS_KUBE_WARNINGS
            .iter()
            .any(|p| message.0.starts_with(p))
    }
}

/// Installs the global subscriber. `level` is a tracing filter (`info`,
/// `granary=debug,kube=warn`); `RUST_LOG` wins when set. Calling it twice keeps the first.
pub fn init(format: LogFormat, level: &str) -> Result<(), LoggingError> {
    init_with_writer(format, level, std::io::stderr, true)
}

/// [`init`] writing to `writer` (`ansi`: colour text output).
pub fn init_with_writer<W>(
    format: LogFormat,
    level: &str,
    writer: W,
    ansi: bool,
) -> Result<(), LoggingError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => EnvFilter::try_new(env),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|e| LoggingError::Filter(e.to_string()))?;
    let registry = tracing_subscriber::registry()
        .with(WithoutResponseBodies)
        .with(filter);
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer);
    let result = match format {
        LogFormat::Text => registry.with(layer).try_init(),
        LogFormat::Json => registry.with(layer.json().flatten_event(true)).try_init(),
    };
    // Already initialised (e.g. by a test harness): keep the existing subscriber.
    let _ = result;
    Ok(())
}

/// A log level or filter that tracing cannot parse.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("--log-level: {0}")]
    Filter(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

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

    /// Everything written, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn kube_client_decode_warnings_never_show_the_body() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::registry()
            .with(WithoutResponseBodies)
            .with(EnvFilter::new("trace"))
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || writer.clone()),
            );
        tracing::subscriber::with_default(subscriber, || {
            let body = r#"{"kind":"SecretList","items":[{"data":{"key":"czNjcjN0LXZhbHVl"}}]}"#;
            let err = serde_json::from_str::<u8>(body).unwrap_err();
            // What kube_client::Client::request logs when a body does not decode.
            tracing::warn!(target: "kube_client::client", "{}, {:?}", body, err);
            tracing::warn!(target: "kube_client::client", "timeout in poll: deadline has elapsed");
            tracing::warn!(target: "granary::seed", "an unrelated warning");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("czNjcjN0LXZhbHVl"), "{text}");
        assert!(text.contains("timeout in poll"), "{text}");
        assert!(text.contains("an unrelated warning"), "{text}");
    }
}

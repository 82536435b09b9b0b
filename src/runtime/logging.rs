//! Log setup for every subcommand: `tracing` to stderr, as text for people or JSON lines
//! for log collectors (`--log-format`), filtered by `--log-level` or `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// The log formats `--log-format` accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber. `level` is a tracing filter (`info`,
/// `granary=debug,kube=warn`); `RUST_LOG` wins when set. Calling it twice keeps the first.
pub fn init(format: LogFormat, level: &str) -> Result<(), LoggingError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => EnvFilter::try_new(env),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|e| LoggingError::Filter(e.to_string()))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
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
}

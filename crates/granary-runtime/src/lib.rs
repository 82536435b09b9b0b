//! Plumbing every Granary controller shares: the [`clock::Clock`], `lastOperation` and
//! `lastError` builders ([`status`]), condition updates ([`conditions`]), the one readiness function for extension-style
//! objects ([`readiness`]), the mapping from failures to Gardener error codes
//! ([`error_codes`]), the operation an object asks for ([`operation`]), configuration
//! files ([`config`]), log setup ([`logging`]) and failpoints for deterministic crash tests ([`failpoints`]), metrics ([`metrics`]), the
//! health/metrics endpoint ([`health`]), leader election and lease renewal ([`leader`])
//! `--object-selector` ([`selector`]) and the SIGTERM/SIGINT handlers of long-running
//! subcommands ([`shutdown`]).

pub mod backoff;
pub mod clock;
pub mod conditions;
pub mod config;
pub mod duration;
pub mod error_codes;
pub mod failpoints;
pub mod health;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod operation;
pub mod passes;
pub mod readiness;
pub mod redact;
pub mod selector;
pub mod shutdown;
pub mod status;
pub mod tls_listener;
pub mod work_queue;

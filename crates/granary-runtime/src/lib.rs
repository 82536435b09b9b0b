//! Plumbing every Granary controller shares; no controller lives here.
//!
//! - Driving controllers: the [`work_queue`] (keys scheduled now or at a time,
//!   deduplicated, handed to a bounded number of workers), [`passes`] (one decision over
//!   the whole set of objects after every wake-up) and the watches' [`backoff`]; when to
//!   use which is in docs/controllers.md#which-driver-to-use.
//! - Gardener's status conventions: `lastOperation` and `lastError` builders
//!   ([`status`]), condition updates ([`conditions`]), the one readiness function for
//!   extension-style objects ([`readiness`]), failures mapped to Gardener error codes
//!   ([`error_codes`]) and the operation an object asks for ([`operation`]).
//! - Running a process: configuration files ([`config`], with Go-style [`duration`]s),
//!   log setup ([`logging`]), the metrics registry ([`metrics`]) and the health/metrics
//!   endpoint ([`health`]), leader election and lease renewal ([`leader`]), the
//!   SIGTERM/SIGINT handlers ([`shutdown`]) and a TLS listener ([`tls_listener`]).
//! - Tests and isolation: the [`clock::Clock`], failpoints for deterministic crash tests
//!   ([`failpoints`]), `--object-selector` ([`selector`]) and secret-free parser errors
//!   ([`redact`]).

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

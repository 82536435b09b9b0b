//! Named failpoints for deterministic crash and fault tests (see
//! docs/architecture.md#failpoints). Always compiled in; when `GRANARY_FAILPOINTS` is
//! unset a hit costs one atomic load.
//!
//! Syntax: `GRANARY_FAILPOINTS="name=N:action;other=*:error"` — on the `N`th hit (1-based)
//! of failpoint `name` (or on every hit with `*`), `abort` ends the process at once (as a
//! crash would: no destructors, no flushing) and `error` makes [`hit`] return an error.
//! Code marks a point with `failpoints::hit("seed.entry.after-delete")?`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable read at the first hit.
pub const ENV_VAR: &str = "GRANARY_FAILPOINTS";

/// Returned by [`hit`] when an `error` failpoint fires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failpoint {name} triggered")]
pub struct FailpointError {
    pub name: String,
}

/// A malformed failpoint specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {ENV_VAR} entry {entry:?}: {reason}")]
pub struct SpecError {
    pub entry: String,
    pub reason: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Abort,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Nth(u64),
    Every,
}

#[derive(Debug)]
struct Point {
    when: When,
    action: Action,
    hits: u64,
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static POINTS: OnceLock<Mutex<HashMap<String, Point>>> = OnceLock::new();
static FROM_ENV: OnceLock<()> = OnceLock::new();

fn points() -> &'static Mutex<HashMap<String, Point>> {
    POINTS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn parse(spec: &str) -> Result<HashMap<String, Point>, SpecError> {
    let mut out = HashMap::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let err = |reason| SpecError {
            entry: entry.to_string(),
            reason,
        };
        let (name, rest) = entry
            .split_once('=')
            .ok_or_else(|| err("expected name=N:action"))?;
        let (when, action) = rest
            .split_once(':')
            .ok_or_else(|| err("expected name=N:action"))?;
        let when = match when.trim() {
            "*" => When::Every,
            n => match n.parse::<u64>() {
                Ok(n) if n > 0 => When::Nth(n),
                _ => return Err(err("N must be a positive number or *")),
            },
        };
        let action = match action.trim() {
            "abort" => Action::Abort,
            "error" => Action::Error,
            _ => return Err(err("action must be abort or error")),
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(err("empty failpoint name"));
        }
        out.insert(
            name.to_string(),
            Point {
                when,
                action,
                hits: 0,
            },
        );
    }
    Ok(out)
}

/// Replaces the active failpoints (for in-process tests). An empty spec clears them.
pub fn configure(spec: &str) -> Result<(), SpecError> {
    let parsed = parse(spec)?;
    let active = !parsed.is_empty();
    *points().lock().unwrap_or_else(|p| p.into_inner()) = parsed;
    ACTIVE.store(active, Ordering::Release);
    Ok(())
}

/// Reads `GRANARY_FAILPOINTS` once. Called by the CLI at start-up so a malformed value is
/// reported at once instead of being ignored.
pub fn init_from_env() -> Result<(), SpecError> {
    let mut result = Ok(());
    FROM_ENV.get_or_init(|| {
        if let Ok(spec) = std::env::var(ENV_VAR) {
            result = configure(&spec);
        }
    });
    result
}

/// Marks failpoint `name`. Returns an error when an `error` action fires, ends the
/// process when an `abort` action fires, and otherwise does nothing.
pub fn hit(name: &str) -> Result<(), FailpointError> {
    if FROM_ENV.get().is_none() {
        // A malformed spec was already reported by the CLI; library users without the
        // CLI get no failpoints rather than a panic.
        let _ = init_from_env();
    }
    if !ACTIVE.load(Ordering::Acquire) {
        return Ok(());
    }
    let action = {
        let mut map = points().lock().unwrap_or_else(|p| p.into_inner());
        let Some(point) = map.get_mut(name) else {
            return Ok(());
        };
        point.hits += 1;
        let fires = match point.when {
            When::Every => true,
            When::Nth(n) => point.hits == n,
        };
        if !fires {
            return Ok(());
        }
        point.action
    };
    match action {
        Action::Abort => {
            eprintln!("failpoint {name} triggered: aborting");
            std::process::abort();
        }
        Action::Error => Err(FailpointError {
            name: name.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_fires_on_the_nth_hit_only() {
        // One test touches the global registry, so tests cannot race on it.
        configure("a=2:error; b=*:error").expect("valid spec");
        assert!(hit("a").is_ok());
        assert_eq!(hit("a"), Err(FailpointError { name: "a".into() }));
        assert!(hit("a").is_ok());
        assert!(hit("b").is_err());
        assert!(hit("b").is_err());
        assert!(hit("unknown").is_ok());
        configure("").expect("empty spec clears");
        assert!(hit("b").is_ok());

        for bad in [
            "x",
            "x=1",
            "x=0:error",
            "x=1:explode",
            "=1:error",
            "x=y:abort",
        ] {
            let e = configure(bad).expect_err(bad);
            assert!(e.to_string().contains(ENV_VAR));
        }
    }
}

//! The one readiness function for extension-style objects (Gardener's
//! `health.CheckBackupEntry`/`CheckExtensionObject`): an object is ready when its last
//! operation succeeded for the current generation, no operation annotation is waiting,
//! no error is recorded, and the success is not older than the last requested reconcile.

use chrono::{DateTime, Utc};
use granary_api::common::{ErrorCode, LastError, LastOperation, LastOperationState};

/// What readiness looks at, borrowed from any extension-style object.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadinessInput<'a> {
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// Value of `gardener.cloud/operation`, if present.
    pub operation_annotation: Option<&'a str>,
    /// Value of `gardener.cloud/timestamp` (RFC 3339), if present: the time the last
    /// reconcile was requested.
    pub requested_at: Option<DateTime<Utc>>,
    pub last_error: Option<&'a LastError>,
    pub last_operation: Option<&'a LastOperation>,
}

/// The verdict: ready, still working, or failed with the object's error codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not done yet; the text says what is awaited.
    Progressing(String),
    /// The object reports an error.
    Failed {
        description: String,
        codes: Vec<ErrorCode>,
    },
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Readiness::Ready)
    }
}

/// Decides readiness. Checks in Gardener's order: error first (so a failing object is
/// reported as failing, not as waiting), then generation, annotation, state, freshness.
pub fn readiness(input: ReadinessInput<'_>) -> Readiness {
    if let Some(err) = input.last_error {
        return Readiness::Failed {
            description: err.description.clone(),
            codes: err.codes.clone(),
        };
    }
    let generation = input.generation.unwrap_or(0);
    match input.observed_generation {
        Some(observed) if observed == generation => {}
        observed => {
            return Readiness::Progressing(format!(
                "observed generation {} is behind generation {generation}",
                observed.map_or_else(|| "none".to_string(), |g| g.to_string())
            ));
        }
    }
    if let Some(op) = input.operation_annotation {
        return Readiness::Progressing(format!("operation {op:?} has not been picked up yet"));
    }
    let Some(last) = input.last_operation else {
        return Readiness::Progressing("no operation has been recorded yet".to_string());
    };
    match last.state {
        LastOperationState::Succeeded => {}
        LastOperationState::Failed | LastOperationState::Error | LastOperationState::Aborted => {
            return Readiness::Failed {
                description: last.description.clone(),
                codes: Vec::new(),
            };
        }
        state => {
            return Readiness::Progressing(format!(
                "last operation is {state}: {}",
                last.description
            ));
        }
    }
    if let Some(requested) = input.requested_at
        && last.last_update_time < requested
    {
        return Readiness::Progressing(
            "last success is older than the requested reconcile".to_string(),
        );
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status;
    use chrono::{Duration, TimeZone};
    use granary_api::common::LastOperationType;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
    }

    fn ready_input(op: &LastOperation) -> ReadinessInput<'_> {
        ReadinessInput {
            generation: Some(3),
            observed_generation: Some(3),
            last_operation: Some(op),
            ..Default::default()
        }
    }

    #[test]
    fn succeeded_current_generation_is_ready() {
        let op = status::succeeded(LastOperationType::Reconcile, "ok", t0());
        assert_eq!(readiness(ready_input(&op)), Readiness::Ready);
    }

    #[test]
    fn every_missing_condition_blocks_readiness() {
        let op = status::succeeded(LastOperationType::Reconcile, "ok", t0());
        let err = status::last_error("denied", [ErrorCode::InfraUnauthorized], t0());

        let with_error = ReadinessInput {
            last_error: Some(&err),
            ..ready_input(&op)
        };
        assert_eq!(
            readiness(with_error),
            Readiness::Failed {
                description: "denied".into(),
                codes: vec![ErrorCode::InfraUnauthorized]
            }
        );

        let stale = ReadinessInput {
            observed_generation: Some(2),
            ..ready_input(&op)
        };
        assert!(matches!(readiness(stale), Readiness::Progressing(m) if m.contains("generation")));

        let unobserved = ReadinessInput {
            observed_generation: None,
            ..ready_input(&op)
        };
        assert!(!readiness(unobserved).is_ready());

        let annotated = ReadinessInput {
            operation_annotation: Some("reconcile"),
            ..ready_input(&op)
        };
        assert!(
            matches!(readiness(annotated), Readiness::Progressing(m) if m.contains("reconcile"))
        );

        let none = ReadinessInput {
            last_operation: None,
            ..ready_input(&op)
        };
        assert!(!readiness(none).is_ready());

        let processing = status::processing(LastOperationType::Reconcile, "working", t0());
        assert!(matches!(
            readiness(ready_input(&processing)),
            Readiness::Progressing(_)
        ));

        let failed = status::last_operation(
            LastOperationType::Reconcile,
            LastOperationState::Failed,
            50,
            "boom",
            t0(),
        );
        assert!(matches!(
            readiness(ready_input(&failed)),
            Readiness::Failed { .. }
        ));

        let old = ReadinessInput {
            requested_at: Some(t0() + Duration::seconds(1)),
            ..ready_input(&op)
        };
        assert!(!readiness(old).is_ready());
        let fresh = ReadinessInput {
            requested_at: Some(t0()),
            ..ready_input(&op)
        };
        assert!(readiness(fresh).is_ready());
    }
}

//! Builders for Gardener's `lastOperation` and `lastError`, so every controller writes
//! them the same way: Processing (progress 1) → Succeeded (100) or Error (50) with codes,
//! Pending for a scheduled deletion.

use chrono::{DateTime, Utc};
use granary_api::common::{
    ErrorCode, LastError, LastOperation, LastOperationState, LastOperationType,
};

/// Progress Gardener reports for an operation that has just started.
pub const PROGRESS_STARTED: i32 = 1;
/// Progress Gardener reports for an operation that failed part-way.
pub const PROGRESS_ERROR: i32 = 50;
/// Progress of a finished operation.
pub const PROGRESS_DONE: i32 = 100;

/// `lastOperation` for an operation that has started.
pub fn processing(
    op: LastOperationType,
    description: impl Into<String>,
    now: DateTime<Utc>,
) -> LastOperation {
    last_operation(
        op,
        LastOperationState::Processing,
        PROGRESS_STARTED,
        description,
        now,
    )
}

/// `lastOperation` for an operation that finished.
pub fn succeeded(
    op: LastOperationType,
    description: impl Into<String>,
    now: DateTime<Utc>,
) -> LastOperation {
    last_operation(
        op,
        LastOperationState::Succeeded,
        PROGRESS_DONE,
        description,
        now,
    )
}

/// `lastOperation` for an operation that failed and will be retried.
pub fn errored(
    op: LastOperationType,
    description: impl Into<String>,
    now: DateTime<Utc>,
) -> LastOperation {
    last_operation(
        op,
        LastOperationState::Error,
        PROGRESS_ERROR,
        description,
        now,
    )
}

/// `lastOperation` for an operation that waits for something scheduled (e.g. the end of
/// a deletion grace period).
pub fn pending(
    op: LastOperationType,
    description: impl Into<String>,
    now: DateTime<Utc>,
) -> LastOperation {
    last_operation(
        op,
        LastOperationState::Pending,
        PROGRESS_STARTED,
        description,
        now,
    )
}

/// Any `lastOperation`.
pub fn last_operation(
    op: LastOperationType,
    state: LastOperationState,
    progress: i32,
    description: impl Into<String>,
    now: DateTime<Utc>,
) -> LastOperation {
    LastOperation {
        description: description.into(),
        last_update_time: now,
        progress,
        state,
        type_: op,
    }
}

/// `lastError` with its codes, sorted and deduplicated so that status patches are stable.
pub fn last_error(
    description: impl Into<String>,
    codes: impl IntoIterator<Item = ErrorCode>,
    now: DateTime<Utc>,
) -> LastError {
    let mut codes: Vec<ErrorCode> = codes.into_iter().collect();
    codes.sort();
    codes.dedup();
    LastError {
        description: description.into(),
        task_id: None,
        codes,
        last_update_time: Some(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
    }

    #[test]
    fn builders_use_gardener_progress_values() {
        let p = processing(LastOperationType::Reconcile, "reconciling", t0());
        assert_eq!((p.state, p.progress), (LastOperationState::Processing, 1));
        let s = succeeded(LastOperationType::Reconcile, "done", t0());
        assert_eq!((s.state, s.progress), (LastOperationState::Succeeded, 100));
        let e = errored(LastOperationType::Delete, "failed", t0());
        assert_eq!(
            (e.state, e.progress, e.type_),
            (LastOperationState::Error, 50, LastOperationType::Delete)
        );
        let w = pending(LastOperationType::Delete, "deletion scheduled", t0());
        assert_eq!(w.state, LastOperationState::Pending);
    }

    #[test]
    fn last_error_codes_are_sorted_and_unique() {
        let e = last_error(
            "denied",
            [
                ErrorCode::InfraUnauthorized,
                ErrorCode::InfraUnauthenticated,
                ErrorCode::InfraUnauthorized,
            ],
            t0(),
        );
        assert_eq!(
            e.codes,
            vec![
                ErrorCode::InfraUnauthenticated,
                ErrorCode::InfraUnauthorized
            ]
        );
        assert_eq!(e.last_update_time, Some(t0()));
    }
}

//! Which operation an extension-style object asks for now (Gardener's
//! `ComputeOperationType`), so every extension controller dispatches the same way.

use granary_api::common::{LastOperation, LastOperationState, LastOperationType};

/// Value of `gardener.cloud/operation` asking for a reconcile.
pub const OPERATION_RECONCILE: &str = "reconcile";
/// Value of `gardener.cloud/operation` asking to hand the object over to another seed.
pub const OPERATION_MIGRATE: &str = "migrate";
/// Value of `gardener.cloud/operation` asking to take the object over from another seed.
pub const OPERATION_RESTORE: &str = "restore";

/// In Gardener's order: a `migrate` annotation, then deletion, then a `restore`
/// annotation, then Create when nothing was recorded yet, then an unfinished Create,
/// Migrate or Restore continues, and otherwise Reconcile.
pub fn operation_type(
    operation_annotation: Option<&str>,
    deleting: bool,
    last_operation: Option<&LastOperation>,
) -> LastOperationType {
    if operation_annotation == Some(OPERATION_MIGRATE) {
        return LastOperationType::Migrate;
    }
    if deleting {
        return LastOperationType::Delete;
    }
    if operation_annotation == Some(OPERATION_RESTORE) {
        return LastOperationType::Restore;
    }
    let Some(last) = last_operation else {
        return LastOperationType::Create;
    };
    match last.type_ {
        t @ (LastOperationType::Create
        | LastOperationType::Migrate
        | LastOperationType::Restore)
            if last.state != LastOperationState::Succeeded =>
        {
            t
        }
        _ => LastOperationType::Reconcile,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status;
    use chrono::Utc;

    #[test]
    fn gardener_order() {
        let now = Utc::now();
        let done = status::succeeded(LastOperationType::Create, "ok", now);
        let creating = status::errored(LastOperationType::Create, "failed", now);
        let restoring = status::processing(LastOperationType::Restore, "…", now);
        let reconciling = status::errored(LastOperationType::Reconcile, "failed", now);

        assert_eq!(
            operation_type(Some("migrate"), true, None),
            LastOperationType::Migrate
        );
        assert_eq!(
            operation_type(Some("restore"), true, None),
            LastOperationType::Delete
        );
        assert_eq!(
            operation_type(Some("restore"), false, Some(&done)),
            LastOperationType::Restore
        );
        assert_eq!(operation_type(None, false, None), LastOperationType::Create);
        assert_eq!(
            operation_type(Some("reconcile"), false, None),
            LastOperationType::Create
        );
        assert_eq!(
            operation_type(None, false, Some(&creating)),
            LastOperationType::Create
        );
        assert_eq!(
            operation_type(None, false, Some(&restoring)),
            LastOperationType::Restore
        );
        assert_eq!(
            operation_type(None, false, Some(&done)),
            LastOperationType::Reconcile
        );
        assert_eq!(
            operation_type(Some("reconcile"), false, Some(&reconciling)),
            LastOperationType::Reconcile
        );
    }
}

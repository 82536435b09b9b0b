//! Whether a shoot's backups are protected: the one judgement behind `granary status`'s
//! list of unprotected shoots and the garden's `granary_garden_shoot_unprotected` gauge
//! (and so the alert on it). Pure: it reads a shoot and the entry its name points at.

use granary_api::common::LastOperationState;
use granary_api::core::{BackupEntry, Shoot};

/// Where a shoot's backups stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Not judged: the shoot is being deleted or has no seed yet (nothing to back up).
    NotApplicable,
    /// Its BackupEntry exists and its last operation Succeeded without an error.
    Protected,
    /// Anything else, and why.
    Unprotected(Why),
}

/// Why a shoot is not protected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// No BackupEntry (yet, or the garden cannot place one: see the shoot's events).
    NoEntry,
    /// The entry exists but no seed has reported on it.
    NoStatus,
    /// The entry's last operation is not Succeeded (or carries an error): its state and
    /// the error's description, else the operation's.
    State {
        state: LastOperationState,
        description: String,
    },
}

/// Judges `shoot`, whose BackupEntry (the one named by [`Shoot::backup_entry_name`] in
/// its namespace) is `entry`.
pub fn protection(shoot: &Shoot, entry: Option<&BackupEntry>) -> Protection {
    let has_seed = shoot
        .spec
        .seed_name
        .as_deref()
        .is_some_and(|n| !n.is_empty());
    if shoot.metadata.deletion_timestamp.is_some() || !has_seed {
        return Protection::NotApplicable;
    }
    let Some(entry) = entry else {
        return Protection::Unprotected(Why::NoEntry);
    };
    let status = entry.status.as_ref();
    let Some(op) = status.and_then(|s| s.last_operation.as_ref()) else {
        return Protection::Unprotected(Why::NoStatus);
    };
    let error = status.and_then(|s| s.last_error.as_ref());
    match (&op.state, error) {
        (LastOperationState::Succeeded, None) => Protection::Protected,
        (state, error) => Protection::Unprotected(Why::State {
            state: *state,
            description: error
                .map(|e| e.description.clone())
                .unwrap_or_else(|| op.description.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::common::{LastError, LastOperation, LastOperationType};
    use granary_api::core::BackupEntryStatus;

    fn shoot(seed: Option<&str>, deleting: bool) -> Shoot {
        let mut s: Shoot = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "a", "namespace": "garden-p", "uid": "u1"},
            "spec": {"cloudProfileName": "aws", "region": "eu"}
        }))
        .expect("a shoot");
        s.spec.seed_name = seed.map(str::to_string);
        if deleting {
            s.metadata.deletion_timestamp =
                serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).expect("a time");
        }
        s
    }

    fn entry(state: Option<LastOperationState>, error: Option<&str>) -> BackupEntry {
        let mut e: BackupEntry = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "BackupEntry",
            "metadata": {"name": "e", "namespace": "garden-p"},
            "spec": {"bucketName": "b"}
        }))
        .expect("an entry");
        e.status = state.map(|state| BackupEntryStatus {
            last_operation: Some(LastOperation {
                description: "op says".into(),
                last_update_time: chrono::Utc::now(),
                progress: 100,
                state,
                type_: LastOperationType::Reconcile,
            }),
            last_error: error.map(|d| LastError {
                description: d.into(),
                task_id: None,
                codes: Vec::new(),
                last_update_time: None,
            }),
            ..Default::default()
        });
        e
    }

    #[test]
    fn each_way_a_shoot_can_stand() {
        let live = shoot(Some("s1"), false);
        assert_eq!(
            protection(&shoot(None, false), None),
            Protection::NotApplicable
        );
        assert_eq!(
            protection(&shoot(Some("s1"), true), None),
            Protection::NotApplicable
        );
        assert_eq!(
            protection(&live, None),
            Protection::Unprotected(Why::NoEntry)
        );
        assert_eq!(
            protection(&live, Some(&entry(None, None))),
            Protection::Unprotected(Why::NoStatus)
        );
        assert_eq!(
            protection(
                &live,
                Some(&entry(Some(LastOperationState::Succeeded), None))
            ),
            Protection::Protected
        );
        assert_eq!(
            protection(
                &live,
                Some(&entry(
                    Some(LastOperationState::Succeeded),
                    Some("left over")
                ))
            ),
            Protection::Unprotected(Why::State {
                state: LastOperationState::Succeeded,
                description: "left over".into()
            })
        );
        assert_eq!(
            protection(&live, Some(&entry(Some(LastOperationState::Error), None))),
            Protection::Unprotected(Why::State {
                state: LastOperationState::Error,
                description: "op says".into()
            })
        );
    }
}

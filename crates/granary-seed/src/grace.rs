//! The deletion grace period of a BackupEntry (docs/architecture.md#grace-period).
//! Computed from timestamps only, so a restart keeps the same schedule.

use crate::config::SeedBackupEntryController;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// The grace period for an entry whose shoot had `purpose`: the configured period when no
/// purposes are listed, when the entry has no purpose, or when its purpose is listed;
/// otherwise none.
pub fn grace_period(config: &SeedBackupEntryController, purpose: Option<&str>) -> Duration {
    let purposes = &config.deletion_grace_period_shoot_purposes;
    let applies = match purpose {
        None => true,
        Some(p) => purposes.is_empty() || purposes.iter().any(|listed| listed == p),
    };
    if applies {
        config.grace_period()
    } else {
        Duration::ZERO
    }
}

/// What to do with an entry whose deletion was requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionSchedule {
    /// Delete its data now: forced, or no grace period applies (a bucket).
    Now,
    /// Delete its data now: its grace period ended at this time. An entry still there
    /// long after it is stuck (`granary_backupentry_deletion_due_timestamp_seconds`).
    Past(DateTime<Utc>),
    /// Wait: show Pending "deletion scheduled for <time>" and come back at that time.
    At(DateTime<Utc>),
}

impl DeletionSchedule {
    /// When the grace period ends or ended, if one applies.
    pub fn due(self) -> Option<DateTime<Utc>> {
        match self {
            DeletionSchedule::Now => None,
            DeletionSchedule::Past(due) | DeletionSchedule::At(due) => Some(due),
        }
    }
}

/// When the data of an entry may be deleted. `requested_at` is the garden BackupEntry's
/// deletionTimestamp (copied to the seed as an annotation); `force` is the force-deletion
/// annotation.
pub fn deletion_schedule(
    requested_at: DateTime<Utc>,
    grace: Duration,
    force: bool,
    now: DateTime<Utc>,
) -> DeletionSchedule {
    if force {
        return DeletionSchedule::Now;
    }
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    match requested_at.checked_add_signed(grace) {
        Some(due) if due > now => DeletionSchedule::At(due),
        Some(due) => DeletionSchedule::Past(due),
        // Beyond the representable time: effectively never.
        None => DeletionSchedule::At(DateTime::<Utc>::MAX_UTC),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn config(
        hours: u32,
        override_secs: Option<u64>,
        purposes: &[&str],
    ) -> SeedBackupEntryController {
        SeedBackupEntryController {
            deletion_grace_period_hours: hours,
            deletion_grace_period: override_secs
                .map(|s| granary_runtime::config::ConfigDuration(Duration::from_secs(s))),
            deletion_grace_period_shoot_purposes: purposes.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn purpose_filter() {
        let all = config(24, None, &[]);
        assert_eq!(
            grace_period(&all, Some("evaluation")),
            Duration::from_secs(86400)
        );
        assert_eq!(grace_period(&all, None), Duration::from_secs(86400));
        let prod_only = config(24, None, &["production"]);
        assert_eq!(
            grace_period(&prod_only, Some("production")),
            Duration::from_secs(86400)
        );
        assert_eq!(grace_period(&prod_only, Some("evaluation")), Duration::ZERO);
        assert_eq!(
            grace_period(&prod_only, None),
            Duration::from_secs(86400),
            "no purpose keeps the grace period"
        );
        let seconds = config(24, Some(5), &[]);
        assert_eq!(
            grace_period(&seconds, None),
            Duration::from_secs(5),
            "the duration overrides the hours"
        );
    }

    #[test]
    fn schedule_counts_from_the_garden_deletion_time() {
        let requested = Utc
            .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date");
        let grace = Duration::from_secs(3600);
        let due = requested + chrono::Duration::seconds(3600);
        assert_eq!(
            deletion_schedule(requested, grace, false, requested),
            DeletionSchedule::At(due)
        );
        assert_eq!(
            deletion_schedule(requested, grace, false, due - chrono::Duration::seconds(1)),
            DeletionSchedule::At(due)
        );
        assert_eq!(
            deletion_schedule(requested, grace, false, due),
            DeletionSchedule::Past(due)
        );
        assert_eq!(
            deletion_schedule(requested, grace, true, requested),
            DeletionSchedule::Now
        );
        assert_eq!(
            deletion_schedule(requested, Duration::ZERO, false, requested),
            DeletionSchedule::Past(requested)
        );
        assert!(matches!(
            deletion_schedule(requested, Duration::MAX, false, requested),
            DeletionSchedule::At(_)
        ));
    }
}

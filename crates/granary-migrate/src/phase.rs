//! The phases of `granary migrate entry` and how they follow each other. The phase is
//! kept in the garden BackupEntry's annotation `granary.gardener.cloud/migration-phase`
//! (with the buckets and the old etcd replica count beside it), so an interrupted run
//! resumes where it stopped.

use std::fmt;

/// The phase annotation on the garden BackupEntry.
pub const ANNOTATION_PHASE: &str = "granary.gardener.cloud/migration-phase";
/// The old `etcd-main` replica count, recorded before the cut-over scales it down.
pub const ANNOTATION_ETCD_REPLICAS: &str = "granary.gardener.cloud/etcd-replicas";
/// The bucket the entry moves out of.
pub const ANNOTATION_SOURCE: &str = "granary.gardener.cloud/migration-source";
/// The bucket the entry moves into (also the request for a place there, see
/// [`granary_api::core::ANNOTATION_MIGRATION_TARGET`]).
pub const ANNOTATION_TARGET: &str = granary_api::core::ANNOTATION_MIGRATION_TARGET;
/// When etcd was scaled down (RFC 3339), for the downtime of a resumed cut-over.
pub const ANNOTATION_SCALED_DOWN_AT: &str = "granary.gardener.cloud/etcd-scaled-down-at";

/// Where a migration stands. `Plan` and `Done` are never stored: no annotation means
/// nothing was planned yet (or the migration finished and cleaned up its annotations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// List the source and write the manifest.
    Plan,
    /// Bulk copy with etcd still running.
    Copy,
    /// etcd down, final copy, switch the entry.
    CutOver,
    /// The entry is switched; bring etcd back.
    ScaleUp,
    /// Hand the source to a `source-<entry>` BackupEntry for deletion.
    Cleanup,
    Done,
}

/// A phase annotation this build does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {ANNOTATION_PHASE} value {0:?}")]
pub struct UnknownPhase(pub String);

impl Phase {
    /// The phase an annotation value records (`None`: not started).
    pub fn from_annotation(value: Option<&str>) -> Result<Phase, UnknownPhase> {
        match value {
            None | Some("") => Ok(Phase::Plan),
            Some("Copy") => Ok(Phase::Copy),
            Some("CutOver") => Ok(Phase::CutOver),
            Some("ScaleUp") => Ok(Phase::ScaleUp),
            Some("Cleanup") => Ok(Phase::Cleanup),
            Some(other) => Err(UnknownPhase(other.to_string())),
        }
    }

    /// The annotation value, `None` for the phases that are not stored.
    pub fn annotation(self) -> Option<&'static str> {
        match self {
            Phase::Plan | Phase::Done => None,
            Phase::Copy => Some("Copy"),
            Phase::CutOver => Some("CutOver"),
            Phase::ScaleUp => Some("ScaleUp"),
            Phase::Cleanup => Some("Cleanup"),
        }
    }

    /// The phase after this one completes.
    pub fn next(self) -> Phase {
        match self {
            Phase::Plan => Phase::Copy,
            Phase::Copy => Phase::CutOver,
            Phase::CutOver => Phase::ScaleUp,
            Phase::ScaleUp => Phase::Cleanup,
            Phase::Cleanup | Phase::Done => Phase::Done,
        }
    }

    /// True when etcd may be scaled down while this phase runs, so a failure must bring
    /// it back (on the old configuration: the switch is the phase's last step).
    pub fn scales_etcd_back_on_failure(self) -> bool {
        self == Phase::CutOver
    }

    /// True once the entry points at the destination (the switch committed).
    pub fn switched(self) -> bool {
        self >= Phase::ScaleUp
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Plan => "Plan",
            Phase::Done => "Done",
            other => other.annotation().unwrap_or_default(),
        })
    }
}

/// What a resumed run does with its `--to-bucket` given the recorded target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Nothing in flight; the entry already is in the requested bucket.
    AlreadyThere,
    /// Start (or continue) at this phase.
    At(Phase),
    /// A migration to another bucket is in flight.
    OtherTarget(String),
}

/// Decides where a run starts: `phase` from the annotation, `recorded_target` the
/// target annotation, `current_bucket` the entry's `spec.bucketName`.
pub fn resume(
    phase: Phase,
    recorded_target: Option<&str>,
    current_bucket: &str,
    to_bucket: &str,
) -> Resume {
    match (phase, recorded_target) {
        (Phase::Plan, _) if current_bucket == to_bucket => Resume::AlreadyThere,
        (Phase::Plan, _) => Resume::At(Phase::Plan),
        (_, Some(t)) if t != to_bucket => Resume::OtherTarget(t.to_string()),
        (p, _) => Resume::At(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_round_trip_and_advance_in_order() {
        let mut p = Phase::Plan;
        let mut seen = vec![p];
        while p != Phase::Done {
            let next = p.next();
            assert!(next > p);
            assert_eq!(
                Phase::from_annotation(next.annotation()),
                Ok(if next == Phase::Done {
                    Phase::Plan
                } else {
                    next
                })
            );
            p = next;
            seen.push(p);
        }
        assert_eq!(seen.len(), 6);
        assert_eq!(Phase::Done.next(), Phase::Done);
        assert!(Phase::from_annotation(Some("Bogus")).is_err());
        assert_eq!(Phase::CutOver.to_string(), "CutOver");
    }

    #[test]
    fn only_the_cut_over_scales_back_and_switching_is_after_it() {
        assert!(Phase::CutOver.scales_etcd_back_on_failure());
        assert!(!Phase::Copy.scales_etcd_back_on_failure());
        assert!(!Phase::ScaleUp.scales_etcd_back_on_failure());
        assert!(!Phase::CutOver.switched());
        assert!(Phase::ScaleUp.switched() && Phase::Cleanup.switched());
    }

    #[test]
    fn resuming() {
        assert_eq!(resume(Phase::Plan, None, "b", "b"), Resume::AlreadyThere);
        assert_eq!(resume(Phase::Plan, None, "a", "b"), Resume::At(Phase::Plan));
        assert_eq!(
            resume(Phase::Copy, Some("b"), "a", "b"),
            Resume::At(Phase::Copy)
        );
        // After the switch the entry already names the target: still resume.
        assert_eq!(
            resume(Phase::Cleanup, Some("b"), "b", "b"),
            Resume::At(Phase::Cleanup)
        );
        assert_eq!(
            resume(Phase::Copy, Some("c"), "a", "b"),
            Resume::OtherTarget("c".into())
        );
    }
}

//! The Velero part of the `granary dev` view, as pure functions: per seed, the phase of
//! its default BackupStorageLocation and its `velero.io` Backups (phase, queue position,
//! progress), the [`changes`] between two of them as one-line events, and the [`render`]
//! of the screen's BACKUPS section. `live` feeds them from watches on every seed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase, SOURCE_SEED_LABEL,
};

/// What one Velero backup looks like in the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupRow {
    pub name: String,
    /// Velero's phase; `New` before the queue has seen it.
    pub phase: String,
    /// Only while `Queued`.
    pub queue_position: Option<i64>,
    /// `(itemsBackedUp, totalItems)` once the backup has counted its items.
    pub progress: Option<(i64, i64)>,
    /// When it was created, for the newest-first order.
    pub created: Option<String>,
    /// The seed that wrote it, when it is listed through a sibling location.
    pub from_seed: Option<String>,
}

impl BackupRow {
    /// `Queued #2`, `InProgress 40/120`, `Completed 3/3`, `FailedValidation`.
    pub fn status(&self) -> String {
        let mut out = self.phase.clone();
        if let Some(position) = self.queue_position.filter(|_| self.phase == "Queued") {
            let _ = write!(out, " #{position}");
        }
        if let Some((done, total)) = self.progress {
            let _ = write!(out, " {done}/{total}");
        }
        if let Some(seed) = &self.from_seed {
            let _ = write!(out, " (from {seed})");
        }
        out
    }
}

/// One seed's Velero state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedBackups {
    pub seed: String,
    /// The phase of the seed's default location (`Available`, `Unavailable`), `None`
    /// before the seed has written it.
    pub location: Option<String>,
    /// Why it is not Available, as the location's status says.
    pub location_message: Option<String>,
    /// The other seeds whose backups it reads (sibling locations), with their
    /// locations' phases.
    pub siblings: Vec<(String, String)>,
    /// Newest first.
    pub backups: Vec<BackupRow>,
}

impl SeedBackups {
    /// `location` is the seed's default location (named `default_location`) among
    /// `locations`.
    pub fn from_objects(
        seed: &str,
        default_location: &str,
        locations: &[BackupStorageLocation],
        backups: &[Backup],
    ) -> SeedBackups {
        let default = locations.iter().find(|l| l.name_any() == default_location);
        let location_message = default
            .and_then(|l| l.status.as_ref())
            .filter(|s| s.phase != Some(BackupStorageLocationPhase::Available))
            .and_then(|s| s.message.as_deref())
            .map(|m| {
                // Velero's message repeats what the line already says.
                let prefix =
                    format!("BackupStorageLocation \"{default_location}\" is unavailable: ");
                m.strip_prefix(&prefix).unwrap_or(m).to_string()
            })
            .filter(|m| !m.is_empty());
        // Velero reads an unset phase as Unavailable; before the first validation the
        // view says so.
        let phase_of = |l: &BackupStorageLocation| match l.status.as_ref().and_then(|s| s.phase) {
            Some(p) => format!("{p:?}"),
            None => "Unvalidated".to_string(),
        };
        let location = default.map(phase_of);
        let source_of = |l: &BackupStorageLocation| l.labels().get(SOURCE_SEED_LABEL).cloned();
        let mut siblings: Vec<(String, String)> = locations
            .iter()
            .filter_map(|l| Some((source_of(l)?, phase_of(l))))
            .collect();
        siblings.sort();
        let from_seed = |b: &Backup| {
            let at = b.spec.storage_location.as_deref()?;
            locations
                .iter()
                .find(|l| l.name_any() == at)
                .and_then(source_of)
        };
        let mut rows: Vec<BackupRow> = backups
            .iter()
            .map(|b| {
                let status = b.status.as_ref();
                let progress = status.and_then(|s| s.progress.as_ref()).and_then(|p| {
                    p.total_items
                        .map(|total| (p.items_backed_up.unwrap_or(0), total))
                });
                BackupRow {
                    name: b.name_any(),
                    phase: status
                        .and_then(|s| s.phase)
                        .unwrap_or(BackupPhase::New)
                        .to_string(),
                    queue_position: status.and_then(|s| s.queue_position),
                    progress,
                    created: b
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.to_string()),
                    from_seed: from_seed(b),
                }
            })
            .collect();
        // RFC 3339 in UTC sorts as text.
        rows.sort_by(|a, b| b.created.cmp(&a.created).then(a.name.cmp(&b.name)));
        SeedBackups {
            seed: seed.to_string(),
            location,
            location_message,
            siblings,
            backups: rows,
        }
    }
}

/// One line per default location whose phase changed and per backup that appeared,
/// changed (phase, queue position, progress) or went away, stamped `at`.
pub fn changes(before: &[SeedBackups], after: &[SeedBackups], at: DateTime<Utc>) -> Vec<String> {
    let time = at.format("%H:%M:%S");
    let empty = SeedBackups::default();
    let old: BTreeMap<&str, &SeedBackups> = before.iter().map(|s| (s.seed.as_str(), s)).collect();
    let mut out = Vec::new();
    for seed in after {
        let was = old.get(seed.seed.as_str()).copied().unwrap_or(&empty);
        if was.location != seed.location
            && let Some(phase) = &seed.location
        {
            let mut line = format!("{time} location {}/default: {phase}", seed.seed);
            if let Some(message) = &seed.location_message {
                let _ = write!(line, ": {message}");
            }
            out.push(line);
        }
        for (source, phase) in &seed.siblings {
            if !was.siblings.iter().any(|(s, p)| s == source && p == phase) {
                out.push(format!(
                    "{time} location {}/seed-{source}: {phase} (reads {source}'s backups)",
                    seed.seed
                ));
            }
        }
        let rows: BTreeMap<&str, &BackupRow> =
            was.backups.iter().map(|b| (b.name.as_str(), b)).collect();
        let mut fresh: Vec<&BackupRow> = seed
            .backups
            .iter()
            .filter(|b| rows.get(b.name.as_str()).is_none_or(|o| *o != *b))
            .collect();
        // Oldest first, as they happened.
        fresh.reverse();
        for b in fresh {
            out.push(format!(
                "{time} backup {}/{}: {}",
                seed.seed,
                b.name,
                b.status()
            ));
        }
        for b in &was.backups {
            if !seed.backups.iter().any(|n| n.name == b.name) {
                out.push(format!("{time} backup {}/{}: gone", seed.seed, b.name));
            }
        }
    }
    out
}

/// How many backups of one seed the screen lists (the newest).
pub const BACKUPS_PER_SEED: usize = 3;

/// The BACKUPS section: per seed its default location's phase and its newest backups.
pub fn render(seeds: &[SeedBackups], out: &mut String) {
    let total: usize = seeds.iter().map(|s| s.backups.len()).sum();
    let _ = writeln!(out, "\nVELERO BACKUPS ({total})");
    if seeds.is_empty() {
        out.push_str("  (no seeds yet)\n");
    }
    let width = seeds.iter().map(|s| s.seed.len()).max().unwrap_or(0);
    for s in seeds {
        let _ = write!(
            out,
            "  {:<width$}  location default {}",
            s.seed,
            s.location.as_deref().unwrap_or("(not yet written)")
        );
        if s.backups.len() > BACKUPS_PER_SEED {
            let _ = write!(out, "; {} backups, newest:", s.backups.len());
        }
        if let Some(message) = &s.location_message {
            let _ = write!(out, " ({message})");
        }
        out.push('\n');
        if !s.siblings.is_empty() {
            let read: Vec<String> = s
                .siblings
                .iter()
                .map(|(source, phase)| format!("{source} ({phase})"))
                .collect();
            let _ = writeln!(out, "    reads the backups of {}", read.join(", "));
        }
        let name_width = s
            .backups
            .iter()
            .take(BACKUPS_PER_SEED)
            .map(|b| b.name.len())
            .max()
            .unwrap_or(0);
        for b in s.backups.iter().take(BACKUPS_PER_SEED) {
            let _ = writeln!(out, "    {:<name_width$}  {}", b.name, b.status());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{
        BackupProgress, BackupSpec, BackupStatus, BackupStorageLocationSpec,
        BackupStorageLocationStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn backup(name: &str, second: i64, status: Option<BackupStatus>) -> Backup {
        let mut b = Backup::new(name, BackupSpec::default());
        b.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(second).unwrap(),
        ));
        b.status = status;
        b
    }

    fn location(name: &str, phase: Option<BackupStorageLocationPhase>) -> BackupStorageLocation {
        let mut l = BackupStorageLocation::new(name, BackupStorageLocationSpec::default());
        l.status = Some(BackupStorageLocationStatus {
            phase,
            ..Default::default()
        });
        l
    }

    fn seed() -> SeedBackups {
        SeedBackups::from_objects(
            "europe-1",
            "default",
            &[
                location("other", None),
                location("default", Some(BackupStorageLocationPhase::Available)),
            ],
            &[
                backup(
                    "old",
                    1,
                    Some(BackupStatus {
                        phase: Some(BackupPhase::Completed),
                        progress: Some(BackupProgress {
                            total_items: Some(3),
                            items_backed_up: Some(3),
                        }),
                        ..Default::default()
                    }),
                ),
                backup(
                    "waiting",
                    2,
                    Some(BackupStatus {
                        phase: Some(BackupPhase::Queued),
                        queue_position: Some(2),
                        ..Default::default()
                    }),
                ),
                backup("fresh", 3, None),
            ],
        )
    }

    #[test]
    fn rows_are_newest_first_with_position_and_progress() {
        let s = seed();
        assert_eq!(s.location.as_deref(), Some("Available"));
        let statuses: Vec<(String, String)> = s
            .backups
            .iter()
            .map(|b| (b.name.clone(), b.status()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("fresh".to_string(), "New".to_string()),
                ("waiting".to_string(), "Queued #2".to_string()),
                ("old".to_string(), "Completed 3/3".to_string()),
            ]
        );
    }

    #[test]
    fn changes_name_the_seed_and_say_what_moved() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let now = [seed()];
        assert_eq!(
            changes(&[], &now, at),
            [
                "00:00:00 location europe-1/default: Available",
                "00:00:00 backup europe-1/old: Completed 3/3",
                "00:00:00 backup europe-1/waiting: Queued #2",
                "00:00:00 backup europe-1/fresh: New",
            ]
        );
        assert!(changes(&now, &now, at).is_empty());
        let mut later = seed();
        later.backups.retain(|b| b.name != "old");
        later.backups[0].phase = "Queued".into();
        later.backups[0].queue_position = Some(1);
        assert_eq!(
            changes(&now, &[later], at),
            [
                "00:00:00 backup europe-1/fresh: Queued #1",
                "00:00:00 backup europe-1/old: gone",
            ]
        );
    }

    #[test]
    fn another_seeds_backups_are_shown_through_its_sibling_location() {
        let mut sibling = location("seed-europe-2", Some(BackupStorageLocationPhase::Available));
        sibling.metadata.labels = Some(BTreeMap::from([(
            SOURCE_SEED_LABEL.to_string(),
            "europe-2".to_string(),
        )]));
        let mut theirs = backup("web-cp", 20, None);
        theirs.spec.storage_location = Some("seed-europe-2".into());
        let s = SeedBackups::from_objects(
            "europe-1",
            "default",
            &[
                location("default", Some(BackupStorageLocationPhase::Available)),
                sibling,
            ],
            &[theirs, backup("mine", 10, None)],
        );
        assert_eq!(
            s.siblings,
            [("europe-2".to_string(), "Available".to_string())]
        );
        let mut out = String::new();
        render(std::slice::from_ref(&s), &mut out);
        assert!(
            out.contains("    reads the backups of europe-2 (Available)\n"),
            "{out}"
        );
        assert!(out.contains("web-cp  New (from europe-2)"), "{out}");
        assert!(!out.contains("mine  New (from"), "{out}");
        let lines = changes(&[], &[s], DateTime::<Utc>::UNIX_EPOCH);
        assert!(
            lines.contains(
                &"00:00:00 location europe-1/seed-europe-2: Available (reads europe-2's backups)"
                    .to_string()
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn an_unavailable_location_says_why() {
        let mut unavailable = location("default", Some(BackupStorageLocationPhase::Unavailable));
        unavailable.status.as_mut().unwrap().message =
            Some("BackupStorageLocation \"default\" is unavailable: no bucket yet".into());
        let s = SeedBackups::from_objects("europe-2", "default", &[unavailable], &[]);
        assert_eq!(s.location_message.as_deref(), Some("no bucket yet"));
        assert_eq!(
            changes(&[], std::slice::from_ref(&s), DateTime::<Utc>::UNIX_EPOCH),
            ["00:00:00 location europe-2/default: Unavailable: no bucket yet"]
        );
        let mut out = String::new();
        render(&[s], &mut out);
        assert!(
            out.contains("europe-2  location default Unavailable (no bucket yet)"),
            "{out}"
        );
        let mut available = location("default", Some(BackupStorageLocationPhase::Available));
        available.status.as_mut().unwrap().message = Some("stale".into());
        let s = SeedBackups::from_objects("europe-1", "default", &[available], &[]);
        assert_eq!(s.location_message, None);
    }

    #[test]
    fn render_lists_the_newest_backups_per_seed() {
        let mut many = seed();
        many.backups.push(BackupRow {
            name: "oldest".into(),
            phase: "Failed".into(),
            queue_position: None,
            progress: None,
            created: None,
            from_seed: None,
        });
        let unwritten = SeedBackups {
            seed: "europe-2".into(),
            ..Default::default()
        };
        let mut out = String::new();
        render(&[many, unwritten], &mut out);
        assert_eq!(
            out,
            "\nVELERO BACKUPS (4)\n\
             \x20 europe-1  location default Available; 4 backups, newest:\n\
             \x20   fresh    New\n\
             \x20   waiting  Queued #2\n\
             \x20   old      Completed 3/3\n\
             \x20 europe-2  location default (not yet written)\n"
        );
    }
}

//! Who owns what in a bucket, decided from the bucket's own objects rather than from
//! labels anyone with patch rights can change
//! (docs/architecture.md#ownership-comes-from-the-bucket). Pure decisions over the
//! records Granary keeps in the bucket:
//!
//! - the bucket record `.granary/bucket.json` fixes the bucket's layout (shared or
//!   legacy) once, when Granary first takes the bucket; a later `pool-kind` label
//!   edit is ignored with a warning ([`resolve_layout`]);
//! - the prefix marker `<prefix>/.granary/entry.json` names the garden BackupEntry
//!   (namespace and UID) that owns the prefix, and the Shoot it belongs to; an entry
//!   that is not its owner (nor the owner's own migration source) may neither adopt nor
//!   delete it ([`claim`]), except the same Shoot's entry recreated in the garden under
//!   the same name and namespace, which re-adopts it;
//! - a legacy bucket is deleted whole only when the provider's listing shows no other
//!   entry in it ([`whole_bucket_deletable`]).

use crate::prefix::{BucketLayout, strip_source};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The bucket record's layout values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordedLayout {
    Shared,
    Legacy,
}

impl From<RecordedLayout> for BucketLayout {
    fn from(l: RecordedLayout) -> Self {
        match l {
            RecordedLayout::Shared => BucketLayout::Shared,
            RecordedLayout::Legacy => BucketLayout::Legacy,
        }
    }
}

impl From<BucketLayout> for RecordedLayout {
    fn from(l: BucketLayout) -> Self {
        match l {
            BucketLayout::Shared => RecordedLayout::Shared,
            BucketLayout::Legacy => RecordedLayout::Legacy,
        }
    }
}

/// `.granary/bucket.json`: written once, never rewritten.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketRecord {
    pub bucket: String,
    pub layout: RecordedLayout,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<DateTime<Utc>>,
}

/// The layout a bucket gets when Granary first records it: what its `pool-kind` label
/// asks, except that a bucket already holding other entries' markers is shared whatever
/// the label says (a label flipped on an old shared bucket before it had a record).
pub fn first_layout(label_says_legacy: bool, holds_entry_markers: bool) -> BucketLayout {
    if label_says_legacy && !holds_entry_markers {
        BucketLayout::Legacy
    } else {
        BucketLayout::Shared
    }
}

/// How an entry's bucket is laid out.
#[derive(Debug, PartialEq, Eq)]
pub enum LayoutDecision {
    /// From the bucket record (`label_ignored` when the label says otherwise).
    Recorded {
        layout: BucketLayout,
        label_ignored: bool,
    },
    /// No record yet, and the label does not ask for anything that could widen a
    /// deletion: shared.
    UnrecordedShared,
    /// No record yet and the label says legacy: wait for the bucket reconcile to record
    /// it, never take a label's word for "the entry is the whole bucket".
    WaitForRecord,
}

/// The layout to use for an entry, from the bucket record when there is one.
pub fn resolve_layout(record: Option<&BucketRecord>, label_says_legacy: bool) -> LayoutDecision {
    match record {
        Some(r) => {
            let layout: BucketLayout = r.layout.into();
            LayoutDecision::Recorded {
                layout,
                label_ignored: label_says_legacy != (layout == BucketLayout::Legacy),
            }
        }
        None if label_says_legacy => LayoutDecision::WaitForRecord,
        None => LayoutDecision::UnrecordedShared,
    }
}

/// `<prefix>/.granary/entry.json`: the prefix's owner.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryRecord {
    /// The entry that wrote it.
    pub entry: String,
    /// The seed object's UID (kept for older readers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garden_namespace: Option<String>,
    /// The garden BackupEntry's UID: the owner. Markers written before it was recorded
    /// lack it and are claimed by name.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "gardenUID")]
    pub garden_uid: Option<String>,
    /// The UID of the Shoot owning the garden entry (its owner reference): a recreated
    /// entry of the same Shoot re-adopts the prefix by it. Markers written before it was
    /// recorded lack it.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "shootUID")]
    pub shoot_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<DateTime<Utc>>,
}

/// Who an extension BackupEntry acts for: its garden entry (namespace and UID, carried
/// by the mirror), or for a seed object made by hand, the seed object itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryIdentity {
    pub name: String,
    pub garden_namespace: Option<String>,
    pub garden_uid: Option<String>,
    /// The UID of the Shoot owning the garden entry, when it has one.
    pub shoot_uid: Option<String>,
}

impl EntryIdentity {
    /// The marker this identity writes.
    pub fn record(&self, seed_uid: Option<String>, created: Option<DateTime<Utc>>) -> EntryRecord {
        EntryRecord {
            entry: self.name.clone(),
            uid: seed_uid,
            garden_namespace: self.garden_namespace.clone(),
            garden_uid: self.garden_uid.clone(),
            shoot_uid: self.shoot_uid.clone(),
            creation_time: created,
        }
    }

    fn describe(&self) -> String {
        describe(
            self.garden_namespace.as_deref(),
            &self.name,
            self.garden_uid.as_deref(),
        )
    }
}

fn describe(namespace: Option<&str>, name: &str, uid: Option<&str>) -> String {
    let mut s = match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    };
    if let Some(uid) = uid {
        s.push_str(&format!(" (uid {uid})"));
    }
    s
}

/// What an entry may do with a prefix whose marker is `record`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The marker is this entry's.
    Owner,
    /// The marker is this entry's by name but predates recorded garden identities:
    /// rewrite it with the identity.
    OwnerUnrecorded,
    /// This entry is the `source-` entry of the owner, in the owner's namespace: it may
    /// delete the prefix it migrated from, never rewrite its marker.
    MigrationSource,
    /// The marker names an earlier garden entry of the same name, namespace and Shoot
    /// (the garden recreated the entry, e.g. after a forced deletion): this entry takes
    /// the prefix over and rewrites the marker. The text names the earlier entry.
    Readopt(String),
    /// Another entry's prefix: the text says whose.
    Foreign(String),
}

/// Whether the entry named `name` of Shoot `mine` belongs to the same Shoot as a record
/// or seed object naming Shoot `recorded`. Without a recorded Shoot UID (written before
/// it was kept), the entry's name decides: the garden names a shoot's entry
/// `<technicalID>--<shoot uid>`, so a name ending in `--<mine>` is that Shoot's. An entry
/// without an owning Shoot is nobody's.
pub fn same_shoot(recorded: Option<&str>, name: &str, mine: Option<&str>) -> bool {
    let Some(mine) = mine.filter(|m| !m.is_empty()) else {
        return false;
    };
    match recorded {
        Some(r) => r == mine,
        None => name
            .strip_suffix(mine)
            .is_some_and(|rest| rest.ends_with("--")),
    }
}

/// Whether `me` owns the prefix whose marker is `record`.
pub fn claim(record: &EntryRecord, me: &EntryIdentity) -> Claim {
    let same_entry = strip_source(&record.entry) == strip_source(&me.name);
    let is_source = me.name != strip_source(&me.name);
    let same_namespace =
        record.garden_namespace.is_some() && record.garden_namespace == me.garden_namespace;
    let recreated = !is_source
        && record.entry == me.name
        && same_namespace
        && same_shoot(
            record.shoot_uid.as_deref(),
            &me.name,
            me.shoot_uid.as_deref(),
        );
    match &record.garden_uid {
        Some(uid) if me.garden_uid.as_ref() == Some(uid) => Claim::Owner,
        Some(_) if is_source && same_entry && same_namespace => Claim::MigrationSource,
        Some(uid) if recreated => Claim::Readopt(describe(
            record.garden_namespace.as_deref(),
            &record.entry,
            Some(uid),
        )),
        None if same_entry && is_source => Claim::MigrationSource,
        None if same_entry && (record.garden_namespace.is_none() || same_namespace) => {
            Claim::OwnerUnrecorded
        }
        _ => Claim::Foreign(format!(
            "the prefix belongs to BackupEntry {}, not to {}",
            describe(
                record.garden_namespace.as_deref(),
                &record.entry,
                record.garden_uid.as_deref()
            ),
            me.describe()
        )),
    }
}

/// What the provider's listing of a legacy bucket's root shows, for
/// [`whole_bucket_deletable`].
#[derive(Debug, Default)]
pub struct RootListing {
    /// Top-level "directories" (`p/`) that hold an entry marker (`p/.granary/entry.json`).
    pub prefixes_with_markers: Vec<String>,
    /// Top-level directories named like Gardener entries (`shoot--…`, `source-shoot--…`)
    /// or Velero's default location (`velero/`).
    pub entry_like_prefixes: Vec<String>,
    /// The root marker `.granary/entry.json`, if any.
    pub root_marker: Option<EntryRecord>,
}

/// Whether a directory name looks like another entry's prefix or a Velero location.
pub fn entry_like(prefix: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    strip_source(p).starts_with("shoot--") || p == "velero"
}

/// Whether entry `me` may delete its legacy bucket whole: the record says legacy, the
/// root marker is `me`'s, and the listing shows no other entry's marker or prefix.
pub fn whole_bucket_deletable(
    me: &EntryIdentity,
    bucket: &str,
    record: Option<&BucketRecord>,
    listing: &RootListing,
) -> Result<(), String> {
    let refuse = |why: String| {
        Err(format!(
            "refusing to delete bucket {bucket} whole for entry {}: {why}",
            me.name
        ))
    };
    match record {
        Some(r) if r.layout == RecordedLayout::Legacy => {}
        Some(_) => {
            return refuse(format!(
                "its record ({}) says it is shared",
                super::prefix::BUCKET_RECORD
            ));
        }
        None => {
            return refuse(format!(
                "it has no record ({})",
                super::prefix::BUCKET_RECORD
            ));
        }
    }
    if let Some(p) = listing.prefixes_with_markers.first() {
        return refuse(format!("it holds another entry's prefix {p}"));
    }
    if let Some(p) = listing.entry_like_prefixes.first() {
        return refuse(format!("it holds {p}, named like another entry's prefix"));
    }
    match &listing.root_marker {
        None => refuse("its root holds no marker of this entry".to_string()),
        Some(m) => match claim(m, me) {
            Claim::Foreign(why) => refuse(why),
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(name: &str, ns: &str, uid: &str) -> EntryIdentity {
        EntryIdentity {
            name: name.into(),
            garden_namespace: Some(ns.into()),
            garden_uid: Some(uid.into()),
            shoot_uid: None,
        }
    }

    /// An entry of Shoot `shoot`, named as the garden names it.
    fn of_shoot(technical: &str, ns: &str, uid: &str, shoot: &str) -> EntryIdentity {
        EntryIdentity {
            shoot_uid: Some(shoot.into()),
            ..me(&format!("{technical}--{shoot}"), ns, uid)
        }
    }

    fn record_of(who: &EntryIdentity) -> EntryRecord {
        who.record(Some("seed-uid".into()), None)
    }

    #[test]
    fn the_owner_is_the_garden_entry_not_the_name() {
        let victim = me("shoot--a--x--1", "garden-a", "u-victim");
        let rec = record_of(&victim);
        assert_eq!(claim(&rec, &victim), Claim::Owner);
        // Same name from another project namespace: refused, and the text says whose.
        let attacker = me("shoot--a--x--1", "garden-b", "u-attacker");
        let Claim::Foreign(why) = claim(&rec, &attacker) else {
            panic!("an attacker's entry must not own the victim's prefix")
        };
        assert!(
            why.contains("garden-a/shoot--a--x--1 (uid u-victim)"),
            "{why}"
        );
        assert!(
            why.contains("garden-b/shoot--a--x--1 (uid u-attacker)"),
            "{why}"
        );
        // Same name and namespace, another UID, no owning Shoot to tie them: refused too.
        let again = me("shoot--a--x--1", "garden-a", "u-new");
        assert!(matches!(claim(&rec, &again), Claim::Foreign(_)));
    }

    #[test]
    fn a_recreated_entry_of_the_same_shoot_readopts_its_prefix() {
        let old = of_shoot("shoot--a--x", "garden-a", "u-old", "s1");
        let name = old.name.clone();
        let recreated = of_shoot("shoot--a--x", "garden-a", "u-new", "s1");
        let readopt = Claim::Readopt(format!("garden-a/{name} (uid u-old)"));
        // A marker written before shoot UIDs were recorded.
        let unrecorded = EntryRecord {
            shoot_uid: None,
            ..record_of(&old)
        };
        let cases: Vec<(&str, EntryRecord, EntryIdentity, Claim)> = vec![
            (
                "same shoot, new UID",
                record_of(&old),
                recreated.clone(),
                readopt.clone(),
            ),
            (
                "marker without shoot UID, name of the same shoot",
                unrecorded.clone(),
                recreated.clone(),
                readopt.clone(),
            ),
            (
                "the owner itself",
                record_of(&old),
                old.clone(),
                Claim::Owner,
            ),
            (
                "another shoot's entry given the same name",
                record_of(&old),
                EntryIdentity {
                    shoot_uid: Some("s2".into()),
                    ..recreated.clone()
                },
                Claim::Foreign(String::new()),
            ),
            (
                "marker without shoot UID, another shoot's entry given the name",
                unrecorded.clone(),
                EntryIdentity {
                    shoot_uid: Some("s2".into()),
                    ..recreated.clone()
                },
                Claim::Foreign(String::new()),
            ),
            (
                "an entry without an owning shoot",
                record_of(&old),
                EntryIdentity {
                    shoot_uid: None,
                    ..recreated.clone()
                },
                Claim::Foreign(String::new()),
            ),
            (
                "same shoot, another namespace",
                record_of(&old),
                of_shoot("shoot--a--x", "garden-b", "u-new", "s1"),
                Claim::Foreign(String::new()),
            ),
            (
                "same shoot, another entry name",
                record_of(&old),
                EntryIdentity {
                    name: "shoot--a--y--s1".into(),
                    ..recreated.clone()
                },
                Claim::Foreign(String::new()),
            ),
            (
                "marker without a namespace",
                EntryRecord {
                    garden_namespace: None,
                    ..record_of(&old)
                },
                recreated.clone(),
                Claim::Foreign(String::new()),
            ),
            (
                "a hand-made seed object (no garden namespace)",
                record_of(&old),
                EntryIdentity {
                    garden_namespace: None,
                    ..recreated.clone()
                },
                Claim::Foreign(String::new()),
            ),
            (
                "a migration source of the same shoot deletes, never re-adopts",
                record_of(&old),
                of_shoot("source-shoot--a--x", "garden-a", "u-src", "s1"),
                Claim::MigrationSource,
            ),
        ];
        for (case, record, who, want) in cases {
            match (claim(&record, &who), want) {
                (Claim::Foreign(why), Claim::Foreign(_)) => {
                    assert!(why.contains("(uid u-old)"), "{case}: {why}");
                }
                (got, want) => assert_eq!(got, want, "{case}"),
            }
        }
        // The marker the re-adopting entry writes names it and its shoot.
        let rewritten = recreated.record(None, None);
        assert_eq!(rewritten.garden_uid.as_deref(), Some("u-new"));
        assert_eq!(rewritten.shoot_uid.as_deref(), Some("s1"));
        assert_eq!(claim(&rewritten, &recreated), Claim::Owner);
        // Another shoot's entry under the same name, against the rewritten marker.
        let intruder = EntryIdentity {
            garden_uid: Some("u-3".into()),
            shoot_uid: Some("s2".into()),
            ..recreated.clone()
        };
        assert!(matches!(claim(&rewritten, &intruder), Claim::Foreign(_)));
    }

    #[test]
    fn old_markers_stay_readable_and_new_ones_carry_the_shoot() {
        let old: EntryRecord = serde_json::from_str(
            r#"{"entry":"shoot--a--x--s1","uid":"seed","gardenNamespace":"garden-a","gardenUID":"u1"}"#,
        )
        .expect("a marker without shootUID");
        assert_eq!(old.shoot_uid, None);
        assert_eq!(old.garden_uid.as_deref(), Some("u1"));
        let new = serde_json::to_value(
            of_shoot("shoot--a--x", "garden-a", "u2", "s1").record(None, None),
        )
        .unwrap();
        assert_eq!(new["shootUID"], "s1");
        assert_eq!(new["gardenUID"], "u2");
    }

    #[test]
    fn the_same_shoot() {
        assert!(same_shoot(Some("s1"), "anything", Some("s1")));
        assert!(!same_shoot(Some("s1"), "shoot--a--x--s2", Some("s2")));
        assert!(same_shoot(None, "shoot--a--x--s1", Some("s1")));
        assert!(!same_shoot(None, "shoot--a--x--ss1", Some("s1")));
        assert!(!same_shoot(None, "shoot--a--x--s1", None));
        assert!(!same_shoot(None, "shoot--a--x--", Some("")));
        assert!(!same_shoot(Some(""), "x", Some("")));
    }

    #[test]
    fn a_migration_source_of_the_same_namespace_may_delete() {
        let owner = me("shoot--a--x--1", "garden-a", "u1");
        let rec = record_of(&owner);
        assert_eq!(
            claim(&rec, &me("source-shoot--a--x--1", "garden-a", "u2")),
            Claim::MigrationSource
        );
        assert!(matches!(
            claim(&rec, &me("source-shoot--a--x--1", "garden-b", "u3")),
            Claim::Foreign(_)
        ));
    }

    #[test]
    fn markers_without_identity_are_claimed_by_name() {
        let old = EntryRecord {
            entry: "shoot--a--x--1".into(),
            uid: Some("old-seed-uid".into()),
            ..Default::default()
        };
        assert_eq!(
            claim(&old, &me("shoot--a--x--1", "garden-a", "u1")),
            Claim::OwnerUnrecorded
        );
        assert_eq!(
            claim(&old, &me("source-shoot--a--x--1", "garden-a", "u2")),
            Claim::MigrationSource
        );
        assert!(matches!(
            claim(&old, &me("shoot--a--y--2", "garden-a", "u1")),
            Claim::Foreign(_)
        ));
    }

    #[test]
    fn the_layout_comes_from_the_record_never_from_a_label() {
        let shared = BucketRecord {
            bucket: "b".into(),
            layout: RecordedLayout::Shared,
            created: None,
        };
        assert_eq!(
            resolve_layout(Some(&shared), true),
            LayoutDecision::Recorded {
                layout: BucketLayout::Shared,
                label_ignored: true
            }
        );
        assert_eq!(
            resolve_layout(Some(&shared), false),
            LayoutDecision::Recorded {
                layout: BucketLayout::Shared,
                label_ignored: false
            }
        );
        assert_eq!(resolve_layout(None, true), LayoutDecision::WaitForRecord);
        assert_eq!(
            resolve_layout(None, false),
            LayoutDecision::UnrecordedShared
        );
        assert_eq!(first_layout(true, false), BucketLayout::Legacy);
        assert_eq!(first_layout(true, true), BucketLayout::Shared);
        assert_eq!(first_layout(false, false), BucketLayout::Shared);
    }

    #[test]
    fn a_legacy_bucket_is_deleted_whole_only_when_it_holds_nothing_else() {
        let owner = me("shoot--a--x--1", "garden-a", "u1");
        let legacy = BucketRecord {
            bucket: "b".into(),
            layout: RecordedLayout::Legacy,
            created: None,
        };
        let clean = || RootListing {
            root_marker: Some(record_of(&owner)),
            ..Default::default()
        };
        assert_eq!(
            whole_bucket_deletable(&owner, "b", Some(&legacy), &clean()),
            Ok(())
        );
        let source = me("source-shoot--a--x--1", "garden-a", "u2");
        assert_eq!(
            whole_bucket_deletable(&source, "b", Some(&legacy), &clean()),
            Ok(())
        );

        let shared = BucketRecord {
            layout: RecordedLayout::Shared,
            ..legacy.clone()
        };
        for (record, listing, why) in [
            (Some(&shared), clean(), "says it is shared"),
            (None, clean(), "has no record"),
            (
                Some(&legacy),
                RootListing {
                    prefixes_with_markers: vec!["shoot--b--y--2/".into()],
                    ..clean()
                },
                "another entry's prefix shoot--b--y--2/",
            ),
            (
                Some(&legacy),
                RootListing {
                    entry_like_prefixes: vec!["velero/".into()],
                    ..clean()
                },
                "velero/",
            ),
            (
                Some(&legacy),
                RootListing::default(),
                "no marker of this entry",
            ),
            (
                Some(&legacy),
                RootListing {
                    root_marker: Some(record_of(&me("shoot--z--z--9", "garden-z", "u9"))),
                    ..Default::default()
                },
                "belongs to BackupEntry garden-z/shoot--z--z--9",
            ),
        ] {
            let e = whole_bucket_deletable(&owner, "b", record, &listing).expect_err(why);
            assert!(e.contains(why), "{e} should say {why}");
            assert!(e.starts_with("refusing to delete bucket b whole"), "{e}");
        }
    }

    #[test]
    fn entry_like_names() {
        assert!(entry_like("shoot--p--n--uid/"));
        assert!(entry_like("source-shoot--p--n--uid/"));
        assert!(entry_like("velero/"));
        assert!(!entry_like("v2/"));
        assert!(!entry_like("Full-0000/"));
    }
}

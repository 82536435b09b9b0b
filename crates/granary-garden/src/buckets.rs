//! What the garden BackupBuckets of a pool look like, and the pure decisions of the
//! bucket reconcile (docs/architecture.md#shards-and-quota): the shard bucket to create,
//! the labels that key it to its pool and name its responsible seed, the spec changes a
//! pool's owner passes on (credentials, providerConfig), the deletion guard and the
//! removal of empty shards. Garden BackupBuckets never carry ownerReferences: deleting a
//! Seed or a CloudProfile must not cascade into a bucket.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use kube::ResourceExt;
use kube::api::ObjectMeta;
use serde_json::{Value, json};

use crate::pools::{PoolKey, PoolKind};
use granary_api::bucket_name::shard_bucket_name;
use granary_api::common::ObjectReference;
use granary_api::core::{
    ANNOTATION_EMPTY_SINCE, BackupBucket, BackupBucketProvider, BackupBucketSpec, BackupSpec,
    CloudProfile, FINALIZER_GARDEN_BUCKET_GUARD, LABEL_POOL_KIND, LABEL_POOL_OWNER, LABEL_REGION,
    LABEL_SEED, LABEL_SHARD, Seed,
};
use granary_runtime::selector::ObjectSelector;

/// Everything a pool's buckets are made from: the pool, its owner's UID (for the bucket
/// names) and the owner's `spec.backup`.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolSource {
    pub key: PoolKey,
    pub owner_uid: String,
    /// The provider type of the object store.
    pub provider: String,
    pub credentials: Option<ObjectReference>,
    pub provider_config: Option<Value>,
}

impl PoolSource {
    fn new(key: PoolKey, owner_uid: &str, provider: &str, backup: &BackupSpec) -> Self {
        PoolSource {
            key,
            owner_uid: owner_uid.to_string(),
            provider: provider.to_string(),
            credentials: backup.credentials(),
            provider_config: backup.provider_config.clone(),
        }
    }

    /// The source of `key`, a pool of `profile`. `None` without `spec.backup`.
    pub fn from_profile(profile: &CloudProfile, key: PoolKey) -> Option<Self> {
        let backup = profile.spec.backup.as_ref()?;
        let provider = profile.backup_provider()?;
        let uid = profile.metadata.uid.as_deref().unwrap_or_default();
        Some(PoolSource::new(key, uid, provider, backup))
    }

    /// The source of the pool of a seed with its own `spec.backup`.
    pub fn from_seed(seed: &Seed, key: PoolKey) -> Option<Self> {
        let backup = seed.spec.backup.as_ref()?;
        let provider = if backup.provider.is_empty() {
            seed.spec.provider.type_.as_str()
        } else {
            backup.provider.as_str()
        };
        let uid = seed.metadata.uid.as_deref().unwrap_or_default();
        Some(PoolSource::new(key, uid, provider, backup))
    }
}

/// The labels that put a bucket into shard `shard` of pool `key`.
pub fn pool_labels(key: &PoolKey, shard: u32) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_POOL_KIND.to_string(), key.kind.as_str().to_string()),
        (LABEL_POOL_OWNER.to_string(), key.owner.clone()),
        (LABEL_REGION.to_string(), key.region.clone()),
        (LABEL_SHARD.to_string(), shard.to_string()),
    ])
}

/// The label selector of every shard of pool `key`.
pub fn pool_selector(key: &PoolKey) -> String {
    format!(
        "{LABEL_POOL_KIND}={},{LABEL_POOL_OWNER}={},{LABEL_REGION}={}",
        key.kind.as_str(),
        key.owner,
        key.region
    )
}

/// The garden's own record of the pool and shard a bucket belongs to
/// (`<kind>/<owner>/<region>/<shard>`, `-` for no shard), written when the garden makes
/// the bucket or first sees one made before the record existed. The pool labels say the
/// same for people and selectors, but a person can edit them: the record decides, and an
/// edit of the labels is undone ([`pool_label_repair`]).
pub const ANNOTATION_POOL_RECORD: &str = "granary.gardener.cloud/pool-record";

fn record_value(key: &PoolKey, shard: Option<u32>) -> String {
    format!(
        "{}/{}/{}/{}",
        key.kind.as_str(),
        key.owner,
        key.region,
        shard.map_or_else(|| "-".to_string(), |s| s.to_string())
    )
}

/// The garden's record of a bucket's place, borrowed from the annotation: kind, owner,
/// region and shard.
fn record_parts(bucket: &BackupBucket) -> Option<(PoolKind, &str, &str, Option<u32>)> {
    let value = bucket.annotations().get(ANNOTATION_POOL_RECORD)?;
    let mut parts = value.split('/');
    let (kind, owner, region, shard) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || owner.is_empty() || region.is_empty() {
        return None;
    }
    let shard = match shard {
        "-" => None,
        s => Some(s.parse().ok()?),
    };
    Some((kind.parse().ok()?, owner, region, shard))
}

/// The pool and shard the garden recorded for the bucket.
fn recorded_place(bucket: &BackupBucket) -> Option<(PoolKey, Option<u32>)> {
    let (kind, owner, region, shard) = record_parts(bucket)?;
    let key = PoolKey {
        kind,
        owner: owner.to_string(),
        region: region.to_string(),
    };
    Some((key, shard))
}

/// The pool and shard the bucket's labels say.
fn labelled_place(bucket: &BackupBucket) -> Option<(PoolKey, Option<u32>)> {
    let labels = bucket.labels();
    let key = PoolKey {
        kind: labels.get(LABEL_POOL_KIND)?.parse().ok()?,
        owner: labels.get(LABEL_POOL_OWNER)?.clone(),
        region: labels.get(LABEL_REGION)?.clone(),
    };
    Some((key, labels.get(LABEL_SHARD).and_then(|s| s.parse().ok())))
}

/// The pool a bucket belongs to: the garden's record, else (a bucket made before the
/// record existed, or by hand) its labels.
pub fn pool_of(bucket: &BackupBucket) -> Option<PoolKey> {
    place_of(bucket).map(|(key, _)| key)
}

/// The pool and shard of a bucket, read once: the garden's record, else its labels.
pub fn place_of(bucket: &BackupBucket) -> Option<(PoolKey, Option<u32>)> {
    recorded_place(bucket).or_else(|| labelled_place(bucket))
}

/// The shard number of a bucket: the garden's record, else its label. Reads the record
/// without allocating: placement asks this of its overlay of newer copies.
pub fn shard_of(bucket: &BackupBucket) -> Option<u32> {
    match record_parts(bucket) {
        Some((_, _, _, shard)) => shard,
        None => bucket.labels().get(LABEL_SHARD)?.parse().ok(),
    }
}

/// What keeps a bucket's pool labels and the garden's record together.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolLabelRepair {
    /// No record yet: record what the labels say (the patch).
    Record(Value),
    /// The labels were edited: put them back (the patch) and say so (the message).
    Restore { patch: Value, message: String },
}

/// The repair a bucket's pool labels or record need, or `None`.
pub fn pool_label_repair(bucket: &BackupBucket) -> Option<PoolLabelRepair> {
    let labelled = labelled_place(bucket);
    let Some((key, shard)) = recorded_place(bucket) else {
        let (key, shard) = labelled?;
        let value = record_value(&key, shard);
        return Some(PoolLabelRepair::Record(
            json!({ "metadata": { "annotations": { ANNOTATION_POOL_RECORD: value } } }),
        ));
    };
    let want: BTreeMap<&str, Option<String>> = BTreeMap::from([
        (LABEL_POOL_KIND, Some(key.kind.as_str().to_string())),
        (LABEL_POOL_OWNER, Some(key.owner.clone())),
        (LABEL_REGION, Some(key.region.clone())),
        (LABEL_SHARD, shard.map(|s| s.to_string())),
    ]);
    let edited: Vec<String> = want
        .iter()
        .filter(|(label, value)| bucket.labels().get(**label) != value.as_ref())
        .map(|(label, value)| {
            format!(
                "{label}: {} (kept: {})",
                bucket.labels().get(*label).map_or("unset", String::as_str),
                value.as_deref().unwrap_or("unset")
            )
        })
        .collect();
    if edited.is_empty() {
        return None;
    }
    let shard_words = shard.map_or_else(String::new, |s| format!(", shard {s}"));
    Some(PoolLabelRepair::Restore {
        patch: json!({ "metadata": { "labels": want } }),
        message: format!(
            "the bucket's pool labels were edited ({}); the garden keeps the bucket in pool \
             {key}{shard_words} and put the labels back",
            edited.join(", ")
        ),
    })
}

/// The merge patch that makes the bucket's reader labels
/// ([`granary_api::core::LABEL_VELERO_READER_PREFIX`]) name exactly `readers`; `None`
/// when they do.
pub fn reader_labels_patch(
    bucket: &BackupBucket,
    readers: &std::collections::BTreeSet<String>,
) -> Option<Value> {
    use granary_api::core::{LABEL_VELERO_READER_PREFIX, velero_reader_label};
    let mut labels = serde_json::Map::new();
    for key in bucket.labels().keys() {
        if let Some(seed) = key.strip_prefix(LABEL_VELERO_READER_PREFIX)
            && !readers.contains(seed)
        {
            labels.insert(key.clone(), Value::Null);
        }
    }
    for seed in readers {
        let key = velero_reader_label(seed);
        if bucket.labels().get(&key).map(String::as_str) != Some("true") {
            labels.insert(key, Value::String("true".into()));
        }
    }
    (!labels.is_empty()).then(|| json!({ "metadata": { "labels": labels } }))
}

/// The entry count the bucket's status records (0 when never written).
pub fn recorded_count(bucket: &BackupBucket) -> u32 {
    bucket
        .status
        .as_ref()
        .and_then(|s| s.entry_count)
        .unwrap_or(0)
}

/// The new BackupBucket for shard `shard` of the source's pool, provisioned by `seed`.
pub fn new_shard_bucket(
    source: &PoolSource,
    shard: u32,
    seed: Option<&str>,
    selector: &ObjectSelector,
) -> BackupBucket {
    let key = &source.key;
    let name = shard_bucket_name(&key.owner, &key.region, &source.owner_uid, shard);
    let mut labels = pool_labels(key, shard);
    if let Some(seed) = seed {
        labels.insert(LABEL_SEED.to_string(), seed.to_string());
    }
    selector.label(&mut labels);
    BackupBucket {
        metadata: ObjectMeta {
            name: Some(name.as_str().to_string()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_POOL_RECORD.to_string(),
                record_value(key, Some(shard)),
            )])),
            finalizers: Some(vec![FINALIZER_GARDEN_BUCKET_GUARD.to_string()]),
            ..ObjectMeta::default()
        },
        spec: BackupBucketSpec {
            provider: BackupBucketProvider {
                type_: source.provider.clone(),
                region: key.region.clone(),
            },
            provider_config: source.provider_config.clone(),
            credentials_ref: source.credentials.clone(),
            secret_ref: None,
            seed_name: seed.map(str::to_string),
            shoot_ref: None,
        },
        status: None,
    }
}

/// The merge patch that brings the owner's credentials and providerConfig into the
/// bucket, or `None` when they already match. `secretRef` is replaced by the equivalent
/// `credentialsRef`. Provider and region are immutable and never touched.
pub fn spec_drift(bucket: &BackupBucket, source: &PoolSource) -> Option<Value> {
    let spec = &bucket.spec;
    let same_credentials = spec.credentials_ref == source.credentials && spec.secret_ref.is_none();
    let same_config = spec.provider_config == source.provider_config;
    if same_credentials && same_config {
        return None;
    }
    let mut patch = serde_json::Map::new();
    if !same_credentials {
        patch.insert("credentialsRef".into(), json!(source.credentials));
        patch.insert("secretRef".into(), Value::Null);
    }
    if !same_config {
        patch.insert("providerConfig".into(), json!(source.provider_config));
    }
    Some(json!({ "spec": patch }))
}

/// The merge patch that makes the `granary.gardener.cloud/seed` label name `seed` (and
/// removes it when there is none), or `None` when it already does.
pub fn seed_label_patch(
    labels: &BTreeMap<String, String>,
    seed: Option<&str>,
) -> Option<serde_json::Value> {
    if labels.get(LABEL_SEED).map(String::as_str) == seed {
        return None;
    }
    Some(json!({ "metadata": { "labels": { LABEL_SEED: seed } } }))
}

/// What the deletion guard does with a bucket that has a deletionTimestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionGuard {
    /// Entries still reference the bucket: keep the finalizer and say why.
    Refuse {
        entries: usize,
        examples: Vec<String>,
    },
    /// No entry references it: remove the garden finalizer so deletion goes on.
    Release,
    /// The garden finalizer is already gone; nothing to do.
    Done,
}

/// How many entries to name in the refusal message.
const EXAMPLES: usize = 3;

/// The deletion guard: a bucket is released only when no entry references it.
pub fn deletion_guard(has_finalizer: bool, mut referencing: Vec<String>) -> DeletionGuard {
    if !has_finalizer {
        return DeletionGuard::Done;
    }
    if referencing.is_empty() {
        return DeletionGuard::Release;
    }
    referencing.sort();
    let entries = referencing.len();
    referencing.truncate(EXAMPLES);
    DeletionGuard::Refuse {
        entries,
        examples: referencing,
    }
}

impl DeletionGuard {
    /// The reason a refused deletion waits, for status and events.
    pub fn refusal_message(&self) -> Option<String> {
        match self {
            DeletionGuard::Refuse { entries, examples } => {
                let more = entries.saturating_sub(examples.len());
                let tail = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                Some(format!(
                    "deletion refused: {entries} BackupEntr{} still {} this bucket ({}{tail}); \
                     it is deleted once they are gone",
                    if *entries == 1 { "y" } else { "ies" },
                    if *entries == 1 {
                        "references"
                    } else {
                        "reference"
                    },
                    examples.join(", ")
                ))
            }
            _ => None,
        }
    }
}

/// What to do about a possibly empty shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptyShard {
    /// Nothing to record or remove.
    Keep,
    /// It just became empty: record since when.
    MarkEmptySince,
    /// It holds entries again (or removal is off): drop the record.
    ClearEmptySince,
    /// Empty, but not long enough: look again at this time.
    WaitUntil(DateTime<Utc>),
    /// Empty for long enough: delete the bucket.
    Remove,
}

/// Whether an empty non-first shard is removed (`remove_after` zero means never; the
/// first shard is never removed, so a pool keeps a bucket).
pub fn empty_shard(
    shard: u32,
    count: u32,
    empty_since: Option<DateTime<Utc>>,
    remove_after: Duration,
    now: DateTime<Utc>,
) -> EmptyShard {
    let eligible = shard > 0 && remove_after > Duration::zero() && count == 0;
    match (eligible, empty_since) {
        (false, None) => EmptyShard::Keep,
        (false, Some(_)) => EmptyShard::ClearEmptySince,
        (true, None) => EmptyShard::MarkEmptySince,
        (true, Some(since)) if now - since >= remove_after => EmptyShard::Remove,
        (true, Some(since)) => EmptyShard::WaitUntil(since + remove_after),
    }
}

/// The empty-since annotation of a bucket.
pub fn empty_since(bucket: &BackupBucket) -> Option<DateTime<Utc>> {
    let text = bucket.annotations().get(ANNOTATION_EMPTY_SINCE)?;
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::PoolKind;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
            + Duration::seconds(s)
    }

    fn source() -> PoolSource {
        PoolSource {
            key: PoolKey {
                kind: PoolKind::CloudProfile,
                owner: "aws".into(),
                region: "eu-west-1".into(),
            },
            owner_uid: "uid-1".into(),
            provider: "aws".into(),
            credentials: Some(ObjectReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: "backup".into(),
                namespace: "garden".into(),
                ..ObjectReference::default()
            }),
            provider_config: Some(json!({"immutability": {"retentionPeriod": "24h"}})),
        }
    }

    #[test]
    fn reader_labels_follow_the_pools_seeds() {
        let selector = ObjectSelector::new(None);
        let mut b = new_shard_bucket(&source(), 0, Some("seed-a"), &selector);
        let readers = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        let patch =
            reader_labels_patch(&b, &readers(&["seed-a", "seed-b"])).expect("labels to add");
        assert_eq!(
            patch,
            json!({"metadata": {"labels": {
                "reader.granary.gardener.cloud/seed-a": "true",
                "reader.granary.gardener.cloud/seed-b": "true",
            }}})
        );
        let labels = b.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert("reader.granary.gardener.cloud/seed-a".into(), "true".into());
        labels.insert("reader.granary.gardener.cloud/seed-b".into(), "true".into());
        assert_eq!(
            reader_labels_patch(&b, &readers(&["seed-a", "seed-b"])),
            None
        );
        // A seed that left the pool (or was deleted) reads no longer.
        assert_eq!(
            reader_labels_patch(&b, &readers(&["seed-a"])),
            Some(json!({"metadata": {"labels": {"reader.granary.gardener.cloud/seed-b": null}}}))
        );
    }

    #[test]
    fn a_new_shard_is_labelled_named_and_guarded_without_owner_references() {
        let selector = ObjectSelector::new(Some("t1".into()));
        let b = new_shard_bucket(&source(), 2, Some("seed-a"), &selector);
        let name = b.name_any();
        assert!(
            name.starts_with("aws-eu-west-1-") && name.ends_with("-2"),
            "{name}"
        );
        assert_eq!(pool_of(&b), Some(source().key));
        assert_eq!(shard_of(&b), Some(2));
        assert_eq!(
            b.labels().get(LABEL_SEED).map(String::as_str),
            Some("seed-a")
        );
        assert!(selector.matches(b.metadata.labels.as_ref()));
        assert!(b.metadata.owner_references.is_none());
        assert_eq!(
            b.finalizers(),
            [FINALIZER_GARDEN_BUCKET_GUARD.to_string()].as_slice()
        );
        assert_eq!(b.spec.provider.region, "eu-west-1");
        assert_eq!(b.spec.seed_name.as_deref(), Some("seed-a"));
        assert_eq!(spec_drift(&b, &source()), None);
        // Same pool, same shard: same name.
        assert_eq!(
            new_shard_bucket(&source(), 2, None, &ObjectSelector::default()).name_any(),
            name
        );
    }

    /// A person's edit of a shared bucket's pool labels does not move the bucket out of
    /// its pool: the garden's record decides, and the labels are put back.
    #[test]
    fn the_garden_record_keeps_a_relabelled_bucket_in_its_pool() {
        let b = new_shard_bucket(&source(), 1, None, &ObjectSelector::default());
        assert_eq!(pool_label_repair(&b), None, "made by the garden: in order");
        let mut edited = b.clone();
        let labels = edited.metadata.labels.as_mut().expect("labels");
        labels.insert(LABEL_REGION.into(), "us-east-1".into());
        labels.remove(LABEL_SHARD);
        assert_eq!(pool_of(&edited), Some(source().key));
        assert_eq!(shard_of(&edited), Some(1));
        let Some(PoolLabelRepair::Restore { patch, message }) = pool_label_repair(&edited) else {
            panic!("restored")
        };
        assert_eq!(patch["metadata"]["labels"][LABEL_REGION], "eu-west-1");
        assert_eq!(patch["metadata"]["labels"][LABEL_SHARD], "1");
        assert!(
            message.contains("granary.gardener.cloud/region: us-east-1 (kept: eu-west-1)")
                && message.contains("granary.gardener.cloud/shard: unset (kept: 1)")
                && message.contains("pool cloudprofile aws in eu-west-1, shard 1"),
            "{message}"
        );
        let mut repaired = serde_json::to_value(&edited).expect("json");
        json_patch::merge(&mut repaired, &patch);
        let repaired: BackupBucket = serde_json::from_value(repaired).expect("bucket");
        assert_eq!(pool_label_repair(&repaired), None);
        // A bucket from before the record (labels only) gets the record of its labels.
        let mut old = b.clone();
        old.metadata.annotations = None;
        let Some(PoolLabelRepair::Record(patch)) = pool_label_repair(&old) else {
            panic!("recorded")
        };
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_POOL_RECORD],
            "cloudprofile/aws/eu-west-1/1"
        );
        // Neither record nor pool labels: not a pool's bucket.
        let mut plain = old.clone();
        plain.metadata.labels = None;
        assert_eq!(pool_label_repair(&plain), None);
        assert_eq!(pool_of(&plain), None);
    }

    /// Placement's allocation-free reading agrees with `place_of` for a recorded
    /// bucket, a labelled one, one whose record is broken, and one of another pool.
    #[test]
    fn shard_of_reads_the_shard_as_place_of_does() {
        let key = source().key;
        let recorded = new_shard_bucket(&source(), 3, None, &ObjectSelector::default());
        let mut labelled = recorded.clone();
        labelled.metadata.annotations = None;
        let with_record = |record: &str| {
            let mut b = recorded.clone();
            b.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION_POOL_RECORD.into(), record.into());
            b
        };
        let broken = with_record("cloudprofile/aws/eu-west-1/x");
        let other = with_record("seed/aws/eu-west-1/3");
        let unnumbered = with_record("cloudprofile/aws/eu-west-1/-");
        let mut plain = labelled.clone();
        plain.metadata.labels = None;
        for b in [&recorded, &labelled, &broken, &other, &unnumbered, &plain] {
            let expected = place_of(b).and_then(|(_, s)| s);
            assert_eq!(shard_of(b), expected, "{:?}", b.metadata.annotations);
        }
        assert_eq!(place_of(&recorded).map(|(k, _)| k), Some(key));
        assert_eq!(shard_of(&recorded), Some(3));
        assert_eq!(shard_of(&broken), Some(3), "the labels decide");
        assert_eq!(shard_of(&other), Some(3));
        assert_eq!(shard_of(&unnumbered), None);
    }

    #[test]
    fn credential_and_config_changes_flow_into_the_bucket() {
        let b = new_shard_bucket(&source(), 0, None, &ObjectSelector::default());
        let mut changed = source();
        changed.credentials.as_mut().expect("set").name = "rotated".into();
        let patch = spec_drift(&b, &changed).expect("drift");
        assert_eq!(patch["spec"]["credentialsRef"]["name"], "rotated");
        assert!(patch["spec"].get("providerConfig").is_none());
        let mut changed = source();
        changed.provider_config = None;
        let patch = spec_drift(&b, &changed).expect("drift");
        assert_eq!(patch["spec"]["providerConfig"], Value::Null);
    }

    #[test]
    fn seed_label_follows_the_responsible_seed() {
        let mut labels = BTreeMap::new();
        assert_eq!(seed_label_patch(&labels, None), None);
        let p = seed_label_patch(&labels, Some("a")).expect("added");
        assert_eq!(p["metadata"]["labels"][LABEL_SEED], "a");
        labels.insert(LABEL_SEED.to_string(), "a".to_string());
        assert_eq!(seed_label_patch(&labels, Some("a")), None);
        let p = seed_label_patch(&labels, None).expect("removed");
        assert_eq!(p["metadata"]["labels"][LABEL_SEED], Value::Null);
    }

    #[test]
    fn deletion_is_refused_while_entries_reference_the_bucket() {
        assert_eq!(deletion_guard(false, vec!["x".into()]), DeletionGuard::Done);
        assert_eq!(deletion_guard(true, vec![]), DeletionGuard::Release);
        let g = deletion_guard(true, (0..5).map(|i| format!("e{i}")).collect());
        let msg = g.refusal_message().expect("refused");
        assert!(
            msg.contains("5 BackupEntries") && msg.contains("e0, e1, e2 and 2 more"),
            "{msg}"
        );
        let one = deletion_guard(true, vec!["only".into()]);
        assert!(
            one.refusal_message()
                .expect("refused")
                .contains("1 BackupEntry still")
        );
    }

    #[test]
    fn empty_non_first_shards_go_after_the_configured_time_only() {
        let after = Duration::seconds(60);
        assert_eq!(empty_shard(0, 0, None, after, t(0)), EmptyShard::Keep);
        assert_eq!(
            empty_shard(1, 0, None, Duration::zero(), t(0)),
            EmptyShard::Keep
        );
        assert_eq!(
            empty_shard(1, 0, Some(t(0)), Duration::zero(), t(0)),
            EmptyShard::ClearEmptySince
        );
        assert_eq!(
            empty_shard(1, 0, None, after, t(0)),
            EmptyShard::MarkEmptySince
        );
        assert_eq!(
            empty_shard(1, 0, Some(t(0)), after, t(30)),
            EmptyShard::WaitUntil(t(60))
        );
        assert_eq!(
            empty_shard(1, 0, Some(t(0)), after, t(60)),
            EmptyShard::Remove
        );
        assert_eq!(
            empty_shard(1, 3, Some(t(0)), after, t(90)),
            EmptyShard::ClearEmptySince
        );
    }
}

//! The pure decisions of a migration: which source objects a manifest holds, how a
//! re-listing at cut-over changes it, which pending objects still need a copy request
//! given what the destination already holds, whether a copy can stay server-side, the
//! quota check on the destination bucket, and the dry-run estimate. No I/O here.

use std::collections::BTreeMap;
use std::time::Duration;

use granary_providers::{ObjectMeta, SecretData};

use super::manifest::{Manifest, ManifestObject, ObjectState, is_granary_key};
use granary_garden::placement::{Placement, ShardFill, place_entry};

/// The manifest objects of a source listing under `key_prefix`: keys made relative,
/// Granary's own `.granary/` objects left out, sorted by key.
pub fn source_objects(key_prefix: &str, listing: Vec<ObjectMeta>) -> Vec<ManifestObject> {
    let mut out: Vec<ManifestObject> = listing
        .into_iter()
        .filter_map(|m| {
            let rel = m.key.strip_prefix(key_prefix)?.to_string();
            (!rel.is_empty() && !is_granary_key(&rel)).then_some(ManifestObject {
                key: rel,
                size: m.size,
                etag: m.etag,
                state: ObjectState::None,
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    out
}

/// What a re-listing of the source changed in the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relisting {
    /// New in the source since the plan.
    pub added: u64,
    /// Size or etag changed (copied again), or back after having vanished.
    pub changed: u64,
    /// Gone from the source; now `NotFound`.
    pub vanished: u64,
    /// Relative keys whose destination copy is stale (the source object was deleted
    /// after it was copied): removed so the destination mirrors the source at cut-over.
    pub remove_from_destination: Vec<String>,
}

/// Folds a fresh source listing (from [`source_objects`]) into the manifest: new
/// objects become `None`, changed ones go back to `None`, objects gone from the source
/// become `NotFound`.
pub fn relist(manifest: &mut Manifest, listing: Vec<ManifestObject>) -> Relisting {
    let mut out = Relisting::default();
    let mut current: BTreeMap<String, ManifestObject> =
        listing.into_iter().map(|o| (o.key.clone(), o)).collect();
    for o in &mut manifest.objects {
        match current.remove(&o.key) {
            Some(now) => {
                let differs = now.size != o.size || now.etag != o.etag;
                if differs || o.state == ObjectState::NotFound {
                    out.changed += 1;
                    o.size = now.size;
                    o.etag = now.etag;
                    o.state = ObjectState::None;
                }
            }
            None => match o.state {
                ObjectState::NotFound => {}
                ObjectState::Copied => {
                    out.vanished += 1;
                    out.remove_from_destination.push(o.key.clone());
                    o.state = ObjectState::NotFound;
                }
                ObjectState::None => {
                    out.vanished += 1;
                    o.state = ObjectState::NotFound;
                }
            },
        }
    }
    out.added = current.len() as u64;
    manifest.objects.extend(current.into_values());
    manifest.objects.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// Indices of the objects still to copy.
pub fn pending(manifest: &Manifest) -> Vec<usize> {
    manifest
        .objects
        .iter()
        .enumerate()
        .filter(|(_, o)| o.state == ObjectState::None)
        .map(|(i, _)| i)
        .collect()
}

/// An etag that is a plain content hash: S3 multipart etags carry `-<parts>`.
fn single_part(etag: &str) -> bool {
    !etag.contains('-')
}

/// Whether the destination already holds `object` (a copy a crash left unrecorded):
/// same size, and the same etag when `compare_etags` (same provider, where a server-side
/// copy keeps the content hash) and both sides are single-part.
pub fn already_copied(
    object: &ManifestObject,
    destination: Option<&ObjectMeta>,
    compare_etags: bool,
) -> bool {
    let Some(dst) = destination else {
        return false;
    };
    if dst.size != object.size {
        return false;
    }
    match (compare_etags, object.etag.as_deref(), dst.etag.as_deref()) {
        (true, Some(a), Some(b)) if single_part(a) && single_part(b) => a == b,
        _ => true,
    }
}

/// How objects travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CopyMode {
    /// The provider copies inside itself (S3 CopyObject, Azure Copy Blob, GCS rewrite,
    /// a file copy); no byte passes through this process.
    ServerSide,
    /// Read from the source and written to the destination through this process.
    Streaming,
}

/// What decides whether two buckets can copy server-side: provider type and the exact
/// credentials (the same account, endpoint and keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreIdentity {
    pub provider: String,
    pub credentials: SecretData,
}

/// Server-side when source and destination share provider and credentials.
pub fn copy_mode(source: &StoreIdentity, destination: &StoreIdentity) -> CopyMode {
    if source == destination {
        CopyMode::ServerSide
    } else {
        CopyMode::Streaming
    }
}

/// Why an entry may not start a migration: a `source-<entry>` (the old home of a finished
/// migration, on its way out: its prefix is its entry's) or an entry being deleted.
pub fn refuse_to_start(entry: &granary_api::core::BackupEntry) -> Option<String> {
    let name = entry.metadata.name.as_deref().unwrap_or_default();
    if entry.is_source() {
        return Some(format!(
            "{name} is the source of a finished migration, deleted after the grace period; \
             it is not migrated"
        ));
    }
    entry
        .metadata
        .deletion_timestamp
        .is_some()
        .then(|| format!("{name} is being deleted; it is not migrated"))
}

/// Whether one more entry fits into the destination bucket, through the garden's own
/// first-fit placement over that single shard: `entries` already referencing it,
/// `accepting` false while it is being deleted, `limit` the provider's quota.
pub fn quota_allows(entries: u32, accepting: bool, limit: Option<u32>) -> bool {
    let shard = ShardFill {
        shard: 0,
        entries,
        accepting,
    };
    place_entry(&[shard], limit) == Placement::Existing(0)
}

/// Assumed cost of one copy request (server-side) or of a request's overhead
/// (streaming), and streaming bandwidth, for the dry-run estimate. Deliberately rough.
const REQUEST_LATENCY: Duration = Duration::from_millis(30);
const STREAM_BYTES_PER_SEC: u64 = 50 * 1024 * 1024;

/// Rough duration of copying `objects` objects of `bytes` bytes with `parallelism`
/// requests in flight.
pub fn estimate(objects: u64, bytes: u64, mode: CopyMode, parallelism: usize) -> Duration {
    let parallelism = parallelism.max(1) as u32;
    let requests = REQUEST_LATENCY * u32::try_from(objects).unwrap_or(u32::MAX) / parallelism;
    match mode {
        CopyMode::ServerSide => requests,
        CopyMode::Streaming => {
            requests + Duration::from_secs_f64(bytes as f64 / STREAM_BYTES_PER_SEC as f64)
        }
    }
}

/// Why `destination` is outside the backup pool of an entry now in `source`, if it is:
/// a pool shard must stay in its pool (same kind, owner and region); an entry of a
/// legacy bucket (no pool) must stay in its region and with its provider.
pub fn other_pool(
    source: &granary_api::core::BackupBucket,
    destination: &granary_api::core::BackupBucket,
) -> Option<String> {
    use granary_api::core::PoolKind;
    use granary_garden::buckets::pool_of;
    use kube::ResourceExt;
    let describe = |b: &granary_api::core::BackupBucket| {
        format!(
            "{} ({} in {})",
            b.name_any(),
            b.spec.provider.type_,
            b.spec.provider.region
        )
    };
    match (pool_of(source), pool_of(destination)) {
        (Some(s), Some(d)) if s.kind != PoolKind::Legacy => (s != d).then(|| {
            format!(
                "bucket {} is in backup pool {}/{}/{}, the entry's is {}/{}/{} ({})",
                describe(destination),
                d.kind.as_str(),
                d.owner,
                d.region,
                s.kind.as_str(),
                s.owner,
                s.region,
                describe(source)
            )
        }),
        _ => (source.spec.provider.region != destination.spec.provider.region
            || source.spec.provider.type_ != destination.spec.provider.type_)
            .then(|| {
                format!(
                    "bucket {} is not where the entry's backups are now: {}",
                    describe(destination),
                    describe(source)
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Location, MANIFEST_VERSION};
    use proptest::prelude::*;

    fn meta(key: &str, size: u64, etag: &str) -> ObjectMeta {
        ObjectMeta {
            key: key.into(),
            size,
            last_modified: None,
            etag: Some(etag.into()),
        }
    }

    fn obj(key: &str, size: u64, etag: &str, state: ObjectState) -> ManifestObject {
        ManifestObject {
            key: key.into(),
            size,
            etag: Some(etag.into()),
            state,
        }
    }

    fn manifest(objects: Vec<ManifestObject>) -> Manifest {
        let loc = Location {
            bucket: "b".into(),
            provider: "aws".into(),
            key_prefix: String::new(),
        };
        Manifest {
            version: MANIFEST_VERSION,
            entry: "ns/e".into(),
            source: loc.clone(),
            destination: loc,
            created: chrono::DateTime::from_timestamp(0, 0).expect("epoch"),
            copy_passes: 0,
            objects,
        }
    }

    #[test]
    fn plan_strips_the_prefix_and_skips_granary_objects() {
        let listing = vec![
            meta("e/etcd-main/b", 2, "2"),
            meta("e/.granary/entry.json", 1, "m"),
            meta("e/etcd-main/a", 1, "1"),
            meta("other/x", 1, "x"),
        ];
        let objs = source_objects("e/", listing);
        let keys: Vec<&str> = objs.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["etcd-main/a", "etcd-main/b"]);
        assert!(objs.iter().all(|o| o.state == ObjectState::None));
        // A legacy bucket: the whole root, without the marker.
        let legacy = source_objects(
            "",
            vec![meta(".granary/entry.json", 1, "m"), meta("a", 1, "1")],
        );
        assert_eq!(legacy.len(), 1);
    }

    #[test]
    fn relisting_adds_resets_and_marks_vanished() {
        let mut m = manifest(vec![
            obj("copied-same", 1, "a", ObjectState::Copied),
            obj("copied-changed", 1, "a", ObjectState::Copied),
            obj("copied-gone", 1, "a", ObjectState::Copied),
            obj("pending-gone", 1, "a", ObjectState::None),
            obj("notfound-back", 1, "a", ObjectState::NotFound),
            obj("notfound-still", 1, "a", ObjectState::NotFound),
        ]);
        let listing = vec![
            obj("copied-same", 1, "a", ObjectState::None),
            obj("copied-changed", 2, "b", ObjectState::None),
            obj("new", 4, "n", ObjectState::None),
            obj("notfound-back", 1, "a", ObjectState::None),
        ];
        let r = relist(&mut m, listing);
        assert_eq!((r.added, r.changed, r.vanished), (1, 2, 2));
        assert_eq!(r.remove_from_destination, ["copied-gone"]);
        let state = |k: &str| {
            m.objects
                .iter()
                .find(|o| o.key == k)
                .map(|o| o.state)
                .expect("present")
        };
        assert_eq!(state("copied-same"), ObjectState::Copied);
        assert_eq!(state("copied-changed"), ObjectState::None);
        assert_eq!(state("copied-gone"), ObjectState::NotFound);
        assert_eq!(state("pending-gone"), ObjectState::NotFound);
        assert_eq!(state("notfound-back"), ObjectState::None);
        assert_eq!(state("notfound-still"), ObjectState::NotFound);
        assert_eq!(state("new"), ObjectState::None);
        assert!(m.objects.windows(2).all(|w| w[0].key < w[1].key));
        assert_eq!(pending(&m).len(), 3);
    }

    #[test]
    fn head_skips_only_what_matches() {
        let o = obj("k", 10, "\"abc\"", ObjectState::None);
        assert!(!already_copied(&o, None, true));
        assert!(already_copied(&o, Some(&meta("k", 10, "\"abc\"")), true));
        assert!(!already_copied(&o, Some(&meta("k", 10, "\"abd\"")), true));
        assert!(!already_copied(&o, Some(&meta("k", 9, "\"abc\"")), true));
        // Across providers only the size can be compared.
        assert!(already_copied(&o, Some(&meta("k", 10, "0x8DC")), false));
        // A multipart etag says nothing about the content hash.
        assert!(already_copied(&o, Some(&meta("k", 10, "\"abc-3\"")), true));
    }

    #[test]
    fn server_side_only_with_the_same_provider_and_credentials() {
        let id = |p: &str, key: &str| StoreIdentity {
            provider: p.into(),
            credentials: [("accessKeyID".to_string(), key.as_bytes().to_vec())].into(),
        };
        assert_eq!(
            copy_mode(&id("aws", "a"), &id("aws", "a")),
            CopyMode::ServerSide
        );
        assert_eq!(
            copy_mode(&id("aws", "a"), &id("aws", "b")),
            CopyMode::Streaming
        );
        assert_eq!(
            copy_mode(&id("local", "a"), &id("aws", "a")),
            CopyMode::Streaming
        );
    }

    #[test]
    fn sources_and_deleted_entries_do_not_start_a_migration() {
        use granary_api::core::BackupEntry;
        let entry = |name: &str| BackupEntry::new(name, Default::default());
        assert!(refuse_to_start(&entry("shoot--p--a--1")).is_none());
        assert!(
            refuse_to_start(&entry("source-shoot--p--a--1")).is_some_and(|w| w.contains("source"))
        );
        let mut deleting = entry("shoot--p--a--1");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(refuse_to_start(&deleting).is_some_and(|w| w.contains("deleted")));
    }

    #[test]
    fn quota_uses_the_placement_rule() {
        assert!(quota_allows(0, true, Some(1)));
        assert!(!quota_allows(1, true, Some(1)));
        assert!(quota_allows(500, true, None));
        assert!(!quota_allows(0, false, None));
    }

    #[test]
    fn estimate_grows_with_work_and_shrinks_with_parallelism() {
        let a = estimate(1000, 0, CopyMode::ServerSide, 1);
        let b = estimate(1000, 0, CopyMode::ServerSide, 10);
        assert!(a > b && b > Duration::ZERO);
        assert!(
            estimate(10, 1 << 30, CopyMode::Streaming, 4) > estimate(10, 0, CopyMode::Streaming, 4)
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// After a relisting, the manifest holds every listed key exactly once and no
        /// listed object is `NotFound`; every unlisted key is `NotFound`.
        #[test]
        fn relisting_mirrors_the_listing(
            before in proptest::collection::btree_map("[a-f]{1,3}", (0u64..4, 0u8..3), 0..20),
            after in proptest::collection::btree_map("[a-f]{1,3}", 0u64..4, 0..20),
        ) {
            let states = [ObjectState::None, ObjectState::Copied, ObjectState::NotFound];
            let mut m = manifest(before.iter().map(|(k, (s, st))| obj(k, *s, "e", states[*st as usize])).collect());
            let listing = after.iter().map(|(k, s)| obj(k, *s, "e", ObjectState::None)).collect();
            relist(&mut m, listing);
            let keys: Vec<&String> = m.objects.iter().map(|o| &o.key).collect();
            let mut sorted = keys.clone();
            sorted.dedup();
            prop_assert_eq!(keys.len(), sorted.len());
            for o in &m.objects {
                match after.get(&o.key) {
                    Some(size) => {
                        prop_assert_ne!(o.state, ObjectState::NotFound);
                        prop_assert_eq!(o.size, *size);
                    }
                    None => prop_assert_eq!(o.state, ObjectState::NotFound),
                }
            }
        }
    }
}

#[cfg(test)]
mod pool_tests {
    use super::other_pool;
    use granary_api::core::{
        BackupBucket, BackupBucketProvider, BackupBucketSpec, LABEL_POOL_KIND, LABEL_POOL_OWNER,
        LABEL_REGION,
    };

    fn bucket(
        name: &str,
        kind: Option<&str>,
        owner: &str,
        region: &str,
        provider: &str,
    ) -> BackupBucket {
        let mut b = BackupBucket::new(
            name,
            BackupBucketSpec {
                provider: BackupBucketProvider {
                    type_: provider.into(),
                    region: region.into(),
                },
                ..Default::default()
            },
        );
        if let Some(kind) = kind {
            b.metadata.labels = Some(
                [
                    (LABEL_POOL_KIND.to_string(), kind.to_string()),
                    (LABEL_POOL_OWNER.to_string(), owner.to_string()),
                    (LABEL_REGION.to_string(), region.to_string()),
                ]
                .into(),
            );
        }
        b
    }

    #[test]
    fn an_entry_stays_in_its_pool_unless_asked() {
        let eu0 = bucket("p-eu-0", Some("cloudprofile"), "p", "europe", "aws");
        let eu1 = bucket("p-eu-1", Some("cloudprofile"), "p", "europe", "aws");
        let us0 = bucket("p-us-0", Some("cloudprofile"), "p", "america", "aws");
        assert_eq!(other_pool(&eu0, &eu1), None);
        let why = other_pool(&eu0, &us0).expect("another region's pool");
        assert!(why.contains("p-us-0 (aws in america)"), "{why}");
        assert!(why.contains("cloudprofile/p/europe"), "{why}");
        let legacy = bucket("old", Some("legacy"), "shoot", "europe", "aws");
        assert_eq!(other_pool(&legacy, &eu0), None);
        assert!(other_pool(&legacy, &us0).is_some());
        let unlabelled = bucket("old2", None, "", "europe", "gcp");
        assert!(other_pool(&unlabelled, &eu0).is_some(), "another provider");
    }
}

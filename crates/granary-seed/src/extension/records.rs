//! Reading and writing the records Granary keeps in a bucket (`.granary/bucket.json` and
//! the entries' prefix markers) and the root listing that the ownership decisions of
//! [`crate::ownership`] are made over. I/O only; every decision is there.

use crate::context::{Context, ReconcileError};
use crate::ownership::{BucketRecord, RootListing, entry_like, first_layout};
use crate::prefix::{BUCKET_RECORD, BucketLayout, ENTRY_MARKER};
use bytes::Bytes;
use futures::TryStreamExt;
use granary_providers::{ErrorKind, ListEntry, ObjectStore, get_bytes};

/// How many top-level directories of a bucket root are looked into for entry markers.
/// A legacy bucket has a handful (etcd's `v2/`…); past this the bucket is taken to hold
/// other entries (shared), the safe side.
const ROOT_SCAN_LIMIT: usize = 10_000;

/// Reads a small JSON record Granary keeps in a bucket; `None` when it is not there.
/// A record that does not parse is an error: nothing acts on a prefix it cannot read.
pub(crate) async fn read_record<T: serde::de::DeserializeOwned>(
    store: &dyn ObjectStore,
    bucket: &str,
    key: &str,
) -> Result<Option<T>, ReconcileError> {
    match get_bytes(store, bucket, key).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            ReconcileError::Invalid(format!(
                "{bucket}/{key} is not a record Granary wrote ({e}): refusing to act on it"
            ))
        }),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::BucketNotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Writes a record (JSON).
pub(crate) async fn write_record<T: serde::Serialize>(
    store: &dyn ObjectStore,
    bucket: &str,
    key: &str,
    record: &T,
) -> Result<(), ReconcileError> {
    let body = serde_json::to_vec(record).map_err(|e| {
        ReconcileError::Invalid(format!("cannot encode the record {bucket}/{key}: {e}"))
    })?;
    store.put(bucket, key, Bytes::from(body)).await?;
    Ok(())
}

/// What the provider's own listing of the bucket root shows: top-level directories
/// holding an entry marker or named like entries, and the root marker.
pub(crate) async fn scan_root(
    store: &dyn ObjectStore,
    bucket: &str,
) -> Result<RootListing, ReconcileError> {
    let mut out = RootListing::default();
    let mut listing = store.list(bucket, "", Some("/"));
    let mut scanned = 0usize;
    while let Some(item) = listing.try_next().await? {
        let ListEntry::Prefix(p) = item else { continue };
        if p == ".granary/" {
            continue;
        }
        scanned += 1;
        if entry_like(&p) || scanned > ROOT_SCAN_LIMIT {
            out.entry_like_prefixes.push(p);
            continue;
        }
        match store.head(bucket, &format!("{p}{ENTRY_MARKER}")).await {
            Ok(_) => out.prefixes_with_markers.push(p),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    drop(listing);
    out.root_marker = read_record(store, bucket, ENTRY_MARKER).await?;
    Ok(out)
}

/// The bucket's record, written now when it has none: the layout its label asks for,
/// unless the bucket already holds other entries (then shared).
pub(crate) async fn ensure_bucket_record(
    ctx: &Context,
    store: &dyn ObjectStore,
    bucket: &str,
    label_says_legacy: bool,
) -> Result<BucketRecord, ReconcileError> {
    if let Some(record) = read_record::<BucketRecord>(store, bucket, BUCKET_RECORD).await? {
        return Ok(record);
    }
    let holds_entries = if label_says_legacy {
        let root = scan_root(store, bucket).await?;
        !root.prefixes_with_markers.is_empty() || !root.entry_like_prefixes.is_empty()
    } else {
        false
    };
    let layout: BucketLayout = first_layout(label_says_legacy, holds_entries);
    if label_says_legacy && layout == BucketLayout::Shared {
        tracing::warn!(
            bucket,
            "bucket is labelled legacy but holds other entries' prefixes: recorded as shared"
        );
    }
    let record = BucketRecord {
        bucket: bucket.to_string(),
        layout: layout.into(),
        created: Some(ctx.clock.now()),
    };
    write_record(store, bucket, BUCKET_RECORD, &record).await?;
    Ok(record)
}

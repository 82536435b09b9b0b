//! The manifest on disk and in object storage: gzip-compressed JSON
//! `{"version":1,"items":[…]}` with items in key order; and the manifest rebuilt from a
//! tarball for backups that carry none.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::ser::{SerializeSeq, SerializeStruct};
use serde::{Deserialize, Serialize, Serializer};

use super::{Item, Manifest, ManifestError, ManifestItem, item_from_object};
use crate::archive::{
    ArchiveEntry, ArchiveError, ArchiveLimits, RetainedBudget, VersionDir, read_archive_within,
};
use crate::files::is_corrupt_gzip;

/// The `version` field of the stored manifest.
pub const MANIFEST_SCHEMA_VERSION: u64 = 1;

#[derive(Deserialize)]
struct StoredManifest {
    version: u64,
    #[serde(default)]
    items: Vec<ManifestItem>,
}

/// The JSON text of a `manifest.json.gz`, refused past `max_bytes`.
pub(super) fn read_json_gz<R: Read>(input: R, max_bytes: u64) -> Result<Vec<u8>, ManifestError> {
    let mut limited = MultiGzDecoder::new(input).take(max_bytes.saturating_add(1));
    let mut json = Vec::new();
    limited.read_to_end(&mut json).map_err(|e| {
        if is_corrupt_gzip(&e) {
            ManifestError::Corrupt(e.to_string())
        } else {
            ManifestError::Io(e)
        }
    })?;
    if json.len() as u64 > max_bytes {
        return Err(ManifestError::TooLarge { limit: max_bytes });
    }
    Ok(json)
}

/// The items of a stored manifest's JSON text, in file order; any schema version but 1
/// is refused.
pub(super) fn stored_items(json: &[u8]) -> Result<Vec<ManifestItem>, ManifestError> {
    let stored: StoredManifest = serde_json::from_slice(json)?;
    if stored.version != MANIFEST_SCHEMA_VERSION {
        return Err(ManifestError::UnsupportedVersion(stored.version));
    }
    Ok(stored.items)
}

/// Every field of an item, borrowed, in the stored field order: what the stored manifest
/// writes, and what its fingerprint hashes ([`super::ItemDigests`]).
#[derive(Serialize, Hash)]
pub(super) struct ItemRecord<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
    resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    labels: &'a std::collections::BTreeMap<String, String>,
    annotations: &'a std::collections::BTreeMap<String, String>,
    owners: &'a [String],
}

impl<'a> ItemRecord<'a> {
    pub(super) fn of(item: Item<'a>) -> Self {
        ItemRecord {
            group: &item.key.group,
            version: &item.meta.version,
            kind: &item.meta.kind,
            resource: &item.key.resource,
            namespace: &item.key.namespace,
            name: &item.key.name,
            uid: &item.meta.uid,
            labels: &item.meta.labels,
            annotations: &item.meta.annotations,
            owners: &item.meta.owners,
        }
    }

    pub(super) fn of_owned(item: &'a ManifestItem) -> Self {
        ItemRecord {
            group: &item.group,
            version: &item.version,
            kind: &item.kind,
            resource: &item.resource,
            namespace: &item.namespace,
            name: &item.name,
            uid: &item.uid,
            labels: &item.labels,
            annotations: &item.annotations,
            owners: &item.owners,
        }
    }
}

struct Items<'a>(&'a Manifest);

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0.iter() {
            seq.serialize_element(&ItemRecord::of(item))?;
        }
        seq.end()
    }
}

impl Serialize for Manifest {
    /// The stored schema: `{"version":1,"items":[…]}`, items in key order.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Manifest", 2)?;
        st.serialize_field("version", &MANIFEST_SCHEMA_VERSION)?;
        st.serialize_field("items", &Items(self))?;
        st.end()
    }
}

impl Manifest {
    /// Writes the manifest as gzip-compressed JSON (the `manifest.json.gz` object),
    /// streaming: no copy of the JSON is held in memory.
    pub fn write_gz<W: Write>(&self, out: W) -> Result<W, ManifestError> {
        let mut gz = GzEncoder::new(out, Compression::default());
        serde_json::to_writer(&mut gz, self)?;
        Ok(gz.finish()?)
    }

    /// The gzip-compressed JSON as bytes.
    pub fn to_gz_bytes(&self) -> Vec<u8> {
        // Writing into a Vec has no I/O errors and the records hold only strings.
        self.write_gz(Vec::new())
            .expect("serializing a manifest into a Vec cannot fail")
    }

    /// Reads a `manifest.json.gz`, refusing more than `max_bytes` of JSON and any schema
    /// version but 1, and rebuilds the UID index and owner map. Duplicate keys or UIDs in
    /// the file are refused as [`Manifest::add`] refuses them.
    pub fn read_gz<R: Read>(input: R, max_bytes: u64) -> Result<Self, ManifestError> {
        Self::from_json(&read_json_gz(input, max_bytes)?)
    }

    /// Parses the (uncompressed) stored JSON.
    pub fn from_json(json: &[u8]) -> Result<Self, ManifestError> {
        let mut manifest = Manifest::new();
        for item in stored_items(json)? {
            manifest.add(item)?;
        }
        Ok(manifest)
    }

    /// Rebuilds the manifest of a backup from its tarball (for backups without a stored
    /// one): one item per unversioned item file, described by the same function the
    /// writer uses, so it equals the manifest built while writing. Each item's
    /// namespace and name must match its path. The manifest and the reader together keep
    /// at most [`ArchiveLimits::max_retained_bytes`].
    pub fn from_archive<R: Read + Send>(
        input: R,
        limits: &ArchiveLimits,
    ) -> Result<Self, ArchiveError> {
        let budget = RetainedBudget::for_limits(limits);
        let mut manifest = Manifest::new();
        read_archive_within(input, limits, &budget, |entry| {
            if let ArchiveEntry::Item(item) = entry
                && item.path.version_dir == VersionDir::Unversioned
            {
                let described =
                    item_from_object(&item.path.group_resource, item.object).map_err(|e| {
                        ArchiveError::InvalidItem {
                            path: item.entry_path.to_owned(),
                            reason: e.to_string(),
                        }
                    })?;
                if described.namespace != item.path.scope.namespace()
                    || described.name != item.path.name
                {
                    return Err(ArchiveError::InvalidItem {
                        path: item.entry_path.to_owned(),
                        reason: format!(
                            "object is {:?}/{:?}, not what its path says",
                            described.namespace, described.name
                        ),
                    });
                }
                budget.charge(described.heap_bytes())?;
                manifest.add(described)?;
            }
            Ok(())
        })?;
        Ok(manifest)
    }
}

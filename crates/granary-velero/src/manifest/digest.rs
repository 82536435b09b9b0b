//! A manifest as a multiset of item fingerprints, for the one question a deep check asks
//! of a stored manifest: does it hold exactly the items the tarball holds? Answering it
//! by building a second [`Manifest`] costs a B-tree of 50,000 heap-allocated keys, whose
//! comparisons are mostly cache misses; a sorted vector of 32-byte digests answers it in
//! a few milliseconds and 32 bytes per item.

use std::hash::{Hash, Hasher};
use std::io::Read;

use sha2::{Digest, Sha256};

use super::store::{ItemRecord, read_json_gz, stored_items};
use super::{Item, Manifest, ManifestError, ManifestItem};

/// The fingerprint of a record: SHA-256 over its `Hash`. std's `Hash` for strings ends
/// each with `0xff` and starts every collection with its length, so the encoding is
/// prefix-free and equal digests mean equal fields. Lengths are hashed as native-endian
/// `usize`, which is fine because digests are only compared within one process, never
/// stored.
fn fingerprint(record: &ItemRecord<'_>) -> [u8; 32] {
    /// `Hasher` over SHA-256; `finish` is never called.
    struct Sha(Sha256);
    impl Hasher for Sha {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0
        }
    }
    let mut h = Sha(Sha256::new());
    record.hash(&mut h);
    h.0.finalize().into()
}

impl ManifestItem {
    /// The item's fingerprint: equal for equal items (every field), else different.
    pub fn digest(&self) -> [u8; 32] {
        fingerprint(&ItemRecord::of_owned(self))
    }
}

impl Item<'_> {
    /// [`ManifestItem::digest`] of this item.
    pub fn digest(&self) -> [u8; 32] {
        fingerprint(&ItemRecord::of(*self))
    }
}

/// The items of a manifest as sorted fingerprints: two are equal exactly when the
/// manifests hold the same items (a stored manifest listing an item twice differs from
/// one listing it once).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemDigests(Vec<[u8; 32]>);

impl ItemDigests {
    pub fn of_manifest(manifest: &Manifest) -> Self {
        manifest.iter().map(|i| i.digest()).collect()
    }

    /// Reads a `manifest.json.gz` as [`Manifest::read_gz`] does (at most `max_bytes`
    /// of JSON, schema version 1) without building the manifest.
    pub fn read_gz<R: Read>(input: R, max_bytes: u64) -> Result<Self, ManifestError> {
        Self::read_gz_visiting(input, max_bytes, |_| {})
    }

    /// [`ItemDigests::read_gz`], handing each stored item to `visit` in file order.
    pub fn read_gz_visiting<R: Read>(
        input: R,
        max_bytes: u64,
        mut visit: impl FnMut(&ManifestItem),
    ) -> Result<Self, ManifestError> {
        let items = stored_items(&read_json_gz(input, max_bytes)?)?;
        Ok(items
            .iter()
            .map(|i| {
                visit(i);
                i.digest()
            })
            .collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes held, for memory budgets.
    pub fn heap_bytes(&self) -> u64 {
        (self.0.capacity() * 32) as u64
    }
}

impl FromIterator<[u8; 32]> for ItemDigests {
    fn from_iter<I: IntoIterator<Item = [u8; 32]>>(iter: I) -> Self {
        let mut v: Vec<[u8; 32]> = iter.into_iter().collect();
        v.sort_unstable();
        Self(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn item(name: &str) -> ManifestItem {
        ManifestItem {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            resource: "deployments".into(),
            namespace: "a".into(),
            name: name.into(),
            uid: format!("u-{name}"),
            labels: BTreeMap::from([("app".into(), "x".into())]),
            annotations: BTreeMap::new(),
            owners: vec![],
        }
    }

    #[test]
    fn digests_tell_manifests_apart_by_every_field_and_by_count() {
        let mut m = Manifest::new();
        m.add(item("x")).expect("adds");
        m.add(item("y")).expect("adds");
        let same = ItemDigests::of_manifest(&m);
        assert_eq!(
            same,
            [item("y"), item("x")]
                .iter()
                .map(ManifestItem::digest)
                .collect()
        );
        let round_trip = ItemDigests::read_gz(&m.to_gz_bytes()[..], 1 << 20).expect("reads");
        assert_eq!(same, round_trip);

        let changes: [fn(&mut ManifestItem); 6] = [
            |i| i.version = "v2".into(),
            |i| i.uid = "other".into(),
            |i| {
                i.labels.insert("app".into(), "y".into());
            },
            |i| {
                i.annotations.insert("app".into(), "x".into());
            },
            |i| i.owners.push("o".into()),
            // Field boundaries matter: "a"+"pps" is not "ap"+"ps".
            |i| {
                i.group = "app".into();
                i.version = "sv1".into();
            },
        ];
        for change in changes {
            let mut changed = item("y");
            change(&mut changed);
            let other: ItemDigests = [item("x").digest(), changed.digest()].into_iter().collect();
            assert_ne!(same, other, "{changed:?}");
        }
        let twice: ItemDigests = [item("x"), item("x"), item("y")]
            .iter()
            .map(ManifestItem::digest)
            .collect();
        assert_ne!(same, twice);
    }
}

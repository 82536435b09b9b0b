//! The per-backup files beside the tarball, encoded as Velero encodes them:
//! `velero-backup.json` (the typed Backup as Go's `json.MarshalIndent`, see
//! [`encode_backup_json`]), `<name>-resource-list.json.gz`
//! and `<name>-results.gz` (gzip of compact JSON plus a newline, Go's `json.Encoder`), and
//! `<name>-logs.gz` (gzip of log lines). Restores use the same results shape.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::archive::json::write_compact_typed;
use super::manifest::Manifest;
use super::resource::join_api_version;

mod backup_json;
#[cfg(test)]
mod backup_json_tests;
mod go_shape;

pub use backup_json::{BACKUP_KIND, VELERO_API_VERSION, decode_backup_json, encode_backup_json};

#[derive(Debug, Error)]
pub enum FilesError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a valid gzip stream: {0}")]
    Corrupt(String),
    #[error("file decompresses to more than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("not a velero.io/v1 Backup: {0}")]
    NotABackup(String),
    #[error("field {path}: {source}")]
    Field {
        path: String,
        source: serde_json::Error,
    },
}

/// `<name>-resource-list.json.gz`: `<groupVersion>/<Kind>` → sorted `ns/name` (or `name`
/// for cluster-scoped objects).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceList(pub BTreeMap<String, BTreeSet<String>>);

impl ResourceList {
    /// One entry per manifest item, at the item's (preferred) version.
    pub fn from_manifest(manifest: &Manifest) -> Self {
        let mut list = Self::default();
        for item in manifest.iter() {
            list.add(
                &item.api_version(),
                &item.meta.kind,
                &item.key.namespace,
                &item.key.name,
            );
        }
        list
    }

    pub fn add(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let value = if namespace.is_empty() {
            name.to_owned()
        } else {
            format!("{namespace}/{name}")
        };
        self.0
            .entry(format!("{api_version}/{kind}"))
            .or_default()
            .insert(value);
    }

    /// Adds an entry from group and version separately.
    pub fn add_gv(&mut self, group: &str, version: &str, kind: &str, namespace: &str, name: &str) {
        self.add(&join_api_version(group, version), kind, namespace, name);
    }

    pub fn to_gz_bytes(&self) -> Vec<u8> {
        encode_json_gz(self)
    }

    pub fn read_gz<R: Read>(input: R, max_bytes: u64) -> Result<Self, FilesError> {
        Ok(serde_json::from_slice(&gunzip_limited(input, max_bytes)?)?)
    }
}

/// A resource list as sorted fingerprints of its (`<groupVersion>/<Kind>`, entry)
/// pairs: equal exactly when the lists are (an entry listed twice differs), without the
/// sets of strings, for a deep check of a large backup (see
/// [`crate::manifest::ItemDigests`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceListDigests(Vec<[u8; 32]>);

impl ResourceListDigests {
    /// Adds the entry a manifest item makes ([`ResourceList::add_gv`]).
    pub fn add_gv(&mut self, group: &str, version: &str, kind: &str, namespace: &str, name: &str) {
        let mut h = Sha256::new();
        h.update(join_api_version(group, version));
        h.update(b"/");
        h.update(kind);
        h.update([0]);
        if !namespace.is_empty() {
            h.update(namespace);
            h.update(b"/");
        }
        h.update(name);
        self.0.push(h.finalize().into());
    }

    /// Sorts, once every entry was added.
    pub fn finish(mut self) -> Self {
        self.0.sort_unstable();
        self
    }

    /// Reads a stored `<name>-resource-list.json.gz`.
    pub fn read_gz<R: Read>(input: R, max_bytes: u64) -> Result<Self, FilesError> {
        let list: BTreeMap<String, Vec<String>> =
            serde_json::from_slice(&gunzip_limited(input, max_bytes)?)?;
        let mut out = Vec::with_capacity(list.values().map(Vec::len).sum());
        for (key, entries) in &list {
            for entry in entries {
                let mut h = Sha256::new();
                h.update(key);
                h.update([0]);
                h.update(entry);
                out.push(h.finalize().into());
            }
        }
        Ok(Self(out).finish())
    }
}

/// Messages of one kind (errors or warnings), grouped as Velero groups them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageSet {
    /// About Velero/Granary itself (object storage, reading the backup…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub velero: Vec<String>,
    /// About cluster-scoped resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<String>,
    /// About resources in each namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Vec<String>>,
}

impl MessageSet {
    pub fn add_velero(&mut self, msg: impl Into<String>) {
        self.velero.push(msg.into());
    }

    /// Adds to the namespace's list, or to `cluster` when `namespace` is empty.
    pub fn add(&mut self, namespace: &str, msg: impl Into<String>) {
        if namespace.is_empty() {
            self.cluster.push(msg.into());
        } else {
            self.namespaces
                .entry(namespace.to_owned())
                .or_default()
                .push(msg.into());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.velero.is_empty() && self.cluster.is_empty() && self.namespaces.is_empty()
    }

    /// Total number of messages.
    pub fn count(&self) -> usize {
        self.velero.len()
            + self.cluster.len()
            + self.namespaces.values().map(Vec::len).sum::<usize>()
    }

    pub fn merge(&mut self, other: MessageSet) {
        self.velero.extend(other.velero);
        self.cluster.extend(other.cluster);
        for (ns, msgs) in other.namespaces {
            self.namespaces.entry(ns).or_default().extend(msgs);
        }
    }
}

/// `<name>-results.gz` (and `restore-<name>-results.gz`): `{"errors":…,"warnings":…}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Results {
    #[serde(default)]
    pub errors: MessageSet,
    #[serde(default)]
    pub warnings: MessageSet,
}

impl Results {
    pub fn to_gz_bytes(&self) -> Vec<u8> {
        encode_json_gz(self)
    }

    pub fn read_gz<R: Read>(input: R, max_bytes: u64) -> Result<Self, FilesError> {
        Ok(serde_json::from_slice(&gunzip_limited(input, max_bytes)?)?)
    }
}

/// `<name>-logs.gz`: each line followed by a newline, gzip-compressed.
pub fn encode_logs<I, S>(lines: I) -> Vec<u8>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for line in lines {
        let line = line.as_ref();
        // Writes into a Vec cannot fail.
        gz.write_all(line.as_bytes())
            .expect("writing to a Vec cannot fail");
        if !line.ends_with('\n') {
            gz.write_all(b"\n").expect("writing to a Vec cannot fail");
        }
    }
    gz.finish()
        .expect("finishing a gzip stream into a Vec cannot fail")
}

/// Decompresses a gzip stream (all members), refusing more than `max_bytes`.
pub fn gunzip_limited<R: Read>(input: R, max_bytes: u64) -> Result<Vec<u8>, FilesError> {
    let mut out = Vec::new();
    MultiGzDecoder::new(input)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| {
            if is_corrupt_gzip(&e) {
                FilesError::Corrupt(e.to_string())
            } else {
                FilesError::Io(e)
            }
        })?;
    if out.len() as u64 > max_bytes {
        return Err(FilesError::TooLarge { limit: max_bytes });
    }
    Ok(out)
}

/// Whether a gzip decoder's error is about the data (bad header, corrupt deflate
/// stream, checksum mismatch, truncation) rather than the underlying reader.
pub(crate) fn is_corrupt_gzip(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::InvalidInput | ErrorKind::InvalidData | ErrorKind::UnexpectedEof
    )
}

/// gzip(compact Go JSON + "\n"), as Velero's `encodeToJSONGzip`; struct fields keep
/// their declared (Go) order, e.g. `velero`, `cluster`, `namespaces`.
pub fn encode_json_gz<T: Serialize>(value: &T) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    // Only strings, lists and string-keyed maps, written into a Vec: cannot fail.
    write_compact_typed(&mut gz, value).expect("writing string JSON into a Vec cannot fail");
    gz.write_all(b"\n").expect("writing to a Vec cannot fail");
    gz.finish()
        .expect("finishing a gzip stream into a Vec cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ManifestItem;

    fn gunzip(b: &[u8]) -> String {
        String::from_utf8(gunzip_limited(b, 1 << 20).expect("gzip")).expect("utf8")
    }

    #[test]
    fn resource_list_matches_velero_shape() {
        let mut m = Manifest::new();
        for (g, v, k, r, ns, n) in [
            ("", "v1", "Pod", "pods", "ns1", "b"),
            ("", "v1", "Pod", "pods", "ns1", "a"),
            ("", "v1", "PersistentVolume", "persistentvolumes", "", "pv1"),
            ("apps", "v1", "Deployment", "deployments", "ns2", "d"),
        ] {
            m.add(ManifestItem {
                group: g.into(),
                version: v.into(),
                kind: k.into(),
                resource: r.into(),
                namespace: ns.into(),
                name: n.into(),
                uid: String::new(),
                labels: Default::default(),
                annotations: Default::default(),
                owners: vec![],
            })
            .expect("unique");
        }
        let list = ResourceList::from_manifest(&m);
        let text = gunzip(&list.to_gz_bytes());
        assert_eq!(
            text,
            "{\"apps/v1/Deployment\":[\"ns2/d\"],\"v1/PersistentVolume\":[\"pv1\"],\"v1/Pod\":[\"ns1/a\",\"ns1/b\"]}\n"
        );
        assert_eq!(
            ResourceList::read_gz(&list.to_gz_bytes()[..], 1 << 20).expect("reads"),
            list
        );

        // Its fingerprints, from the manifest and from the stored file, agree; another
        // list's do not.
        let mut expected = ResourceListDigests::default();
        for i in m.iter() {
            expected.add_gv(
                &i.key.group,
                &i.meta.version,
                &i.meta.kind,
                &i.key.namespace,
                &i.key.name,
            );
        }
        let expected = expected.finish();
        let stored = |text: &str| {
            let mut gz = GzEncoder::new(Vec::new(), Compression::default());
            gz.write_all(text.as_bytes()).expect("gzip");
            ResourceListDigests::read_gz(&gz.finish().expect("gzip")[..], 1 << 20).expect("reads")
        };
        assert_eq!(stored(&text), expected);
        for other in [
            r#"{"apps/v1/Deployment":["ns2/d"],"v1/PersistentVolume":["pv1"],"v1/Pod":["ns1/a"]}"#,
            r#"{"apps/v1/Deployment":["ns2/d"],"v1/PersistentVolume":["pv1"],"v1/Pod":["ns1/a","ns1/b","ns1/b"]}"#,
            r#"{"apps/v1/Deployment":["ns2/d"],"v1/PersistentVolume":["pv1"],"v1/Pod":["ns1/a","ns2/b"]}"#,
            r#"{"apps/v1/Deployment":["ns2/d"],"v1/PersistentVolume":["pv1"],"v2/Pod":["ns1/a","ns1/b"]}"#,
        ] {
            assert_ne!(stored(other), expected, "{other}");
        }
    }

    #[test]
    fn results_match_velero_shape() {
        let mut r = Results::default();
        assert_eq!(
            gunzip(&r.to_gz_bytes()),
            "{\"errors\":{},\"warnings\":{}}\n"
        );
        r.errors.add_velero("bucket unreachable");
        r.errors.add("", "pv1 failed");
        r.warnings.add("ns1", "pod <p> skipped");
        assert_eq!(
            gunzip(&r.to_gz_bytes()),
            "{\"errors\":{\"velero\":[\"bucket unreachable\"],\"cluster\":[\"pv1 failed\"]},\"warnings\":{\"namespaces\":{\"ns1\":[\"pod \\u003cp\\u003e skipped\"]}}}\n"
        );
        assert_eq!(r.errors.count(), 2);
        assert_eq!(
            Results::read_gz(&r.to_gz_bytes()[..], 1 << 20).expect("reads"),
            r
        );
    }

    #[test]
    fn bad_gzip_is_a_data_error_not_an_io_error() {
        // Found by the manifest_reader fuzz target: a bad gzip header came back as `Io`.
        let good = Results::default().to_gz_bytes();
        for bad in [
            &b"not gzip"[..],
            &good[..good.len() - 3],
            &[0x1f, 0x8b, 8, 0xff][..],
        ] {
            for err in [
                Results::read_gz(bad, 1 << 20).expect_err("refused"),
                ResourceList::read_gz(bad, 1 << 20).expect_err("refused"),
            ] {
                assert!(matches!(err, FilesError::Corrupt(_)), "{err:?}");
            }
        }
    }

    #[test]
    fn logs_are_gzipped_lines() {
        let gz = encode_logs(["a", "b\n", "c"]);
        assert_eq!(gunzip(&gz), "a\nb\nc\n");
        assert!(matches!(
            gunzip_limited(&gz[..], 3),
            Err(FilesError::TooLarge { limit: 3 })
        ));
    }
}

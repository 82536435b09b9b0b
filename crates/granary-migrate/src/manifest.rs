//! The migration manifest (docs/formats.md#migration-manifest): the record of every
//! source object of one migration with its copy state, stored gzipped JSON in the
//! destination under the entry prefix at
//! `<prefix>/.granary/migration-<source bucket>.json.gz`. A re-run reads it back and
//! copies only what is not `Copied` yet. No I/O here beyond bytes in and out.

use std::io::{Read, Write};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The manifest schema version written by this build.
pub const MANIFEST_VERSION: u32 = 1;

/// Where one side of a migration lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    pub bucket: String,
    /// Provider type (`aws`, `azure`, `gcp`, `local`).
    pub provider: String,
    /// Key prefix of the entry in the bucket: `<prefix>/`, or empty for a legacy bucket.
    pub key_prefix: String,
}

/// The copy state of one object: `None`, `Copied` or `NotFound` (see
/// docs/formats.md#migration-manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectState {
    /// Not copied yet (or changed in the source since it was copied).
    None,
    /// The destination holds the object as listed.
    Copied,
    /// The source object vanished (etcd's garbage collection) before it was copied or
    /// after; the destination holds no copy.
    NotFound,
}

/// One source object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestObject {
    /// The key relative to the entry prefix (the same on both sides).
    pub key: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    pub state: ObjectState,
}

/// Everything one migration copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    /// `<namespace>/<name>` of the garden BackupEntry.
    pub entry: String,
    pub source: Location,
    pub destination: Location,
    pub created: DateTime<Utc>,
    /// Copy passes started; before the first, nothing can be in the destination, so the
    /// destination HEADs that detect a crash's unrecorded copies are skipped.
    pub copy_passes: u32,
    /// Sorted by key, unique.
    pub objects: Vec<ManifestObject>,
}

/// Counts over a manifest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub objects: u64,
    pub bytes: u64,
    pub copied: u64,
    pub not_found: u64,
    pub pending: u64,
    pub pending_bytes: u64,
}

/// Why a stored manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest is not valid gzip: {0}")]
    Gzip(#[from] std::io::Error),
    #[error("manifest is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("manifest version {0} is newer than this build understands ({MANIFEST_VERSION})")]
    Version(u32),
}

/// The manifest's key in the destination bucket, under the destination entry prefix
/// (`key_prefix` ends with `/` or is empty).
pub fn manifest_key(destination_key_prefix: &str, source_bucket: &str) -> String {
    format!("{destination_key_prefix}.granary/migration-{source_bucket}.json.gz")
}

/// True for Granary's own objects under an entry prefix (`.granary/…`): never copied,
/// the destination has its own.
pub fn is_granary_key(relative_key: &str) -> bool {
    relative_key.starts_with(".granary/")
}

impl Manifest {
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for o in &self.objects {
            s.objects += 1;
            s.bytes += o.size;
            match o.state {
                ObjectState::None => {
                    s.pending += 1;
                    s.pending_bytes += o.size;
                }
                ObjectState::Copied => s.copied += 1,
                ObjectState::NotFound => s.not_found += 1,
            }
        }
        s
    }

    /// Gzipped JSON.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("a manifest of strings and numbers serialises");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&json)
            .and_then(|()| gz.finish())
            .expect("writing into a Vec cannot fail")
    }

    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut json)?;
        let m: Manifest = serde_json::from_slice(&json)?;
        if m.version > MANIFEST_VERSION {
            return Err(ManifestError::Version(m.version));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            entry: "garden-p/shoot--p--a--1".into(),
            source: Location {
                bucket: "shoot--p--a--1".into(),
                provider: "aws".into(),
                key_prefix: String::new(),
            },
            destination: Location {
                bucket: "aws-eu-1-0a1b2c3d-0".into(),
                provider: "aws".into(),
                key_prefix: "shoot--p--a--1/".into(),
            },
            created: DateTime::from_timestamp(1_700_000_000, 0).expect("valid time"),
            copy_passes: 0,
            objects: vec![
                ManifestObject {
                    key: "etcd-main/a".into(),
                    size: 3,
                    etag: Some("\"x\"".into()),
                    state: ObjectState::Copied,
                },
                ManifestObject {
                    key: "etcd-main/b".into(),
                    size: 5,
                    etag: None,
                    state: ObjectState::None,
                },
                ManifestObject {
                    key: "etcd-main/c".into(),
                    size: 7,
                    etag: None,
                    state: ObjectState::NotFound,
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_counts() {
        let m = manifest();
        let back = Manifest::decode(&m.encode()).expect("decodes");
        assert_eq!(back, m);
        let s = m.summary();
        assert_eq!(
            (
                s.objects,
                s.bytes,
                s.copied,
                s.not_found,
                s.pending,
                s.pending_bytes
            ),
            (3, 15, 1, 1, 1, 5)
        );
        let json = serde_json::to_value(&m).expect("json");
        assert_eq!(json["objects"][0]["state"], "Copied");
        assert_eq!(json["objects"][1]["state"], "None");
        assert_eq!(json["objects"][2]["state"], "NotFound");
    }

    #[test]
    fn refuses_garbage_and_newer_versions() {
        assert!(matches!(
            Manifest::decode(b"not gzip"),
            Err(ManifestError::Gzip(_))
        ));
        let mut m = manifest();
        m.version = MANIFEST_VERSION + 1;
        assert!(matches!(
            Manifest::decode(&m.encode()),
            Err(ManifestError::Version(_))
        ));
    }

    #[test]
    fn key_lives_under_the_destination_prefix() {
        assert_eq!(
            manifest_key("shoot--p--a--1/", "old-bucket"),
            "shoot--p--a--1/.granary/migration-old-bucket.json.gz"
        );
        assert!(is_granary_key(".granary/entry.json"));
        assert!(!is_granary_key("etcd-main/.granary"));
    }
}

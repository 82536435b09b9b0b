//! Integrity records (docs/formats.md#integrity-record): the proof that a backup (or a
//! restore's files) in object storage is the one Granary wrote.
//!
//! Beside the files of every backup Granary writes one more object,
//! `backups/<name>/<name>-integrity.json`: the size and SHA-256 of every other object of
//! the backup and an HMAC-SHA-256 over a canonical encoding of them, made with a signing
//! key the bucket never sees. Whoever controls the bucket can change, delete or add
//! objects, or plant a whole backup, but cannot make a record that verifies, so every
//! read path (sync, restore, downloads, `granary backup verify`, the scrubber) can tell a
//! backup Granary wrote from one it did not.
//!
//! This module is pure: the record, its canonical encoding, the keyring, and the
//! decisions. Reading objects and Secrets is the caller's.
//!
//! The record binds the backup's name, its kind (backup or restore), and, for a backup a
//! namespace owner made, that owner's namespace (`tenant`): a record copied to another
//! name, or a namespace owner's backup presented as another namespace's, does not verify.

use std::collections::BTreeMap;
use std::fmt;
use std::io;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record format this code writes and reads.
pub const RECORD_VERSION: u32 = 1;
/// The first line of the canonical encoding: format and version.
const CANONICAL_HEADER: &str = "granary-integrity/1";
/// Keys shorter than this are refused: HMAC-SHA-256 wants at least its output size.
pub const MIN_KEY_BYTES: usize = 32;
/// A record larger than this is not one Granary wrote (a backup has a dozen files).
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

type HmacSha256 = Hmac<Sha256>;

/// What a record vouches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordKind {
    Backup,
    Restore,
}

impl RecordKind {
    fn as_str(self) -> &'static str {
        match self {
            RecordKind::Backup => "Backup",
            RecordKind::Restore => "Restore",
        }
    }
}

/// Size and SHA-256 (lower-case hex) of one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectDigest {
    pub size: u64,
    pub sha256: String,
}

impl ObjectDigest {
    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Self {
        let mut d = Digester::default();
        d.update(data);
        d.finish()
    }
}

/// Hashes bytes as they pass (a [`io::Write`] sink, or fed with [`Digester::update`]).
#[derive(Default, Clone)]
pub struct Digester {
    hasher: Sha256,
    size: u64,
}

impl Digester {
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.size += data.len() as u64;
    }
    pub fn finish(self) -> ObjectDigest {
        ObjectDigest {
            size: self.size,
            sha256: hex(&self.hasher.finalize()),
        }
    }
}

impl io::Write for Digester {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A writer that hashes what it passes on to `inner`.
pub struct DigestingWriter<W> {
    inner: W,
    digester: Digester,
}

impl<W: io::Write> DigestingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            digester: Digester::default(),
        }
    }
    /// The inner writer and the digest of everything written through.
    pub fn into_parts(self) -> (W, ObjectDigest) {
        (self.inner, self.digester.finish())
    }
}

impl<W: io::Write> io::Write for DigestingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.digester.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes what it reads from `inner`.
pub struct DigestingReader<R> {
    inner: R,
    digester: Digester,
}

impl<R: io::Read> DigestingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            digester: Digester::default(),
        }
    }
    /// The digest of the whole input: what was not read yet is read (and hashed) first.
    pub fn finish(mut self) -> io::Result<ObjectDigest> {
        io::copy(&mut self, &mut io::sink())?;
        Ok(self.digester.finish())
    }
}

impl<R: io::Read> io::Read for DigestingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digester.update(&buf[..n]);
        Ok(n)
    }
}

/// Lower-case hex. Thirty-two bytes at a time; not worth a crate.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The integrity record as stored (`<name>-integrity.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntegrityRecord {
    pub version: u32,
    pub kind: RecordKind,
    /// The backup's (or restore's) name.
    pub name: String,
    /// The namespace of the namespace owner the backup was made for (a NonAdminBackup's),
    /// absent for an administrator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Every other object of the backup's directory, by its name inside the directory.
    pub objects: BTreeMap<String, ObjectDigest>,
    /// Which key signed it.
    pub key_id: String,
    /// HMAC-SHA-256 of [`IntegrityRecord::canonical`] with that key, lower-case hex.
    pub signature: String,
}

/// Why a record cannot be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("object name {0:?} cannot be in an integrity record")]
    BadObjectName(String),
    #[error("the integrity record cannot be read: {0}")]
    Unreadable(String),
}

/// An object name a record may hold: one path part of printable ASCII without `/`, so
/// the canonical encoding stays one line per object.
fn valid_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 512
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\')
}

impl IntegrityRecord {
    /// The bytes the signature covers: a header line, then `kind`, `name`, `tenant`,
    /// `key` and one `object` line per object in name order, each `field=value`, object
    /// lines `object=<name> <size> <sha256>`. Names are checked to be one printable
    /// part, so no two records share an encoding.
    pub fn canonical(&self) -> Result<Vec<u8>, RecordError> {
        for name in self.objects.keys() {
            if !valid_object_name(name) {
                return Err(RecordError::BadObjectName(name.clone()));
            }
        }
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if !printable(&self.name)
            || !printable(&self.key_id)
            || !self.tenant.as_deref().is_none_or(printable)
        {
            return Err(RecordError::Unreadable(
                "name, tenant and key id must be printable ASCII".into(),
            ));
        }
        let mut out = String::new();
        out.push_str(CANONICAL_HEADER);
        out.push('\n');
        out.push_str(&format!("kind={}\n", self.kind.as_str()));
        out.push_str(&format!("name={}\n", self.name));
        out.push_str(&format!(
            "tenant={}\n",
            self.tenant.as_deref().unwrap_or("")
        ));
        out.push_str(&format!("key={}\n", self.key_id));
        for (name, d) in &self.objects {
            out.push_str(&format!("object={name} {} {}\n", d.size, d.sha256));
        }
        Ok(out.into_bytes())
    }

    /// Makes and signs the record of `objects` with the keyring's newest key.
    pub fn sign(
        kind: RecordKind,
        name: &str,
        tenant: Option<&str>,
        objects: BTreeMap<String, ObjectDigest>,
        keyring: &Keyring,
    ) -> Result<Self, SignError> {
        let (key_id, key) = keyring.newest().ok_or(SignError::NoKey)?;
        let mut record = IntegrityRecord {
            version: RECORD_VERSION,
            kind,
            name: name.to_owned(),
            tenant: tenant.map(str::to_owned),
            objects,
            key_id: key_id.to_owned(),
            signature: String::new(),
        };
        let mac = mac(key, &record.canonical()?);
        record.signature = hex(&mac);
        Ok(record)
    }

    /// The stored form (pretty JSON, one object per line, for people who look).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Reads a stored record; nothing in it is believed until [`verify_record`] says so.
    pub fn from_bytes(data: &[u8]) -> Result<Self, RecordError> {
        if data.len() > MAX_RECORD_BYTES {
            return Err(RecordError::Unreadable(format!(
                "{} bytes, more than the {MAX_RECORD_BYTES} a record may have",
                data.len()
            )));
        }
        serde_json::from_slice(data).map_err(|e| RecordError::Unreadable(e.to_string()))
    }
}

/// Why a record could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error("no integrity signing key is available yet")]
    NoKey,
    #[error("{0}")]
    Record(#[from] RecordError),
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// The signing keys of a trust domain: id → secret. The newest (highest `k<N>`) signs;
/// all verify. `Debug` never shows a key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    keys: BTreeMap<u64, Vec<u8>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring").field("ids", &self.ids()).finish()
    }
}

/// Why a Secret's data is not a keyring.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("key {0:?}: key ids are k1, k2, …")]
    BadId(String),
    #[error("key {id}: {len} bytes, a key has at least {MIN_KEY_BYTES}")]
    Short { id: String, len: usize },
}

fn parse_id(id: &str) -> Option<u64> {
    let n = id.strip_prefix('k')?;
    if n.starts_with('0') || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok().filter(|n| *n > 0)
}

fn format_id(n: u64) -> String {
    format!("k{n}")
}

impl Keyring {
    /// The keyring of a Secret's `data` (id → key bytes).
    pub fn from_data<'a, I>(data: I) -> Result<Self, KeyringError>
    where
        I: IntoIterator<Item = (&'a String, &'a Vec<u8>)>,
    {
        let mut keys = BTreeMap::new();
        for (id, key) in data {
            let n = parse_id(id).ok_or_else(|| KeyringError::BadId(id.clone()))?;
            if key.len() < MIN_KEY_BYTES {
                return Err(KeyringError::Short {
                    id: id.clone(),
                    len: key.len(),
                });
            }
            keys.insert(n, key.clone());
        }
        Ok(Self { keys })
    }

    /// The Secret data of this keyring.
    pub fn to_data(&self) -> BTreeMap<String, Vec<u8>> {
        self.keys
            .iter()
            .map(|(n, k)| (format_id(*n), k.clone()))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key ids, oldest first.
    pub fn ids(&self) -> Vec<String> {
        self.keys.keys().map(|n| format_id(*n)).collect()
    }

    /// The key that signs: the newest.
    pub fn newest(&self) -> Option<(String, &[u8])> {
        self.keys
            .iter()
            .next_back()
            .map(|(n, k)| (format_id(*n), k.as_slice()))
    }

    fn get(&self, id: &str) -> Option<&[u8]> {
        self.keys.get(&parse_id(id)?).map(Vec::as_slice)
    }

    /// This keyring with `key` added as the newest (rotation). Returns the new id.
    pub fn with_new_key(&self, key: Vec<u8>) -> Result<(Self, String), KeyringError> {
        let n = self.keys.keys().next_back().map_or(1, |n| n + 1);
        let id = format_id(n);
        if key.len() < MIN_KEY_BYTES {
            return Err(KeyringError::Short { id, len: key.len() });
        }
        let mut keys = self.keys.clone();
        keys.insert(n, key);
        Ok((Self { keys }, id))
    }

    /// This keyring without key `id`; `None` when it has no such key.
    pub fn without(&self, id: &str) -> Option<Self> {
        let n = parse_id(id)?;
        let mut keys = self.keys.clone();
        keys.remove(&n)?;
        Some(Self { keys })
    }
}

/// The result of checking one backup, as the `granary.gardener.cloud/integrity`
/// annotation spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Signed by a key of the keyring, and every object is the one recorded.
    Verified { key_id: String },
    /// No integrity record: Velero's own backup, or one older Granary wrote.
    Unsigned,
    /// Signed with a key the keyring does not hold (removed, or another domain's).
    UnknownKey { key_id: String },
    /// The record or an object is not what was signed; the first difference, said for a
    /// person.
    Mismatch { reason: String },
}

impl Verdict {
    /// The annotation value: `verified`, `unsigned`, `unknown-key` or `mismatch`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Verified { .. } => "verified",
            Verdict::Unsigned => "unsigned",
            Verdict::UnknownKey { .. } => "unknown-key",
            Verdict::Mismatch { .. } => "mismatch",
        }
    }

    pub fn is_verified(&self) -> bool {
        matches!(self, Verdict::Verified { .. })
    }

    /// One line for a person: the verdict and why.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Verified { key_id } => format!("verified (key {key_id})"),
            Verdict::Unsigned => "unsigned: the backup has no integrity record (written by \
                                  Velero or an older Granary)"
                .to_owned(),
            Verdict::UnknownKey { key_id } => format!(
                "unknown-key: signed with key {key_id:?}, which this server does not hold \
                 (removed by a rotation, or another landscape's)"
            ),
            Verdict::Mismatch { reason } => format!("mismatch: {reason}"),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

fn mismatch(reason: impl Into<String>) -> Verdict {
    Verdict::Mismatch {
        reason: reason.into(),
    }
}

/// What a record must say to be the one of the backup being read.
#[derive(Clone, Copy, Debug)]
pub struct Expected<'a> {
    pub kind: RecordKind,
    pub name: &'a str,
    /// `Some(ns)` when read for namespace owner `ns` (a location made for their
    /// NonAdminBackupStorageLocation, or a NonAdminRestore): the record must name that
    /// namespace. `None`: any (an administrator reads every backup).
    pub tenant: Option<&'a str>,
}

/// Checks a stored record's signature and what it is bound to. `Ok` is the record, whose
/// object digests may now be believed; `Err` is the verdict (never `Verified`).
pub fn verify_record(
    data: &[u8],
    keyring: &Keyring,
    expected: Expected<'_>,
) -> Result<IntegrityRecord, Verdict> {
    let record = IntegrityRecord::from_bytes(data).map_err(|e| mismatch(e.to_string()))?;
    if record.version != RECORD_VERSION {
        return Err(mismatch(format!(
            "the integrity record has version {}, this Granary reads {RECORD_VERSION}",
            record.version
        )));
    }
    let Some(key) = keyring.get(&record.key_id) else {
        return Err(Verdict::UnknownKey {
            key_id: record.key_id.clone(),
        });
    };
    let canonical = record.canonical().map_err(|e| mismatch(e.to_string()))?;
    let given = unhex(&record.signature).unwrap_or_default();
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
    m.update(&canonical);
    // `verify_slice` compares in constant time.
    if m.verify_slice(&given).is_err() {
        return Err(mismatch(
            "the integrity record's signature does not match its contents (the record was \
             changed, or not written by this landscape)",
        ));
    }
    if record.kind != expected.kind || record.name != expected.name {
        return Err(mismatch(format!(
            "the integrity record is the one of {} {:?}, not of {} {:?} (copied from \
             elsewhere)",
            record.kind.as_str(),
            record.name,
            expected.kind.as_str(),
            expected.name
        )));
    }
    if let Some(tenant) = expected.tenant
        && record.tenant.as_deref() != Some(tenant)
    {
        return Err(mismatch(format!(
            "the backup was not made for namespace {tenant} (its integrity record names {})",
            record
                .tenant
                .as_deref()
                .map_or("an administrator".to_owned(), |t| format!("namespace {t}"))
        )));
    }
    Ok(record)
}

impl IntegrityRecord {
    /// Checks the objects found in the directory (name → size, the record itself left
    /// out) against the record: every recorded object present with its size, nothing
    /// else there. The first difference is the reason.
    pub fn check_listing(&self, found: &BTreeMap<String, u64>) -> Result<(), Verdict> {
        for (name, d) in &self.objects {
            match found.get(name) {
                None => return Err(mismatch(format!("{name} is missing"))),
                Some(size) if *size != d.size => {
                    return Err(mismatch(format!(
                        "{name} has {size} bytes, {} were written",
                        d.size
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = found.keys().find(|n| !self.objects.contains_key(*n)) {
            return Err(mismatch(format!(
                "{extra} is not part of the backup as written (an object was added)"
            )));
        }
        Ok(())
    }

    /// Checks one object's digest against the record.
    pub fn check_object(&self, name: &str, digest: &ObjectDigest) -> Result<(), Verdict> {
        match self.objects.get(name) {
            None => Err(mismatch(format!(
                "{name} is not part of the backup as written (an object was added)"
            ))),
            Some(d) if d.size != digest.size => Err(mismatch(format!(
                "{name} has {} bytes, {} were written",
                digest.size, d.size
            ))),
            Some(d) if d.sha256 != digest.sha256 => Err(mismatch(format!(
                "{name} differs from what was written (SHA-256 {}, recorded {})",
                digest.sha256, d.sha256
            ))),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;

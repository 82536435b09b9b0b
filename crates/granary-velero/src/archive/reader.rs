//! Streaming, hostile-archive-safe reading of a Velero tarball.
//!
//! Tar extension headers are handled here rather than by the `tar` crate, because the
//! crate reads GNU long names and PAX headers into memory without a bound. Everything the
//! stream decompresses to is counted, so a compression bomb stops at
//! [`ArchiveLimits::max_total_bytes`] whatever its tar structure. What is kept from one
//! entry to the next (a 32-byte fingerprint per path for the duplicate check, pending
//! extension headers) is charged to a [`RetainedBudget`].

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{self, Read};
use std::rc::Rc;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tar::EntryType;

use super::budget::{PER_ITEM_OVERHEAD, RetainedBudget};
use super::error::ArchiveError;
use super::limits::ArchiveLimits;
use super::path::{ItemPath, Scope, VersionDir, normalize_entry_path};
use super::{RESOURCES_DIR, VERSION_PATH};
use crate::resource::GroupResource;

/// One accepted entry, in archive order.
#[derive(Debug)]
pub enum ArchiveEntry<'a> {
    /// `metadata/version`, with its raw contents.
    Version { contents: &'a [u8] },
    /// An item file, parsed.
    Item(ItemEntry<'a>),
    /// A directory entry (Velero writes none, other tools do); nothing to read.
    Directory { path: &'a str },
    /// A regular file that is neither the version file nor an item path.
    Other { path: &'a str, bytes: &'a [u8] },
}

/// An item file: where it sits, its raw bytes and the parsed object.
#[derive(Debug)]
pub struct ItemEntry<'a> {
    /// The normalised entry path.
    pub entry_path: &'a str,
    pub path: &'a ItemPath,
    pub bytes: &'a [u8],
    pub object: &'a Value,
}

/// Item files up to this size are kept until the next entry, whose parse they save when
/// it is the same bytes (an object and its preferred-version copy).
const REUSED_ITEM_BYTES: usize = 256 << 10;

/// Counts of what [`read_archive`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArchiveStats {
    /// Entries yielded (files and directories; extension headers not counted).
    pub entries: u64,
    /// Bytes the gzip stream decompressed to.
    pub uncompressed_bytes: u64,
}

/// Reads a gzip-compressed tar stream, checking every entry against `limits` and
/// handing each accepted one to `visit` before reading the next. Any refusal ends the
/// read with that error; `visit` may end it with its own.
pub fn read_archive<R, F>(
    input: R,
    limits: &ArchiveLimits,
    visit: F,
) -> Result<ArchiveStats, ArchiveError>
where
    R: Read + Send,
    F: FnMut(ArchiveEntry<'_>) -> Result<(), ArchiveError>,
{
    read_archive_within(input, limits, &RetainedBudget::for_limits(limits), visit)
}

/// [`read_archive`] charging what the reader keeps to `budget`, which `visit` charges
/// what it collects to as well, so that both together stay within one total.
pub fn read_archive_within<R, F>(
    input: R,
    limits: &ArchiveLimits,
    budget: &RetainedBudget,
    mut visit: F,
) -> Result<ArchiveStats, ArchiveError>
where
    R: Read + Send,
    F: FnMut(ArchiveEntry<'_>) -> Result<(), ArchiveError>,
{
    super::gzip::with_inflated(input, |inflated| {
        let tripped = Rc::new(Cell::new(false));
        let counted = Rc::new(Cell::new(0u64));
        let bounded = BoundedReader {
            inner: inflated,
            limit: limits.max_total_bytes,
            read: Rc::clone(&counted),
            tripped: Rc::clone(&tripped),
        };
        let mut archive = tar::Archive::new(bounded);
        let mut held = Held {
            budget,
            long_name: None,
            pax_path: None,
        };
        let result = read_entries(&mut archive, limits, &mut held, &mut visit);
        held.clear();
        let result = result.map_err(|e| {
            if tripped.get() {
                ArchiveError::TotalSizeExceeded {
                    limit: limits.max_total_bytes,
                }
            } else {
                e
            }
        });
        result.map(|entries| ArchiveStats {
            entries,
            uncompressed_bytes: counted.get(),
        })
    })
}

/// Extension-header paths waiting for their entry, charged to the budget while held.
struct Held<'b> {
    budget: &'b RetainedBudget,
    long_name: Option<Vec<u8>>,
    pax_path: Option<Vec<u8>>,
}

impl Held<'_> {
    fn set(&mut self, pax: bool, value: Vec<u8>) -> Result<(), ArchiveError> {
        self.budget.charge(value.len() as u64)?;
        let slot = if pax {
            &mut self.pax_path
        } else {
            &mut self.long_name
        };
        if let Some(old) = slot.replace(value) {
            self.budget.release(old.len() as u64);
        }
        Ok(())
    }

    fn take(&mut self, pax: bool) -> Option<Vec<u8>> {
        let taken = if pax {
            self.pax_path.take()
        } else {
            self.long_name.take()
        };
        if let Some(v) = &taken {
            self.budget.release(v.len() as u64);
        }
        taken
    }

    fn pending(&self) -> bool {
        self.long_name.is_some() || self.pax_path.is_some()
    }

    fn clear(&mut self) {
        self.take(false);
        self.take(true);
    }
}

fn read_entries<R, F>(
    archive: &mut tar::Archive<R>,
    limits: &ArchiveLimits,
    held: &mut Held<'_>,
    visit: &mut F,
) -> Result<u64, ArchiveError>
where
    R: Read,
    F: FnMut(ArchiveEntry<'_>) -> Result<(), ArchiveError>,
{
    let budget = held.budget;
    let mut entries = archive.entries().map_err(io_or_corrupt)?.raw(true);
    // Fingerprints, not paths: 16 bytes per entry whatever the path's length (the first
    // half of SHA-256: finding two paths with the same one takes about 2^64 hashes, out
    // of an attacker's reach). With two entries per item, this set is the largest thing
    // a million-item read holds: at 32 bytes it was 138 MB, twice that while it grew.
    let mut seen: HashSet<[u8; 16]> = HashSet::new();
    let mut pax_size: Option<u64> = None;
    let mut count: u64 = 0;
    let mut raw_headers: u64 = 0;
    let mut body = Vec::new();
    // The last item file read, when small, for its copy (see below); and a buffer.
    let mut last_item: Option<(Vec<u8>, Value)> = None;
    let mut spare = Vec::new();

    for entry in &mut entries {
        let mut entry = entry.map_err(io_or_corrupt)?;
        raw_headers += 1;
        // Extension headers count too, or a stream of them would never end.
        if raw_headers > limits.max_entries.saturating_mul(3).saturating_add(3) {
            return Err(ArchiveError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let header_size = entry.header().entry_size().map_err(io_or_corrupt)?;
        let kind = entry.header().entry_type();

        match kind {
            EntryType::GNULongName => {
                let name = read_extension(&mut entry, header_size, limits)?;
                held.set(false, name)?;
                continue;
            }
            EntryType::XHeader => {
                let data = read_extension(&mut entry, header_size, limits)?;
                held.take(true);
                pax_size = None;
                for ext in tar::PaxExtensions::new(&data) {
                    let ext = ext.map_err(io_or_corrupt)?;
                    match ext.key_bytes() {
                        b"path" => held.set(true, ext.value_bytes().to_vec())?,
                        b"size" => {
                            let declared = std::str::from_utf8(ext.value_bytes())
                                .ok()
                                .and_then(|s| s.parse::<u64>().ok())
                                .ok_or_else(|| {
                                    ArchiveError::Corrupt("malformed PAX size".into())
                                })?;
                            pax_size = Some(declared);
                        }
                        b"linkpath" => {
                            return Err(ArchiveError::UnsupportedEntryType {
                                path: lossy(held.pax_path.as_deref().unwrap_or_default()),
                                kind: "link",
                            });
                        }
                        _ => {}
                    }
                }
                continue;
            }
            EntryType::XGlobalHeader => {
                // Global defaults (Go never writes them); read within bounds, ignore.
                read_extension(&mut entry, header_size, limits)?;
                continue;
            }
            _ => {}
        }

        // A PAX size that disagrees with the header would make parsers disagree on where
        // the next entry starts (the archive would look different to Velero): refuse it.
        if let Some(declared) = pax_size.take()
            && declared != header_size
        {
            return Err(ArchiveError::Corrupt(format!(
                "PAX size {declared} disagrees with the header size {header_size}"
            )));
        }
        let raw_path: Vec<u8> = match (held.take(false), held.take(true)) {
            (_, Some(p)) => p,
            (Some(p), None) => strip_nul(p),
            (None, None) => entry.header().path_bytes().into_owned(),
        };
        if raw_path.len() as u64 > limits.max_path_bytes {
            return Err(ArchiveError::PathTooLong {
                len: raw_path.len() as u64,
                limit: limits.max_path_bytes,
            });
        }
        let path = normalize_entry_path(&raw_path)?;
        count += 1;
        if count > limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                limit: limits.max_entries,
            });
        }

        match kind {
            EntryType::Regular | EntryType::Continuous => {}
            EntryType::Directory => {
                if header_size != 0 {
                    return Err(ArchiveError::Corrupt(format!(
                        "directory {path:?} has data"
                    )));
                }
                visit(ArchiveEntry::Directory { path: &path })?;
                continue;
            }
            other => {
                return Err(ArchiveError::UnsupportedEntryType {
                    path,
                    kind: entry_kind_name(other),
                });
            }
        }
        if header_size > limits.max_entry_bytes {
            return Err(ArchiveError::EntryTooLarge {
                path,
                size: header_size,
                limit: limits.max_entry_bytes,
            });
        }
        let digest = Sha256::digest(path.as_bytes());
        let mut fingerprint = [0u8; 16];
        fingerprint.copy_from_slice(&digest[..16]);
        if !seen.insert(fingerprint) {
            return Err(ArchiveError::DuplicateEntry { path });
        }
        budget.charge(16 + PER_ITEM_OVERHEAD)?;

        if path == VERSION_PATH {
            read_body(&mut entry, header_size, &mut body)?;
            visit(ArchiveEntry::Version { contents: &body })?;
        } else if let Some(item_path) = ItemPath::parse(&path) {
            read_body(&mut entry, header_size, &mut body)?;
            // An object's preferred-version copy follows it with the same bytes: the
            // object parsed for the one serves the other.
            let reused = last_item.take().and_then(|(bytes, object)| {
                let same = bytes == body;
                spare = bytes;
                same.then_some(object)
            });
            let parsed = match reused {
                Some(object) => Ok(object),
                None => serde_json::from_slice::<Value>(&body),
            };
            let object = parsed.map_err(|e| ArchiveError::InvalidItem {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            if !object.is_object() {
                return Err(ArchiveError::InvalidItem {
                    path,
                    reason: "not a JSON object".into(),
                });
            }
            visit(ArchiveEntry::Item(ItemEntry {
                entry_path: &path,
                path: &item_path,
                bytes: &body,
                object: &object,
            }))?;
            if body.len() <= REUSED_ITEM_BYTES {
                let mut bytes = std::mem::take(&mut spare);
                bytes.clear();
                bytes.extend_from_slice(&body);
                last_item = Some((bytes, object));
            }
        } else {
            read_body(&mut entry, header_size, &mut body)?;
            visit(ArchiveEntry::Other {
                path: &path,
                bytes: &body,
            })?;
        }
    }
    if held.pending() {
        return Err(ArchiveError::Corrupt(
            "extension header without a following entry".into(),
        ));
    }
    Ok(count)
}

fn read_extension<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    size: u64,
    limits: &ArchiveLimits,
) -> Result<Vec<u8>, ArchiveError> {
    // Extension records hold paths plus a few short fields.
    let limit = limits.max_path_bytes.saturating_add(1024);
    if size > limit {
        return Err(ArchiveError::PathTooLong { len: size, limit });
    }
    let mut data = Vec::new();
    read_body(entry, size, &mut data)?;
    Ok(data)
}

fn read_body<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    size: u64,
    buf: &mut Vec<u8>,
) -> Result<(), ArchiveError> {
    buf.clear();
    // `size` was checked against the per-entry limit, so reserving it is bounded.
    buf.reserve(usize::try_from(size).unwrap_or(0));
    entry.read_to_end(buf).map_err(io_or_corrupt)?;
    if buf.len() as u64 != size {
        return Err(ArchiveError::Corrupt("archive ends inside an entry".into()));
    }
    Ok(())
}

fn strip_nul(mut p: Vec<u8>) -> Vec<u8> {
    while p.last() == Some(&0) {
        p.pop();
    }
    p
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn entry_kind_name(t: EntryType) -> &'static str {
    match t {
        EntryType::Symlink => "symlink",
        EntryType::Link => "hard link",
        EntryType::Char => "character device",
        EntryType::Block => "block device",
        EntryType::Fifo => "FIFO",
        EntryType::GNUSparse => "GNU sparse file",
        EntryType::GNULongLink => "link",
        _ => "entry of an unsupported type",
    }
}

/// Errors from the tar layer: the decompressor's I/O errors stay I/O errors unless the
/// data itself is bad (gzip or tar format), which is corruption.
fn io_or_corrupt(e: io::Error) -> ArchiveError {
    match e.kind() {
        io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData | io::ErrorKind::Other => {
            ArchiveError::corrupt(e)
        }
        io::ErrorKind::UnexpectedEof => ArchiveError::Corrupt("archive is truncated".into()),
        _ => ArchiveError::Io(e),
    }
}

/// Counts decompressed bytes and fails once they pass the limit.
struct BoundedReader<R> {
    inner: R,
    limit: u64,
    read: Rc<Cell<u64>>,
    tripped: Rc<Cell<bool>>,
}

impl<R: Read> Read for BoundedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let so_far = self.read.get();
        if so_far >= self.limit {
            // Probe one byte so an archive of exactly `limit` bytes is accepted.
            let mut probe = [0u8; 1];
            let n = self.inner.read(&mut probe)?;
            if n == 0 {
                return Ok(0);
            }
            self.tripped.set(true);
            return Err(io::Error::other("uncompressed size limit exceeded"));
        }
        let allowed = usize::try_from(self.limit - so_far).unwrap_or(usize::MAX);
        let want = buf.len().min(allowed);
        let n = self.inner.read(&mut buf[..want])?;
        self.read.set(so_far + n as u64);
        Ok(n)
    }
}

/// The items of an archive as Velero's parser sees them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedArchive {
    /// Contents of `metadata/version`, if present.
    pub format_version: Option<String>,
    /// Whether `metadata/version` was the first file.
    pub version_first: bool,
    /// Every item file, by path.
    pub items: BTreeMap<ItemPath, Value>,
    /// Files that are neither the version file nor item paths.
    pub other_files: Vec<String>,
    pub stats: ArchiveStats,
}

/// Versions found for one group resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceGroupVersions {
    /// From the `<v>-preferredversion` directory, if any.
    pub preferred: Option<String>,
    /// Every version directory (preferred included), sorted.
    pub versions: BTreeSet<String>,
}

impl ParsedArchive {
    /// The unversioned items (what a restore reads without `EnableAPIGroupVersions`).
    pub fn unversioned(&self) -> impl Iterator<Item = (&ItemPath, &Value)> + '_ {
        self.items
            .iter()
            .filter(|(p, _)| p.version_dir == VersionDir::Unversioned)
    }

    /// The group resources present under `resources/`.
    pub fn group_resources(&self) -> BTreeSet<&GroupResource> {
        self.items.keys().map(|p| &p.group_resource).collect()
    }

    /// Velero's `ParseGroupVersions` for one group resource.
    pub fn group_versions(&self, gr: &GroupResource) -> ResourceGroupVersions {
        let mut out = ResourceGroupVersions::default();
        for p in self.items.keys().filter(|p| &p.group_resource == gr) {
            match &p.version_dir {
                VersionDir::Unversioned => {}
                VersionDir::Preferred(v) => {
                    out.preferred = Some(v.clone());
                    out.versions.insert(v.clone());
                }
                VersionDir::Version(v) => {
                    out.versions.insert(v.clone());
                }
            }
        }
        out
    }

    /// The object at an unversioned path.
    pub fn get(&self, gr: &GroupResource, scope: &Scope, name: &str) -> Option<&Value> {
        self.items.get(&ItemPath {
            group_resource: gr.clone(),
            version_dir: VersionDir::Unversioned,
            scope: scope.clone(),
            name: name.to_owned(),
        })
    }

    /// Whether the archive has a `resources/` directory at all (Velero's parser returns
    /// "not exist" otherwise and the restore warns of zero items).
    pub fn has_resources(&self) -> bool {
        !self.items.is_empty()
            || self
                .other_files
                .iter()
                .any(|p| p.starts_with(&format!("{RESOURCES_DIR}/")))
    }
}

/// Reads a whole archive into memory as Velero's parser would see it. For archives of
/// bounded size (tests, inspection); controllers stream with [`read_archive`]. The items
/// kept count against [`ArchiveLimits::max_retained_bytes`] (a parsed object at twice
/// its JSON text, an estimate).
pub fn parse_archive<R: Read + Send>(
    input: R,
    limits: &ArchiveLimits,
) -> Result<ParsedArchive, ArchiveError> {
    let budget = RetainedBudget::for_limits(limits);
    let mut parsed = ParsedArchive::default();
    let mut first = true;
    let stats = read_archive_within(input, limits, &budget, |entry| {
        match entry {
            ArchiveEntry::Version { contents } => {
                budget.charge(contents.len() as u64)?;
                parsed.version_first = first;
                parsed.format_version = Some(String::from_utf8_lossy(contents).into_owned());
            }
            ArchiveEntry::Item(item) => {
                budget.charge(
                    item.entry_path.len() as u64 + 2 * item.bytes.len() as u64 + PER_ITEM_OVERHEAD,
                )?;
                parsed.items.insert(item.path.clone(), item.object.clone());
            }
            ArchiveEntry::Directory { .. } => return Ok(()),
            ArchiveEntry::Other { path, .. } => {
                budget.charge(path.len() as u64 + PER_ITEM_OVERHEAD)?;
                parsed.other_files.push(path.to_owned());
            }
        }
        first = false;
        Ok(())
    })?;
    parsed.stats = stats;
    Ok(parsed)
}

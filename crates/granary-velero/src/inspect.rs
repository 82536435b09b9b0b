//! `inspect` and `verify`: what an admin reaches for when a restore surprises them
//! (`granary archive inspect|verify FILE`). Both stream the tarball once with the safe
//! reader, so they work on any size and refuse hostile archives; both accept Velero's own
//! tarballs. A `manifest.json.gz` next to the tarball (as in a downloaded
//! `backups/<name>/` directory) is read and compared with the one rebuilt from the
//! tarball.
//!
//! What a pass keeps (the manifest, per-resource counts, copies' digests) is charged to
//! the reader's [`RetainedBudget`], and so is a stored manifest compared with it, so
//! memory is bounded by [`ArchiveLimits::max_retained_bytes`] whatever the archive and
//! its manifest hold; problems and notes are listed up to [`MAX_LISTED`] each and the
//! rest counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use serde_json::Value;

use super::archive::{
    ArchiveEntry, ArchiveError, ArchiveLimits, FORMAT_VERSION, ItemEntry, ItemPath,
    PER_ITEM_OVERHEAD, RetainedBudget, Scope, VERSION_FILE_CONTENTS, VersionDir,
    read_archive_within,
};
use super::manifest::{ItemDigests, Manifest, ManifestItem, item_from_object};
use super::resource::GroupResource;

/// File name of the stored manifest beside a tarball.
pub const MANIFEST_FILE_NAME: &str = "manifest.json.gz";
/// Most problems, and most notes, a report lists; the others are counted.
pub const MAX_LISTED: usize = 100;

/// What a tarball holds.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// Contents of `metadata/version` without the newline.
    pub format_version: Option<String>,
    pub entries: u64,
    pub uncompressed_bytes: u64,
    /// Objects (unversioned item files).
    pub items: usize,
    /// Per group resource (`deployments.apps`).
    pub resources: BTreeMap<String, ResourceSummary>,
    pub manifest: ManifestSummary,
}

/// Items of one group resource.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResourceSummary {
    pub preferred_version: Option<String>,
    /// Version directories present (preferred included).
    pub versions: BTreeSet<String>,
    pub cluster: usize,
    /// Items per namespace.
    pub namespaces: BTreeMap<String, usize>,
}

/// Where the manifest shown came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ManifestSource {
    /// `manifest.json.gz` beside the tarball.
    Stored,
    /// Rebuilt from the tarball (the backup carries none, e.g. one written by Velero).
    RebuiltFromTarball,
}

#[derive(Debug, Clone, Serialize)]
pub struct ManifestSummary {
    pub source: ManifestSource,
    /// For a stored manifest: whether it equals the one rebuilt from the tarball.
    pub matches_tarball: Option<bool>,
    pub items: usize,
    pub items_with_owners: usize,
    /// Owner references to objects not in the backup.
    pub missing_owner_refs: usize,
    /// Ownership cycles the dependency order had to break.
    pub broken_cycles: usize,
    pub content: Manifest,
}

/// Inspects the tarball at `path` with default limits.
pub fn inspect(path: &Path) -> Result<Inspection, ArchiveError> {
    inspect_with(path, &ArchiveLimits::default())
}

/// Inspects the tarball at `path` within `limits`.
pub fn inspect_with(path: &Path, limits: &ArchiveLimits) -> Result<Inspection, ArchiveError> {
    let stored = read_sibling_manifest(path, limits)?;
    inspect_reader(BufReader::new(File::open(path)?), stored, limits)
}

/// Inspects a tarball stream; `stored` is its stored manifest, if any.
pub fn inspect_reader<R: Read + Send>(
    input: R,
    stored: Option<Manifest>,
    limits: &ArchiveLimits,
) -> Result<Inspection, ArchiveError> {
    let budget = RetainedBudget::for_limits(limits);
    if let Some(m) = &stored {
        budget.charge(m.heap_bytes())?;
    }
    let mut scan = Scan::new(&budget, false, false);
    let stats = read_archive_within(input, limits, &budget, |e| scan.entry(e))?;
    let rebuilt = scan.manifest;
    let (source, matches_tarball, content) = match stored {
        Some(m) => {
            let same = m == rebuilt;
            (ManifestSource::Stored, Some(same), m)
        }
        None => (ManifestSource::RebuiltFromTarball, None, rebuilt),
    };
    let order = content.dependency_order();
    let manifest = ManifestSummary {
        source,
        matches_tarball,
        items: content.len(),
        items_with_owners: content.iter().filter(|i| !i.meta.owners.is_empty()).count(),
        missing_owner_refs: content
            .keys()
            .map(|k| content.missing_owners(k).len())
            .sum(),
        broken_cycles: order.broken_cycles.len(),
        content: content.clone(),
    };
    Ok(Inspection {
        format_version: scan.version.map(|v| v.trim_end_matches('\n').to_owned()),
        entries: stats.entries,
        uncompressed_bytes: stats.uncompressed_bytes,
        items: scan
            .resources
            .values()
            .map(|r| r.cluster + r.namespaces.values().sum::<usize>())
            .sum(),
        resources: scan.resources,
        manifest,
    })
}

/// The outcome of [`verify`]: the archive was read safely; `problems` lists format
/// violations (empty = valid), `notes` things worth knowing that are not violations.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub format_version: Option<String>,
    pub entries: u64,
    pub items: usize,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the tarball at `path`: safety (any refusal is the `Err`) and format (the
/// report's `problems`).
pub fn verify(path: &Path) -> Result<VerifyReport, ArchiveError> {
    verify_with(path, &ArchiveLimits::default())
}

/// [`verify`] within `limits`.
pub fn verify_with(path: &Path, limits: &ArchiveLimits) -> Result<VerifyReport, ArchiveError> {
    let stored = read_sibling_digests(path, limits)?;
    verify_reader(BufReader::new(File::open(path)?), stored, limits)
}

/// Verifies a tarball stream; `stored` is its stored manifest's fingerprints, if any.
pub fn verify_reader<R: Read + Send>(
    input: R,
    stored: Option<ItemDigests>,
    limits: &ArchiveLimits,
) -> Result<VerifyReport, ArchiveError> {
    verify_reader_with(input, stored, limits, |_| Ok(()))
}

/// [`verify_reader`] handing each item file to `visit` as well, in archive order, so a
/// reader of the items (a restore) verifies the archive in the same pass. What `visit`
/// keeps is its own to bound; an error from it ends the read.
pub fn verify_reader_with<R, F>(
    input: R,
    stored: Option<ItemDigests>,
    limits: &ArchiveLimits,
    visit: F,
) -> Result<VerifyReport, ArchiveError>
where
    R: Read + Send,
    F: FnMut(&ItemEntry<'_>) -> Result<(), ArchiveError>,
{
    verify_reader_within(
        input,
        stored,
        limits,
        &RetainedBudget::for_limits(limits),
        visit,
    )
}

/// [`verify_reader_with`] charging what the pass keeps to `budget`, which `visit` charges
/// what it keeps to as well (a restore's per-item heads), so that both together stay
/// within one total.
pub fn verify_reader_within<R, F>(
    input: R,
    stored: Option<ItemDigests>,
    limits: &ArchiveLimits,
    budget: &RetainedBudget,
    visit: F,
) -> Result<VerifyReport, ArchiveError>
where
    R: Read + Send,
    F: FnMut(&ItemEntry<'_>) -> Result<(), ArchiveError>,
{
    let fingerprints = stored.is_some();
    verify_scan(input, stored.as_ref(), fingerprints, limits, budget, visit)
        .map(|(report, _)| report)
}

/// [`verify_reader`] without a stored manifest, also returning the fingerprints of the
/// manifest rebuilt from the tarball: for a caller that reads the stored one meanwhile
/// and compares them with [`manifest_mismatch`].
pub fn verify_reader_rebuilt<R: Read + Send>(
    input: R,
    limits: &ArchiveLimits,
) -> Result<(VerifyReport, ItemDigests), ArchiveError> {
    let budget = RetainedBudget::for_limits(limits);
    verify_scan(input, None, true, limits, &budget, |_| Ok(()))
}

/// The problem when a stored manifest does not hold what the tarball holds.
pub fn manifest_mismatch(stored: &ItemDigests, rebuilt: &ItemDigests) -> Option<String> {
    (stored != rebuilt).then(|| {
        format!(
            "{MANIFEST_FILE_NAME} ({} items) does not match the tarball ({} items)",
            stored.len(),
            rebuilt.len()
        )
    })
}

/// `fingerprints`: whether to keep the rebuilt manifest's fingerprints (32 bytes and a
/// SHA-256 per item), needed only to compare with a stored manifest.
fn verify_scan<R, F>(
    input: R,
    stored: Option<&ItemDigests>,
    fingerprints: bool,
    limits: &ArchiveLimits,
    budget: &RetainedBudget,
    mut visit: F,
) -> Result<(VerifyReport, ItemDigests), ArchiveError>
where
    R: Read + Send,
    F: FnMut(&ItemEntry<'_>) -> Result<(), ArchiveError>,
{
    if let Some(m) = stored {
        budget.charge(m.heap_bytes())?;
    }
    let mut scan = Scan::new(budget, true, fingerprints);
    let stats = read_archive_within(input, limits, budget, |e| {
        if let ArchiveEntry::Item(item) = &e {
            visit(item)?;
        }
        scan.entry(e)
    })?;
    let mut problems = std::mem::take(&mut scan.problems);
    let mut notes = std::mem::take(&mut scan.notes);
    match scan.version.as_deref() {
        None => problems.push_always("metadata/version is missing".into()),
        Some(v) if v.as_bytes() != VERSION_FILE_CONTENTS => problems.push_always(format!(
            "metadata/version is {v:?}, expected {FORMAT_VERSION:?} followed by a newline"
        )),
        Some(_) => {}
    }
    std::mem::take(&mut scan.copies).finish(budget, &mut problems, &mut notes)?;
    for (gr, preferred) in &scan.preferred_versions {
        if preferred.len() > 1 {
            problems.push(format!(
                "resources/{gr} has {} preferred-version directories: {preferred:?}",
                preferred.len()
            ));
        }
    }
    if scan.resources.is_empty() {
        notes.push_always("no items under resources/: a restore would find zero items".into());
    }
    let rebuilt: ItemDigests = std::mem::take(&mut scan.digests).into_iter().collect();
    if let Some(problem) = stored.and_then(|stored| manifest_mismatch(stored, &rebuilt)) {
        problems.push_always(problem);
    }
    let report = VerifyReport {
        format_version: scan.version.map(|v| v.trim_end_matches('\n').to_owned()),
        entries: stats.entries,
        items: scan.objects,
        problems: problems.into_list("problems"),
        notes: notes.into_list("notes"),
    };
    Ok((report, rebuilt))
}

/// The item an item file holds, when it is what its path says: its `apiVersion` in the
/// path's group, its `metadata.namespace` the path's namespace (none under `cluster/`),
/// its `metadata.name` the path's name, and, in a version directory, its version that
/// directory's. Velero derives every path from the object it writes, so a contradiction
/// is a damaged or planted file; the error says which field contradicts the path. (The
/// kind is checked against discovery by a restore: the archive alone cannot tell which
/// kind a resource serves.)
pub fn check_item_path(path: &ItemPath, object: &Value) -> Result<ManifestItem, String> {
    let d = item_from_object(&path.group_resource, object).map_err(|e| e.to_string())?;
    if d.namespace != path.scope.namespace() || d.name != path.name {
        return Err(format!(
            "object is {:?}/{:?}, not what its path says",
            d.namespace, d.name
        ));
    }
    if let Some(v) = path.version_dir.version()
        && d.version != v
    {
        return Err(format!(
            "object has version {:?}, its directory says {v:?}",
            d.version
        ));
    }
    Ok(d)
}

/// The fingerprints of the stored manifest beside `tarball` (see [`ItemDigests`]); its
/// JSON text and parsed items are held while they are taken.
fn read_sibling_digests(
    tarball: &Path,
    limits: &ArchiveLimits,
) -> Result<Option<ItemDigests>, ArchiveError> {
    match open_sibling_manifest(tarball)? {
        Some(f) => Ok(Some(ItemDigests::read_gz(
            f,
            limits.max_retained_bytes / 4,
        )?)),
        None => Ok(None),
    }
}

/// The suffix the `local` object store gives every object's file
/// (`backups/b/b.tar.gz%f`): a tarball read straight from a local bucket has its
/// manifest beside it under the same suffix.
const LOCAL_OBJECT_SUFFIX: &str = "%f";

/// The stored manifest beside `tarball`, opened; `None` when there is none.
fn open_sibling_manifest(tarball: &Path) -> Result<Option<BufReader<File>>, ArchiveError> {
    let local = tarball
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(LOCAL_OBJECT_SUFFIX));
    let name = if local {
        format!("{MANIFEST_FILE_NAME}{LOCAL_OBJECT_SUFFIX}")
    } else {
        MANIFEST_FILE_NAME.to_string()
    };
    match File::open(tarball.with_file_name(name)) {
        Ok(f) => Ok(Some(BufReader::new(f))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the stored manifest beside `tarball`. Its JSON text, the items parsed from it
/// and the manifest built from them are held at once (about three times the text), so
/// the text may be a quarter of the total budget.
fn read_sibling_manifest(
    tarball: &Path,
    limits: &ArchiveLimits,
) -> Result<Option<Manifest>, ArchiveError> {
    match open_sibling_manifest(tarball)? {
        Some(f) => Ok(Some(Manifest::read_gz(f, limits.max_retained_bytes / 4)?)),
        None => Ok(None),
    }
}

/// The unversioned identity of an item, shared by its copies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ObjectPath(ItemPath);

impl ObjectPath {
    fn of(p: &ItemPath) -> Self {
        Self(ItemPath {
            version_dir: VersionDir::Unversioned,
            ..p.clone()
        })
    }
}

impl ItemPath {
    fn unversioned_path(&self) -> String {
        ObjectPath::of(self).0.to_string()
    }
}

/// Problems or notes: the first [`MAX_LISTED`] in full, then only counted.
#[derive(Debug, Default)]
struct Findings {
    listed: Vec<String>,
    more: usize,
}

impl Findings {
    fn push(&mut self, text: String) {
        if self.listed.len() < MAX_LISTED {
            self.listed.push(text);
        } else {
            self.more += 1;
        }
    }

    /// Lists `text` even past the cap (for the few whole-archive findings).
    fn push_always(&mut self, text: String) {
        self.listed.push(text);
    }

    fn into_list(mut self, what: &str) -> Vec<String> {
        if self.more > 0 {
            self.listed
                .push(format!("... and {} more {what} not listed", self.more));
        }
        self.listed
    }
}

#[derive(Debug, Default)]
struct Copies {
    unversioned: Option<[u8; 32]>,
    preferred: Option<[u8; 32]>,
}

/// Checks that each object's unversioned file and its preferred-version copy hold the
/// same bytes. Velero and Granary write the two one after the other, so the last item
/// file is held (one entry's bytes, like the reader's own buffer) and compared with the
/// next directly; copies apart from each other (other writers) fall back to SHA-256
/// digests, kept per object until its other copy comes and charged to the budget.
#[derive(Default)]
struct CopyCheck {
    /// The last unversioned or preferred-version file, not yet paired.
    last: Option<(ObjectPath, bool, Vec<u8>)>,
    spare: Vec<u8>,
    /// Objects with one copy seen whose other copy did not follow it.
    apart: HashMap<ObjectPath, Copies>,
    /// Objects whose two copies differ, in archive order.
    differing: Vec<ObjectPath>,
}

/// Whether two item paths are copies of one object (any version directory).
fn same_object(a: &ItemPath, b: &ItemPath) -> bool {
    a.name == b.name && a.scope == b.scope && a.group_resource == b.group_resource
}

impl CopyCheck {
    fn see(
        &mut self,
        path: &ItemPath,
        bytes: &[u8],
        budget: &RetainedBudget,
    ) -> Result<(), ArchiveError> {
        let preferred = match path.version_dir {
            VersionDir::Unversioned => false,
            VersionDir::Preferred(_) => true,
            VersionDir::Version(_) => return Ok(()),
        };
        if let Some((last_key, last_preferred, last_bytes)) = &self.last
            && same_object(&last_key.0, path)
            && *last_preferred != preferred
        {
            if last_bytes[..] != *bytes {
                self.differing.push(ObjectPath::of(path));
            }
            if let Some((_, _, b)) = self.last.take() {
                self.spare = b;
            }
            return Ok(());
        }
        let mut held = std::mem::take(&mut self.spare);
        held.clear();
        held.extend_from_slice(bytes);
        if let Some(last) = self.last.replace((ObjectPath::of(path), preferred, held)) {
            self.set_apart(last, budget)?;
        }
        Ok(())
    }

    fn set_apart(
        &mut self,
        (key, preferred, bytes): (ObjectPath, bool, Vec<u8>),
        budget: &RetainedBudget,
    ) -> Result<(), ArchiveError> {
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        self.spare = bytes;
        let p = &key.0;
        let charge = (p.group_resource.group.len()
            + p.group_resource.resource.len()
            + p.scope.namespace().len()
            + p.name.len()) as u64
            + 2 * 33
            + 4 * PER_ITEM_OVERHEAD;
        let copies = match self.apart.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e,
            std::collections::hash_map::Entry::Vacant(v) => {
                budget.charge(charge)?;
                v.insert_entry(Copies::default())
            }
        };
        let both = {
            let c = copies.get();
            if preferred {
                c.unversioned
            } else {
                c.preferred
            }
        };
        match both {
            Some(other) => {
                let (key, _) = copies.remove_entry();
                budget.release(charge);
                if other != digest {
                    self.differing.push(key);
                }
            }
            None => {
                let mut copies = copies;
                let c = copies.get_mut();
                if preferred {
                    c.preferred = Some(digest);
                } else {
                    c.unversioned = Some(digest);
                }
            }
        }
        Ok(())
    }

    /// The problems and notes, once every entry was seen.
    fn finish(
        mut self,
        budget: &RetainedBudget,
        problems: &mut Findings,
        notes: &mut Findings,
    ) -> Result<(), ArchiveError> {
        if let Some(last) = self.last.take() {
            self.set_apart(last, budget)?;
        }
        for key in &self.differing {
            problems.push(format!(
                "{} differs from its preferred-version copy",
                key.0.unversioned_path()
            ));
        }
        let mut alone: Vec<(ObjectPath, Copies)> = self.apart.into_iter().collect();
        alone.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, copies) in alone {
            if copies.preferred.is_some() {
                problems.push(format!(
                    "{} has a preferred-version copy but no unversioned file",
                    key.0.unversioned_path()
                ));
            } else {
                notes.push(format!(
                    "{} has no preferred-version copy (archives before Velero 1.4 have none)",
                    key.0.unversioned_path()
                ));
            }
        }
        Ok(())
    }
}

/// One pass over the entries, shared by inspect and verify.
struct Scan<'b> {
    budget: &'b RetainedBudget,
    verify: bool,
    first: bool,
    seen_any: bool,
    version: Option<String>,
    /// Inspect: the manifest rebuilt from the tarball.
    manifest: Manifest,
    /// Verify: the rebuilt manifest's fingerprints, all a comparison needs, when
    /// `fingerprints` (there is a stored manifest to compare).
    digests: Vec<[u8; 32]>,
    fingerprints: bool,
    /// Objects (unversioned item files) seen.
    objects: usize,
    /// The last item's group resource and its name in `resources`.
    group_resource: (GroupResource, String),
    resources: BTreeMap<String, ResourceSummary>,
    copies: CopyCheck,
    preferred_versions: HashMap<GroupResource, BTreeSet<String>>,
    problems: Findings,
    notes: Findings,
}

impl<'b> Scan<'b> {
    fn new(budget: &'b RetainedBudget, verify: bool, fingerprints: bool) -> Self {
        Scan {
            budget,
            verify,
            first: false,
            seen_any: false,
            version: None,
            manifest: Manifest::default(),
            digests: Vec::new(),
            fingerprints,
            objects: 0,
            group_resource: (GroupResource::new("", ""), String::new()),
            resources: BTreeMap::new(),
            copies: CopyCheck::default(),
            preferred_versions: HashMap::new(),
            problems: Findings::default(),
            notes: Findings::default(),
        }
    }

    fn entry(&mut self, entry: ArchiveEntry<'_>) -> Result<(), ArchiveError> {
        self.first = !self.seen_any;
        match entry {
            ArchiveEntry::Version { contents } => {
                self.seen_any = true;
                if self.verify && !self.first {
                    self.problems
                        .push("metadata/version is not the first entry".into());
                }
                self.budget.charge(contents.len() as u64)?;
                self.version = Some(String::from_utf8_lossy(contents).into_owned());
            }
            ArchiveEntry::Item(item) => {
                self.seen_any = true;
                let p = item.path;
                // Items of one resource come together: its name is formatted once.
                if self.group_resource.0 != p.group_resource {
                    self.group_resource = (p.group_resource.clone(), p.group_resource.to_string());
                }
                let gr = self.group_resource.1.as_str();
                let budget = self.budget;
                let keep = |text: &str| budget.charge(text.len() as u64 + PER_ITEM_OVERHEAD);
                if !self.resources.contains_key(gr) {
                    keep(gr)?;
                    self.resources
                        .insert(gr.to_owned(), ResourceSummary::default());
                }
                let Some(summary) = self.resources.get_mut(gr) else {
                    return Ok(());
                };
                let checked = check_item_path(p, item.object);
                match &p.version_dir {
                    VersionDir::Unversioned => {
                        match &p.scope {
                            Scope::Cluster => summary.cluster += 1,
                            Scope::Namespaced(ns) => match summary.namespaces.get_mut(ns) {
                                Some(n) => *n += 1,
                                None => {
                                    keep(ns)?;
                                    summary.namespaces.insert(ns.clone(), 1);
                                }
                            },
                        }
                        self.objects += 1;
                        match checked {
                            Ok(d) if self.verify => {
                                if self.fingerprints {
                                    budget.charge(32)?;
                                    self.digests.push(d.digest());
                                }
                            }
                            Ok(d) => {
                                budget.charge(d.heap_bytes())?;
                                self.manifest.add(d)?;
                            }
                            Err(e) => self.problems.push(format!("{}: {e}", item.entry_path)),
                        }
                    }
                    VersionDir::Preferred(v) | VersionDir::Version(v) => {
                        if !summary.versions.contains(v) {
                            // Once in the summary's versions, once in preferred_versions.
                            keep(v)?;
                            keep(v)?;
                            summary.versions.insert(v.clone());
                        }
                        if let VersionDir::Preferred(_) = p.version_dir {
                            if summary.preferred_version.as_ref() != Some(v) {
                                summary.preferred_version = Some(v.clone());
                            }
                            match self.preferred_versions.get_mut(&p.group_resource) {
                                Some(set) if set.contains(v) => {}
                                Some(set) => {
                                    set.insert(v.clone());
                                }
                                None => {
                                    self.preferred_versions.insert(
                                        p.group_resource.clone(),
                                        BTreeSet::from([v.clone()]),
                                    );
                                }
                            }
                        }
                        if self.verify
                            && let Err(e) = checked
                        {
                            self.problems.push(format!("{}: {e}", item.entry_path));
                        }
                    }
                }
                if self.verify {
                    self.copies.see(p, item.bytes, self.budget)?;
                }
            }
            ArchiveEntry::Directory { path } => {
                if self.verify {
                    self.notes
                        .push(format!("directory entry {path:?} (Velero writes none)"));
                }
            }
            ArchiveEntry::Other { path, .. } => {
                self.seen_any = true;
                if self.verify {
                    self.notes
                        .push(format!("{path:?} is not an item file; restores ignore it"));
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Inspection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Format version: {}",
            self.format_version.as_deref().unwrap_or("<missing>")
        )?;
        writeln!(
            f,
            "Entries: {} ({} bytes uncompressed), objects: {}",
            self.entries, self.uncompressed_bytes, self.items
        )?;
        writeln!(f, "Resources:")?;
        for (gr, r) in &self.resources {
            let total = r.cluster + r.namespaces.values().sum::<usize>();
            write!(f, "  {gr}: {total}")?;
            if let Some(v) = &r.preferred_version {
                write!(f, " (preferred version {v})")?;
            }
            let others: Vec<&String> = r
                .versions
                .iter()
                .filter(|v| Some(*v) != r.preferred_version.as_ref())
                .collect();
            if !others.is_empty() {
                write!(f, " (other versions {others:?})")?;
            }
            writeln!(f)?;
            if r.cluster > 0 {
                writeln!(f, "    <cluster>: {}", r.cluster)?;
            }
            for (ns, n) in &r.namespaces {
                writeln!(f, "    {ns}: {n}")?;
            }
        }
        let m = &self.manifest;
        let source = match (m.source, m.matches_tarball) {
            (ManifestSource::Stored, Some(true)) => "stored, matches the tarball",
            (ManifestSource::Stored, _) => "stored, DOES NOT match the tarball",
            (ManifestSource::RebuiltFromTarball, _) => "rebuilt from the tarball",
        };
        writeln!(f, "Manifest ({source}): {} items", m.items)?;
        writeln!(f, "  with owners: {}", m.items_with_owners)?;
        writeln!(
            f,
            "  owner references outside the backup: {}",
            m.missing_owner_refs
        )?;
        write!(f, "  ownership cycles: {}", m.broken_cycles)
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.is_ok() { "valid" } else { "INVALID" };
        write!(
            f,
            "Archive is {verdict}: format version {}, {} entries, {} objects",
            self.format_version.as_deref().unwrap_or("<missing>"),
            self.entries,
            self.items
        )?;
        for p in &self.problems {
            write!(f, "\n  problem: {p}")?;
        }
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

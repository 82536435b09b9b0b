//! What a restore keeps of a backup's items: a compact head per item in memory, its
//! body (the item file's JSON bytes) in a spill file on disk, read back when the item is
//! restored (docs/architecture.md#restores).
//!
//! The tarball is read once, by the verify pass of `granary archive verify` (every
//! refusal of the archive reader and every format problem kept: they fail the restore
//! before it writes). For each unversioned item file that is what its path says, the
//! pass keeps an [`BackupContents`] head of:
//! - its resource, namespace and kind, as indices into tables of the distinct values
//!   (a backup has few resources, kinds and namespaces);
//! - its name, in one text arena;
//! - its UID and its owners' UIDs (ownerReferences), for owners-before-dependents and
//!   for rewriting a dependent's references to its owner's new UID (a UUID in 16
//!   bytes; usually no owners, which cost nothing);
//! - whether the restore's label selectors match its labels (decided while it is read:
//!   the labels themselves are never kept);
//! - where its body is in the spill file (offset and length).
//!
//! That is about 80 bytes and the name per item, whatever the object holds; everything
//! kept is charged to the archive reader's [`RetainedBudget`]
//! ([`ArchiveLimits::max_retained_bytes`]), so a hostile archive of many items with long
//! names or many owners is refused rather than filling memory. Nothing else of an item
//! (its data, annotations, labels, spec) is in memory except while the item itself is
//! prepared and created.
//!
//! [`ArchiveLimits::max_retained_bytes`]: granary_velero::archive::ArchiveLimits

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde_json::Value;

use granary_api::velero::RestoreSpec;
use granary_velero::archive::{
    ArchiveError, ArchiveLimits, PER_ITEM_OVERHEAD, RetainedBudget, Scope, VersionDir,
};
use granary_velero::inspect::{check_item_path, verify_reader_within};
use granary_velero::manifest::Uid;
use granary_velero::resource::GroupResource;

use crate::backup::selectors;

/// The head of one item (see the module docs).
#[derive(Clone, Debug)]
struct Head {
    body_offset: u64,
    uid: Uid,
    owners: Box<[Uid]>,
    body_len: u32,
    name_start: u32,
    name_len: u16,
    labels_match: bool,
    resource: u32,
    namespace: u32,
    kind: u32,
}

/// Bytes charged per head: the head itself, its slot, and its place in the lookup
/// index ([`BackupContents::find`]).
const HEAD_BYTES: u64 = (std::mem::size_of::<Head>() + std::mem::size_of::<u32>()) as u64;

/// An item file refused because its object is not what its path says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedItem {
    /// Resource, namespace (`""` under `cluster/`) and name as the path gives them: the
    /// backup's own, before any namespace mapping.
    pub group_resource: GroupResource,
    pub namespace: String,
    pub name: String,
    /// The entry path and what contradicts it.
    pub reason: String,
}

/// Most format problems a failure reason quotes; the results hold the refused items.
const PROBLEMS_QUOTED: usize = 3;

/// What a restore reads from a backup's tarball: the heads of its items (their
/// unversioned copies, which Velero's restore reads, that are what their path says) and
/// where their bodies are.
#[derive(Debug, Default)]
pub struct BackupContents {
    heads: Vec<Head>,
    names: String,
    resources: Vec<GroupResource>,
    namespaces: Vec<String>,
    kinds: Vec<String>,
    /// UIDs some item names as an owner.
    owners: HashSet<Uid>,
    /// Every item's index, sorted by (resource, namespace, name): what
    /// [`BackupContents::find`] searches (4 bytes an item).
    by_key: Vec<u32>,
    /// The bodies, when they were spilled (plans over heads alone have none).
    spill: Option<File>,
    /// Item files whose object contradicts their path: never restored.
    pub refused: Vec<RefusedItem>,
    /// What `granary archive verify` reports as the archive's format problems (the
    /// refused items among them); any of them fails the restore before it writes.
    pub problems: Vec<String>,
}

impl BackupContents {
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    pub fn group_resource(&self, i: usize) -> &GroupResource {
        &self.resources[self.heads[i].resource as usize]
    }

    /// `""` for cluster-scoped items.
    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[self.heads[i].namespace as usize]
    }

    pub fn name(&self, i: usize) -> &str {
        let h = &self.heads[i];
        let start = h.name_start as usize;
        &self.names[start..start + h.name_len as usize]
    }

    /// The object's `kind` (`""` when it has none).
    pub fn kind(&self, i: usize) -> &str {
        &self.kinds[self.heads[i].kind as usize]
    }

    pub fn uid(&self, i: usize) -> &Uid {
        &self.heads[i].uid
    }

    /// The UIDs of the item's owners (its ownerReferences), empty ones left out.
    pub fn owners(&self, i: usize) -> &[Uid] {
        &self.heads[i].owners
    }

    /// Whether some item of the backup names this UID as an owner.
    pub fn is_owner(&self, uid: &Uid) -> bool {
        !uid.is_empty() && self.owners.contains(uid)
    }

    /// Whether the restore's label selectors match the item's labels.
    pub fn labels_match(&self, i: usize) -> bool {
        self.heads[i].labels_match
    }

    /// The index of the item of `group_resource` in `namespace` named `name`, if any: a
    /// binary search of the sorted index (actions name additional items per item, so a
    /// scan of every item per lookup would make a restore of many pods quadratic).
    pub fn find(
        &self,
        group_resource: &GroupResource,
        namespace: &str,
        name: &str,
    ) -> Option<usize> {
        let resource = self.resources.iter().position(|r| r == group_resource)? as u32;
        let ns = self.namespaces.iter().position(|n| n == namespace)? as u32;
        self.by_key
            .binary_search_by(|&j| self.key(j as usize).cmp(&(resource, ns, name)))
            .ok()
            .map(|at| self.by_key[at] as usize)
    }

    /// What [`Self::by_key`] is sorted by.
    fn key(&self, i: usize) -> (u32, u32, &str) {
        let h = &self.heads[i];
        (h.resource, h.namespace, self.name(i))
    }

    /// The item's object, read back from the spill file.
    pub fn object(&self, i: usize) -> Result<Value, String> {
        let h = &self.heads[i];
        let spill = self
            .spill
            .as_ref()
            .ok_or_else(|| "the backup's item bodies were not kept".to_string())?;
        let mut buf = vec![0u8; h.body_len as usize];
        spill
            .read_exact_at(&mut buf, h.body_offset)
            .map_err(|e| format!("reading the backed-up object back: {e}"))?;
        serde_json::from_slice(&buf).map_err(|e| format!("the backed-up object: {e}"))
    }

    /// The restore's failure reason when the archive has format problems.
    pub fn failure(&self) -> Option<String> {
        if self.problems.is_empty() {
            return None;
        }
        let quoted = self.problems[..self.problems.len().min(PROBLEMS_QUOTED)].join("; ");
        let more = match self.problems.len().saturating_sub(PROBLEMS_QUOTED) {
            0 => String::new(),
            n => format!(" (and {n} more)"),
        };
        Some(format!(
            "the backup's tarball is not a valid backup archive, nothing was restored: {quoted}{more}"
        ))
    }
}

/// Whether the restore's label selectors (`labelSelector`, `orLabelSelectors`) match
/// an object's labels.
pub fn labels_match(spec: &RestoreSpec, object: &Value) -> bool {
    if spec.label_selector.is_none() && spec.or_label_selectors.as_ref().is_none_or(Vec::is_empty) {
        return true;
    }
    let labels = selectors::labels_of(object);
    if let Some(sel) = &spec.label_selector
        && !selectors::matches(sel, &labels)
    {
        return false;
    }
    match &spec.or_label_selectors {
        Some(any) if !any.is_empty() => any.iter().any(|s| selectors::matches(s, &labels)),
        _ => true,
    }
}

/// Builds [`BackupContents`] item by item, charging what it keeps to a budget.
pub struct ContentsBuilder<'b> {
    contents: BackupContents,
    spill: Option<BufWriter<File>>,
    offset: u64,
    budget: &'b RetainedBudget,
    spec: &'b RestoreSpec,
    resource_ids: HashMap<GroupResource, u32>,
    namespace_ids: HashMap<String, u32>,
    kind_ids: HashMap<String, u32>,
}

fn too_big(what: &str) -> ArchiveError {
    ArchiveError::Io(std::io::Error::other(format!(
        "the backup holds more {what} than a restore can index"
    )))
}

impl<'b> ContentsBuilder<'b> {
    /// A builder spilling bodies into a new file `spill` (none: heads only).
    pub fn new(
        spec: &'b RestoreSpec,
        budget: &'b RetainedBudget,
        spill: Option<&Path>,
    ) -> std::io::Result<Self> {
        let spill = match spill {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(p)?,
            ),
            None => None,
        };
        Ok(ContentsBuilder {
            contents: BackupContents::default(),
            spill: spill.map(|f| BufWriter::with_capacity(1 << 20, f)),
            offset: 0,
            budget,
            spec,
            resource_ids: HashMap::new(),
            namespace_ids: HashMap::new(),
            kind_ids: HashMap::new(),
        })
    }

    fn intern(
        budget: &RetainedBudget,
        ids: &mut HashMap<String, u32>,
        table: &mut Vec<String>,
        s: &str,
    ) -> Result<u32, ArchiveError> {
        if let Some(&id) = ids.get(s) {
            return Ok(id);
        }
        budget.charge(2 * (s.len() as u64 + PER_ITEM_OVERHEAD))?;
        let id = u32::try_from(table.len()).map_err(|_| too_big("distinct names"))?;
        ids.insert(s.to_owned(), id);
        table.push(s.to_owned());
        Ok(id)
    }

    /// Adds an item whose object is what its path says; `bytes` is its item file.
    pub fn push(
        &mut self,
        group_resource: &GroupResource,
        namespace: &str,
        name: &str,
        object: &Value,
        bytes: &[u8],
    ) -> Result<(), ArchiveError> {
        let budget = self.budget;
        let c = &mut self.contents;
        let resource = match self.resource_ids.get(group_resource) {
            Some(&id) => id,
            None => {
                budget.charge(
                    2 * (group_resource.group.len() + group_resource.resource.len()) as u64
                        + 4 * PER_ITEM_OVERHEAD,
                )?;
                let id = u32::try_from(c.resources.len()).map_err(|_| too_big("resources"))?;
                self.resource_ids.insert(group_resource.clone(), id);
                c.resources.push(group_resource.clone());
                id
            }
        };
        let namespace = Self::intern(
            budget,
            &mut self.namespace_ids,
            &mut c.namespaces,
            namespace,
        )?;
        let kind_text = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let kind = Self::intern(budget, &mut self.kind_ids, &mut c.kinds, kind_text)?;
        let meta = object.get("metadata");
        let uid = Uid::parse(
            meta.and_then(|m| m.get("uid"))
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        let owners: Box<[Uid]> = meta
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter_map(|r| r.get("uid").and_then(Value::as_str))
                    .filter(|u| !u.is_empty())
                    .map(Uid::parse)
                    .collect()
            })
            .unwrap_or_default();
        let mut charge = HEAD_BYTES + name.len() as u64 + uid.heap_bytes();
        for o in owners.iter() {
            charge += std::mem::size_of::<Uid>() as u64 + 2 * o.heap_bytes() + PER_ITEM_OVERHEAD;
        }
        budget.charge(charge)?;
        for o in owners.iter() {
            c.owners.insert(o.clone());
        }
        let name_start = u32::try_from(c.names.len()).map_err(|_| too_big("names"))?;
        let name_len = u16::try_from(name.len()).map_err(|_| too_big("long names"))?;
        c.names.push_str(name);
        let body_len = u32::try_from(bytes.len()).map_err(|_| too_big("large items"))?;
        let body_offset = self.offset;
        if let Some(spill) = &mut self.spill {
            spill.write_all(bytes)?;
            self.offset += bytes.len() as u64;
        }
        c.heads.push(Head {
            body_offset,
            uid,
            owners,
            body_len,
            name_start,
            name_len,
            labels_match: labels_match(self.spec, object),
            resource,
            namespace,
            kind,
        });
        Ok(())
    }

    /// The contents, their bodies written out.
    pub fn finish(mut self) -> std::io::Result<BackupContents> {
        if let Some(spill) = self.spill.take() {
            let file = spill.into_inner().map_err(|e| e.into_error())?;
            self.contents.spill = Some(file);
        }
        self.contents.heads.shrink_to_fit();
        self.contents.names.shrink_to_fit();
        let c = &mut self.contents;
        // Item counts are bounded by the archive's entry limit, far below u32::MAX.
        let mut by_key: Vec<u32> = (0..c.heads.len() as u32).collect();
        by_key.sort_unstable_by(|&a, &b| c.key(a as usize).cmp(&c.key(b as usize)));
        c.by_key = by_key;
        Ok(self.contents)
    }
}

/// Reads the items of a tarball, refusing what the archive reader refuses, and verifies
/// the archive in the same pass as `granary archive verify` does: an item file whose
/// object contradicts its path is refused (its path's namespace is the backup's, the
/// namespace mapping comes later), and every format problem is reported. The bodies go
/// to a new file `spill` (none: heads only); what is kept in memory (the heads, see the
/// module docs) is charged, with what the verify pass keeps, to one budget of
/// [`ArchiveLimits::max_retained_bytes`].
pub fn read_backup<R: Read + Send>(
    tarball: R,
    limits: &ArchiveLimits,
    spec: &RestoreSpec,
    spill: Option<&Path>,
) -> Result<BackupContents, String> {
    let budget = RetainedBudget::for_limits(limits);
    let mut builder = ContentsBuilder::new(spec, &budget, spill)
        .map_err(|e| format!("creating the restore's spill file: {e}"))?;
    let mut refused = Vec::new();
    let report = verify_reader_within(tarball, None, limits, &budget, |item| {
        if item.path.version_dir != VersionDir::Unversioned {
            return Ok(());
        }
        let namespace = match &item.path.scope {
            Scope::Cluster => "",
            Scope::Namespaced(ns) => ns.as_str(),
        };
        match check_item_path(item.path, item.object) {
            Ok(_) => builder.push(
                &item.path.group_resource,
                namespace,
                &item.path.name,
                item.object,
                item.bytes,
            )?,
            Err(e) => {
                let reason = format!("{}: {e}", item.entry_path);
                budget.charge(
                    (item.path.name.len() + namespace.len() + reason.len()) as u64
                        + 4 * PER_ITEM_OVERHEAD,
                )?;
                refused.push(RefusedItem {
                    group_resource: item.path.group_resource.clone(),
                    namespace: namespace.to_owned(),
                    name: item.path.name.clone(),
                    reason,
                });
            }
        }
        Ok(())
    })
    .map_err(|e| format!("the backup's tarball is refused: {e}"))?;
    let mut out = builder
        .finish()
        .map_err(|e| format!("writing the restore's spill file: {e}"))?;
    out.refused = refused;
    out.problems = report.problems;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_found_by_resource_namespace_and_name() {
        let budget = RetainedBudget::for_limits(&ArchiveLimits::default());
        let spec = RestoreSpec::default();
        let mut b = ContentsBuilder::new(&spec, &budget, None).expect("builder");
        let cm = GroupResource::new("", "configmaps");
        let sa = GroupResource::new("", "serviceaccounts");
        let items = [
            (&sa, "b", "z"),
            (&cm, "a", "x"),
            (&cm, "b", "x"),
            (&sa, "a", "default"),
            (&cm, "a", "w"),
        ];
        for (gr, ns, name) in items {
            let obj = serde_json::json!({"kind": "K", "metadata": {"name": name, "namespace": ns}});
            b.push(gr, ns, name, &obj, b"{}").expect("pushed");
        }
        let c = b.finish().expect("finished");
        for (i, (gr, ns, name)) in items.iter().enumerate() {
            assert_eq!(c.find(gr, ns, name), Some(i), "{gr} {ns}/{name}");
        }
        assert_eq!(c.find(&cm, "a", "y"), None);
        assert_eq!(c.find(&cm, "c", "x"), None);
        assert_eq!(
            c.find(&GroupResource::new("apps", "deployments"), "a", "x"),
            None
        );
    }
}

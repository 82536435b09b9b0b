//! Streaming writer of Velero's tarball format, building the manifest as it goes.

use std::collections::HashSet;
use std::io::Write;

use chrono::{DateTime, Utc};
use flate2::Compression;
use serde_json::Value;

use super::error::ArchiveError;
use super::gzip::MemberWriter;
use super::json::write_compact;
use super::path::{ItemPath, Scope, VersionDir, check_segment};
use super::{ENTRY_MODE, VERSION_FILE_CONTENTS, VERSION_PATH};
use crate::manifest::{ItemKey, Manifest, ManifestError, ManifestSpool, item_from_object};
use crate::resource::GroupResource;

/// Writes a backup tarball to any `Write`, one item at a time.
///
/// Memory is bounded by one item body, one gzip member (see [`super::gzip`]) and the
/// manifest's compact index (about 100 bytes and the name per item: the records go to a
/// spill file, see [`ManifestSpool`]), never by the archive size. Entries are regular
/// files with mode 0755 and the given modification time; `metadata/version` is written
/// first.
pub struct ArchiveWriter<W: Write> {
    tar: tar::Builder<MemberWriter<W>>,
    mtime: u64,
    manifest: ManifestSpool,
    /// Paths of non-preferred-version copies, which the manifest does not track.
    versioned_paths: HashSet<String>,
    body: Vec<u8>,
    entries: u64,
}

impl<W: Write> ArchiveWriter<W> {
    /// Starts an archive on `out`, writing `metadata/version`. `now` becomes every
    /// entry's modification time (from the caller's clock). The manifest's records
    /// spill to an anonymous temporary file.
    pub fn new(out: W, now: DateTime<Utc>) -> Result<Self, ArchiveError> {
        let tar = tar::Builder::new(MemberWriter::new(out, Compression::default()));
        let mut writer = Self {
            tar,
            mtime: u64::try_from(now.timestamp()).unwrap_or(0),
            manifest: ManifestSpool::new().map_err(spool_error)?,
            versioned_paths: HashSet::new(),
            body: Vec::new(),
            entries: 0,
        };
        append_file(
            &mut writer.tar,
            writer.mtime,
            VERSION_PATH,
            VERSION_FILE_CONTENTS,
        )?;
        writer.entries += 1;
        Ok(writer)
    }

    /// Adds one object of resource `gr`, whose group's preferred version is
    /// `preferred_version` (from discovery).
    ///
    /// The object's `apiVersion` gives its version. At the preferred version it is
    /// written twice, at the unversioned path and under `<v>-preferredversion/`, and
    /// enters the manifest; at another version (Velero's `EnableAPIGroupVersions`) it is
    /// written once under `<v>/` and the manifest, which holds one item per object, is
    /// unchanged. A second object with the same key is refused before anything is
    /// written.
    pub fn add_item(
        &mut self,
        gr: &GroupResource,
        preferred_version: &str,
        object: &Value,
    ) -> Result<ItemKey, ArchiveError> {
        let item = item_from_object(gr, object)?;
        check_segment("resource", &gr.resource)?;
        if !gr.group.is_empty() {
            check_segment("group", &gr.group)?;
        }
        check_segment("version", &item.version)?;
        check_segment("name", &item.name)?;
        if !item.namespace.is_empty() {
            check_segment("namespace", &item.namespace)?;
        }
        let key = item.key();
        let scope = Scope::from_namespace(&item.namespace);
        let path = |version_dir| ItemPath {
            group_resource: gr.clone(),
            version_dir,
            scope: scope.clone(),
            name: item.name.clone(),
        };

        self.body.clear();
        write_compact(&mut self.body, object)
            .map_err(|e| ArchiveError::InvalidObject(e.to_string()))?;

        if item.version == preferred_version {
            let unversioned = path(VersionDir::Unversioned).to_string();
            let preferred = path(VersionDir::Preferred(item.version.clone())).to_string();
            // The manifest refuses duplicates before any byte is written.
            self.manifest.add(&item).map_err(spool_error)?;
            append_file(&mut self.tar, self.mtime, &unversioned, &self.body)?;
            append_file(&mut self.tar, self.mtime, &preferred, &self.body)?;
            self.entries += 2;
        } else {
            let versioned = path(VersionDir::Version(item.version.clone())).to_string();
            if !self.versioned_paths.insert(versioned.clone()) {
                return Err(ArchiveError::DuplicateEntry { path: versioned });
            }
            append_file(&mut self.tar, self.mtime, &versioned, &self.body)?;
            self.entries += 1;
        }
        Ok(key)
    }

    /// Number of entries written (including `metadata/version`).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Ends the tar stream and the gzip stream, returning the output and the manifest.
    pub fn finish(self) -> Result<(W, ManifestSpool), ArchiveError> {
        let gz = self.tar.into_inner()?;
        let out = gz.finish()?;
        Ok((out, self.manifest))
    }

    /// [`ArchiveWriter::finish`] with the whole manifest read back into memory, for
    /// tools and tests over small archives.
    pub fn finish_with_manifest(self) -> Result<(W, Manifest), ArchiveError> {
        let (out, mut spool) = self.finish()?;
        let manifest = spool.to_manifest().map_err(spool_error)?;
        Ok((out, manifest))
    }
}

/// The spill file's I/O errors are the archive's: the backup cannot go on without it.
fn spool_error(e: ManifestError) -> ArchiveError {
    match e {
        ManifestError::Io(e) => ArchiveError::Io(e),
        other => ArchiveError::Manifest(other),
    }
}

/// Appends one regular file as Velero writes it: mode 0755, owner 0, the given mtime.
fn append_file<W: Write>(
    tar: &mut tar::Builder<W>,
    mtime: u64,
    path: &str,
    data: &[u8],
) -> Result<(), ArchiveError> {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(ENTRY_MODE);
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    header.set_size(data.len() as u64);
    // Paths over the ustar limits get a GNU long-name header, which Go reads.
    tar.append_data(&mut header, path, data)?;
    Ok(())
}

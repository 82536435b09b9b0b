//! Unpacking an archive into a directory (what Velero's restore does before parsing),
//! with every entry checked by the reader first: nothing is ever written outside the
//! target directory.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use super::error::ArchiveError;
use super::limits::ArchiveLimits;
use super::reader::{ArchiveEntry, ArchiveStats, read_archive};

/// Extracts `input` into `dest`, which must be an existing, empty directory (so no
/// symlink planted there beforehand can redirect a write). Entry paths are normalised
/// and refused if they could escape (see [`read_archive`]); files are created, never
/// overwritten. On error, what was extracted so far stays in `dest`.
pub fn extract_archive<R: Read + Send>(
    input: R,
    dest: &Path,
    limits: &ArchiveLimits,
) -> Result<ArchiveStats, ArchiveError> {
    if fs::read_dir(dest)?.next().is_some() {
        return Err(ArchiveError::Io(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("extraction target {} is not empty", dest.display()),
        )));
    }
    read_archive(input, limits, |entry| {
        let (path, bytes): (String, &[u8]) = match entry {
            ArchiveEntry::Version { contents } => (super::VERSION_PATH.to_owned(), contents),
            ArchiveEntry::Item(item) => (item.entry_path.to_owned(), item.bytes),
            ArchiveEntry::Other { path, bytes } => (path.to_owned(), bytes),
            ArchiveEntry::Directory { path } => {
                fs::create_dir_all(dest.join(path))?;
                return Ok(());
            }
        };
        // `path` is relative with no `..` or empty segments (checked by the reader).
        let target = dest.join(&path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)?;
        file.write_all(bytes)?;
        Ok(())
    })
}

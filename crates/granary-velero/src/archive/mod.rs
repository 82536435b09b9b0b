//! Velero's backup tarball (`<name>.tar.gz`, docs/formats.md#backup-tarball): a
//! gzip-compressed tar of regular files, `metadata/version` first, then one JSON file per
//! object at `resources/<resource.group>/{namespaces/<ns>,cluster}/<name>.json`, with
//! copies under `<version>-preferredversion/` (and `<version>/` for non-preferred
//! versions).
//!
//! - [`ArchiveWriter`] streams items into any `std::io::Write`, holding no item bodies.
//! - [`read_archive`] streams entries out of any `std::io::Read`, refusing anything a
//!   hostile archive could use (escaping paths, links, devices, absurd sizes or counts,
//!   compression bombs) within [`ArchiveLimits`], and keeping at most
//!   [`ArchiveLimits::max_retained_bytes`] in memory across entries, counted in a
//!   [`RetainedBudget`] its consumer shares ([`read_archive_within`]), besides the few
//!   gzip members being inflated ahead of the parser on other threads ([`gzip`]: at most
//!   ten of at most 4 MiB each); [`parse_archive`] collects the items as
//!   Velero's parser sees them; [`extract_archive`] unpacks into a directory without ever
//!   writing outside it.

mod budget;
mod error;
mod extract;
pub mod gzip;
pub mod json;
mod limits;
mod path;
mod reader;
mod writer;

// Installs the counting global allocator (`crate::heap_counter`), which measures the
// reader's memory.
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod tests;

pub use budget::{PER_ITEM_OVERHEAD, RetainedBudget};
pub use error::ArchiveError;
pub use extract::extract_archive;
pub use limits::ArchiveLimits;
pub use path::{ItemPath, Scope, VersionDir};
pub use reader::{
    ArchiveEntry, ArchiveStats, ItemEntry, ParsedArchive, ResourceGroupVersions, parse_archive,
    read_archive, read_archive_within,
};
pub use writer::ArchiveWriter;

/// Path of the format-version file, always the first entry.
pub const VERSION_PATH: &str = "metadata/version";
/// The format version Velero 1.18 writes, and so do we.
pub const FORMAT_VERSION: &str = "1.1.0";
/// Exact contents of `metadata/version`.
pub const VERSION_FILE_CONTENTS: &[u8] = b"1.1.0\n";
/// Top-level directory of the item files.
pub const RESOURCES_DIR: &str = "resources";
/// Suffix of the directory holding the preferred-version copies.
pub const PREFERRED_VERSION_SUFFIX: &str = "-preferredversion";
/// Mode of every entry, as Velero writes it.
pub const ENTRY_MODE: u32 = 0o755;

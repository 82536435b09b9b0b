//! Why an archive could not be written or read.

use thiserror::Error;

use crate::manifest::ManifestError;

/// An archive was refused or could not be processed. Variant names read as reasons.
#[derive(Debug, Error)]
pub enum ArchiveError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a valid gzip-compressed tar stream: {0}")]
    Corrupt(String),
    #[error("entry {path:?} has an absolute path")]
    AbsolutePath { path: String },
    #[error("entry {path:?} escapes the archive root")]
    PathTraversal { path: String },
    #[error("entry {path:?} has an invalid path: {reason}")]
    InvalidPath { path: String, reason: &'static str },
    #[error("entry path is {len} bytes long, over the limit of {limit}")]
    PathTooLong { len: u64, limit: u64 },
    #[error("entry {path:?} is a {kind}; only regular files are allowed")]
    UnsupportedEntryType { path: String, kind: &'static str },
    #[error("entry {path:?} declares {size} bytes, over the per-entry limit of {limit}")]
    EntryTooLarge { path: String, size: u64, limit: u64 },
    #[error("archive has more than {limit} entries")]
    TooManyEntries { limit: u64 },
    #[error(
        "archive decompresses to more than {limit} bytes (limit on total uncompressed size; possible compression bomb)"
    )]
    TotalSizeExceeded { limit: u64 },
    #[error(
        "reading the archive would keep more than {limit} bytes in memory (entry paths, headers and collected items; limit max_retained_bytes)"
    )]
    RetainedBudgetExceeded { limit: u64 },
    #[error("entry {path:?} appears more than once")]
    DuplicateEntry { path: String },
    #[error("item {path:?} is not a valid JSON object: {reason}")]
    InvalidItem { path: String, reason: String },
    #[error("object cannot be archived: {0}")]
    InvalidObject(String),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl ArchiveError {
    pub(crate) fn corrupt(e: impl std::fmt::Display) -> Self {
        Self::Corrupt(e.to_string())
    }
}

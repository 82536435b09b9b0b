//! Bounds the reader enforces, so a hostile archive costs at most this much.

/// Limits on what [`super::read_archive`] accepts. The defaults fit any real cluster
/// backup (objects are at most a few MiB in etcd) while stopping bombs early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// Most entries (files) in the archive.
    pub max_entries: u64,
    /// Most bytes one entry may declare.
    pub max_entry_bytes: u64,
    /// Most bytes the whole tar stream may decompress to: the compression-bomb guard.
    pub max_total_bytes: u64,
    /// Longest entry path, in bytes (also bounds GNU long-name and PAX headers).
    pub max_path_bytes: u64,
    /// Most bytes kept in memory across entries, by the reader and what collects its
    /// entries together (see [`super::RetainedBudget`]): the total that bounds memory,
    /// whatever the number of entries.
    pub max_retained_bytes: u64,
}

impl Default for ArchiveLimits {
    fn default() -> Self {
        Self {
            max_entries: 5_000_000,
            max_entry_bytes: 64 << 20,
            max_total_bytes: 64 << 30,
            max_path_bytes: 4096,
            // About a million objects with their manifest entries and copies.
            max_retained_bytes: 1 << 30,
        }
    }
}

//! Bounds the reader enforces, so a hostile archive costs at most this much.

/// Limits on what [`super::read_archive`] accepts. The defaults fit any real cluster
/// backup (objects are at most a few MiB in etcd) while stopping bombs early. One of them
/// is a flag of `granary archive inspect|verify` (`--max-memory`); the others are
/// `#[arg(skip)]`, kept at their defaults there (their `///` lines are not help).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ArchiveLimits {
    /// Most entries (files) in the archive.
    #[arg(skip = ArchiveLimits::default().max_entries)]
    pub max_entries: u64,
    /// Most bytes one entry may declare.
    #[arg(skip = ArchiveLimits::default().max_entry_bytes)]
    pub max_entry_bytes: u64,
    /// Most bytes the whole tar stream may decompress to: the compression-bomb guard.
    #[arg(skip = ArchiveLimits::default().max_total_bytes)]
    pub max_total_bytes: u64,
    /// Longest entry path, in bytes (also bounds GNU long-name and PAX headers).
    #[arg(skip = ArchiveLimits::default().max_path_bytes)]
    pub max_path_bytes: u64,
    // Most bytes kept in memory across entries, by the reader and what collects its
    // entries together (see [`super::RetainedBudget`]): the total that bounds memory,
    // whatever the number of entries. The `///` lines are the help of `--max-memory`.
    /// Most bytes to keep in memory while reading (paths, collected items, the stored
    /// manifest); an archive that needs more is refused.
    #[arg(
        long = "max-memory",
        value_name = "BYTES",
        default_value_t = ArchiveLimits::default().max_retained_bytes
    )]
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

//! The `local` provider: buckets are directories under a root given by the process
//! (`--data-dir`), objects are files. Writes go to a temp file under `<root>/.tmp` and
//! are renamed into place, so a reader never sees half an object. Keys that would
//! leave the bucket directory (`..`, absolute paths, empty segments) are refused.
//!
//! Whoever can write a bucket directory (a tenant whose location is on this provider)
//! must reach nothing but that bucket's files, so the store never follows a symbolic
//! link at or below a bucket directory:
//! - the root itself is the operator's and may be, or lie below, a link; a bucket
//!   directory that is a link (planted in the root) is refused for every operation,
//!   `ensure_bucket` included;
//! - every path component below the bucket directory is checked with `lstat`
//!   ([`std::fs::symlink_metadata`]) before it is used: a read, copy or write through a
//!   linked directory or of a linked file is refused (`Conflict`, naming the key); a
//!   listing neither shows a link nor walks into a linked directory; a delete removes a
//!   link at the key itself (never its target) and refuses a key below a linked
//!   directory; deleting a bucket whole removes links without following them (std's
//!   `remove_dir_all` does not follow links);
//! - `libc` is not a dependency of this crate and std opens no path relative to a
//!   directory handle, so there is no `O_NOFOLLOW`/`openat` walk. The checks leave a
//!   window: a directory checked as real can be swapped for a link before the `open`,
//!   `rename` or `unlink` that uses the path. For reads the window is closed after the
//!   fact: the opened file must be the one `lstat` found (same device and inode), and on
//!   Linux the kernel's own path of the opened handle (`/proc/self/fd/N`) must be the
//!   key's path inside the bucket, else nothing is served. Writes and deletes keep the
//!   window; winning it needs a process racing the store's own calls.

use std::io::ErrorKind as IoKind;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, BoxStream, StreamExt};
use tokio_util::io::ReaderStream;

use crate::error::{Error, ErrorKind, Result};
use crate::options::StoreOptions;
use crate::retry::RetryStats;
use crate::store::{
    BoxReader, BucketOptions, BucketReport, ByteStream, DeleteReport, ListEntry, ObjectMeta,
    ObjectStore, ProviderKind, roll_up,
};

#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    /// `root` with every link resolved, to check where an opened file really is.
    real_root: PathBuf,
    stats: RetryStats,
    /// Keys per `delete_many` round of a prefix delete (`StoreOptions::delete_batch_size`).
    delete_batch: usize,
}

impl LocalStore {
    /// Opens (and creates) the root directory, with the default options.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self> {
        Self::with_options(root, &StoreOptions::default())
    }

    /// Opens (and creates) the root directory; of `opts` the local store uses the
    /// delete batch size (so a prefix delete goes in the same rounds as on a cloud).
    pub fn with_options(root: impl Into<PathBuf>, opts: &StoreOptions) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(root.join(".tmp"))
            .map_err(|e| io_err(e, format!("create local root {}", root.display())))?;
        let real_root = std::fs::canonicalize(&root)
            .map_err(|e| io_err(e, format!("resolve local root {}", root.display())))?;
        Ok(LocalStore {
            root,
            real_root,
            stats: RetryStats::default(),
            delete_batch: opts.delete_batch_size.max(1),
        })
    }

    fn bucket_dir(&self, bucket: &str) -> Result<PathBuf> {
        if bucket.is_empty() || bucket.starts_with('.') || bucket.contains(['/', '\\', '\0']) {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("bad bucket name {bucket:?}"),
            ));
        }
        Ok(self.root.join(bucket))
    }

    /// The bucket's directory, which must be a directory and not a link to one.
    async fn existing_bucket(&self, bucket: &str) -> Result<PathBuf> {
        let dir = self.bucket_dir(bucket)?;
        match tokio::fs::symlink_metadata(&dir).await {
            Ok(m) if m.is_symlink() => Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "bucket {bucket}: its directory is a symbolic link, and the local provider \
                     follows no link below its data directory"
                ),
            )),
            Ok(m) if m.is_dir() => Ok(dir),
            Ok(_) => Err(Error::new(
                ErrorKind::Conflict,
                format!("{bucket} is not a directory"),
            )),
            Err(e) if e.kind() == IoKind::NotFound => {
                Err(Error::new(ErrorKind::BucketNotFound, bucket.to_string()))
            }
            Err(e) => Err(io_err(e, bucket)),
        }
    }

    /// The bucket directory and the key's path relative to it.
    async fn object_rel(&self, bucket: &str, key: &str) -> Result<(PathBuf, PathBuf)> {
        let rel = checked_key(key)?;
        let dir = self.existing_bucket(bucket).await?;
        Ok((dir, rel))
    }

    /// Opens the object file of `key` for reading: a regular file reached through real
    /// directories only, and (closing the window between the checks and the open) the
    /// very file the checks found, at the key's own path.
    async fn open_object(&self, bucket: &str, key: &str) -> Result<tokio::fs::File> {
        let (dir, rel) = self.object_rel(bucket, key).await?;
        let md = lstat_object(&dir, &rel, key)
            .await?
            .filter(|md| md.is_file())
            .ok_or_else(|| Error::new(ErrorKind::NotFound, key.to_string()))?;
        let path = dir.join(&rel);
        let f = tokio::fs::File::open(&path)
            .await
            .map_err(|e| io_err(e, key))?;
        let opened = f.metadata().await.map_err(|e| io_err(e, key))?;
        let expected = self.real_root.join(bucket).join(&rel);
        if !same_file(&md, &opened) || !opened_at(&f, &expected) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "{key}: a directory on its path was replaced while it was opened; the local \
                     provider follows no symbolic link"
                ),
            ));
        }
        Ok(f)
    }

    fn temp_path(&self) -> PathBuf {
        self.root
            .join(".tmp")
            .join(uuid::Uuid::new_v4().to_string())
    }

    /// Renames a finished temp file to `key` in bucket directory `dir`, creating the
    /// key's directories; a link among them refuses the write (the temp file goes). A
    /// link at the key itself is replaced, its target untouched.
    async fn commit(&self, tmp: &Path, dir: &Path, rel: &Path, key: &str) -> Result<()> {
        let result = async {
            make_dirs(dir, rel, key).await?;
            tokio::fs::rename(tmp, dir.join(rel))
                .await
                .map_err(|e| io_err(e, format!("{key}: rename into place")))
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(tmp).await;
        }
        result
    }

    /// A new temp file; `create_new` never opens an existing file or follows a link.
    async fn create_temp(&self, tmp: &Path) -> Result<tokio::fs::File> {
        tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .await
            .map_err(|e| io_err(e, "create temp file"))
    }

    async fn write_reader(&self, bucket: &str, key: &str, mut reader: BoxReader) -> Result<u64> {
        let (dir, rel) = self.object_rel(bucket, key).await?;
        let tmp = self.temp_path();
        let result = async {
            let mut f = self.create_temp(&tmp).await?;
            let n = tokio::io::copy(&mut reader, &mut f)
                .await
                .map_err(|e| io_err(e, "write"))?;
            f.sync_all().await.map_err(|e| io_err(e, "sync"))?;
            Ok::<_, Error>(n)
        }
        .await;
        match result {
            Ok(n) => {
                self.commit(&tmp, &dir, &rel, key).await?;
                Ok(n)
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(e)
            }
        }
    }

    /// All keys under `prefix` in the bucket, sorted. Links are no objects: a linked
    /// file is not listed, a linked directory not walked into (the directory entries'
    /// types are those of the entries themselves, never of what they point at).
    async fn keys(&self, bucket: &str, prefix: &str) -> Result<Vec<ObjectMeta>> {
        let dir = self.existing_bucket(bucket).await?;
        // Start at the deepest directory the prefix names, to avoid walking everything.
        let start_rel = match prefix.rfind('/') {
            Some(i) => &prefix[..i],
            None => "",
        };
        let start = if start_rel.is_empty() {
            dir.clone()
        } else {
            let Some(p) = dir_path(start_rel) else {
                return Ok(Vec::new());
            };
            // The start directory and those above it are checked like an object's.
            match lstat_object(&dir, &p, prefix).await {
                Ok(Some(md)) if md.is_dir() => dir.join(p),
                Ok(_) => return Ok(Vec::new()),
                Err(e) => {
                    tracing::warn!(bucket, prefix, error = %e, "local store: a listing stops at a symbolic link");
                    return Ok(Vec::new());
                }
            }
        };
        let mut out = Vec::new();
        let mut stack = vec![start];
        while let Some(d) = stack.pop() {
            let mut rd = match tokio::fs::read_dir(&d).await {
                Ok(rd) => rd,
                Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::NotADirectory) => continue,
                Err(e) => return Err(io_err(e, "read directory")),
            };
            while let Some(entry) = rd
                .next_entry()
                .await
                .map_err(|e| io_err(e, "read directory"))?
            {
                let path = entry.path();
                let ft = entry.file_type().await.map_err(|e| io_err(e, "stat"))?;
                let Ok(rel) = path.strip_prefix(&dir) else {
                    continue;
                };
                if ft.is_symlink() {
                    tracing::warn!(bucket, path = %rel.display(), "local store: a symbolic link in a bucket is not listed");
                    continue;
                }
                let Some(key) = decode_rel(rel, ft.is_file()) else {
                    continue;
                };
                if ft.is_dir() {
                    let as_prefix = format!("{key}/");
                    if as_prefix.starts_with(prefix) || prefix.starts_with(&as_prefix) {
                        stack.push(path);
                    }
                } else if ft.is_file() && key.starts_with(prefix) {
                    let md = entry.metadata().await.map_err(|e| io_err(e, "stat"))?;
                    out.push(meta_of(key, &md));
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Removes empty directories from `path`'s parent up to (not including) the bucket.
    async fn prune_dirs(&self, bucket_dir: &Path, path: &Path) {
        let mut cur = path.parent();
        while let Some(d) = cur {
            if d == bucket_dir || !d.starts_with(bucket_dir) {
                break;
            }
            if tokio::fs::remove_dir(d).await.is_err() {
                break;
            }
            cur = d.parent();
        }
    }
}

#[async_trait]
impl ObjectStore for LocalStore {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    fn retry_stats(&self) -> &RetryStats {
        &self.stats
    }

    async fn ensure_bucket(&self, bucket: &str, _opts: &BucketOptions) -> Result<BucketReport> {
        let dir = self.bucket_dir(bucket)?;
        // `mkdir` never follows a link: an existing one (even dangling) is AlreadyExists,
        // and `existing_bucket` refuses it.
        match tokio::fs::create_dir(&dir).await {
            Ok(()) => Ok(BucketReport {
                created: true,
                warnings: vec![],
            }),
            Err(e) if e.kind() == IoKind::AlreadyExists => {
                self.existing_bucket(bucket).await?;
                Ok(BucketReport::default())
            }
            Err(e) => Err(io_err(e, bucket)),
        }
    }

    async fn delete_bucket(&self, bucket: &str, empty_first: bool) -> Result<()> {
        let dir = match self.existing_bucket(bucket).await {
            Ok(d) => d,
            Err(Error::BucketNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        // `remove_dir_all` removes links inside the bucket without following them.
        if empty_first {
            tokio::fs::remove_dir_all(&dir)
                .await
                .map_err(|e| io_err(e, bucket))
        } else if self.keys(bucket, "").await?.is_empty() {
            // Only empty directories remain; remove them.
            tokio::fs::remove_dir_all(&dir)
                .await
                .map_err(|e| io_err(e, bucket))
        } else {
            Err(Error::new(
                ErrorKind::Conflict,
                format!("bucket {bucket} is not empty"),
            ))
        }
    }

    async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<()> {
        self.write_reader(bucket, key, Box::pin(std::io::Cursor::new(data)))
            .await
            .map(|_| ())
    }

    async fn put_reader(&self, bucket: &str, key: &str, reader: BoxReader) -> Result<u64> {
        self.write_reader(bucket, key, reader).await
    }

    async fn get(&self, bucket: &str, key: &str) -> Result<ByteStream> {
        let f = self.open_object(bucket, key).await?;
        Ok(ReaderStream::with_capacity(f, 256 * 1024)
            .map(|r| r.map_err(|e| io_err(e, "read")))
            .boxed())
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let (dir, rel) = self.object_rel(bucket, key).await?;
        let md = lstat_object(&dir, &rel, key)
            .await?
            .filter(|md| md.is_file())
            .ok_or_else(|| Error::new(ErrorKind::NotFound, key.to_string()))?;
        Ok(meta_of(key.to_string(), &md))
    }

    fn list<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        delimiter: Option<&'a str>,
    ) -> BoxStream<'a, Result<ListEntry>> {
        stream::once(async move { self.keys(bucket, prefix).await })
            .flat_map(move |r| match r {
                Err(e) => stream::iter(vec![Err(e)]).boxed(),
                Ok(metas) => {
                    let mut last = None;
                    let entries: Vec<Result<ListEntry>> = metas
                        .into_iter()
                        .filter_map(|m| match delimiter {
                            Some(d) if !d.is_empty() => roll_up(prefix, d, &mut last, m),
                            _ => Some(ListEntry::Object(m)),
                        })
                        .map(Ok)
                        .collect();
                    stream::iter(entries).boxed()
                }
            })
            .boxed()
    }

    async fn delete_many(&self, bucket: &str, keys: &[String]) -> Result<DeleteReport> {
        let dir = self.existing_bucket(bucket).await?;
        let mut report = DeleteReport::default();
        for key in keys {
            let rel = checked_key(key)?;
            let path = dir.join(&rel);
            // A key below a linked directory is refused; a link at the key itself is
            // removed (`unlink` never follows it), its target untouched.
            if !dirs_without_links(&dir, &rel, key).await? {
                report.deleted += 1;
                report.requests += 1;
                continue;
            }
            match tokio::fs::remove_file(&path).await {
                Ok(()) => self.prune_dirs(&dir, &path).await,
                Err(e) if e.kind() == IoKind::NotFound => {}
                Err(e) => return Err(io_err(e, key)),
            }
            report.deleted += 1;
            report.requests += 1;
        }
        Ok(report)
    }

    async fn copy(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
    ) -> Result<()> {
        let mut src = self.open_object(src_bucket, src_key).await?;
        let (dir, rel) = self.object_rel(dst_bucket, dst_key).await?;
        let tmp = self.temp_path();
        let copied = async {
            let mut f = self.create_temp(&tmp).await?;
            tokio::io::copy(&mut src, &mut f)
                .await
                .map_err(|e| io_err(e, src_key))?;
            f.sync_all().await.map_err(|e| io_err(e, "sync"))
        }
        .await;
        if let Err(e) = copied {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        self.commit(&tmp, &dir, &rel, dst_key).await
    }

    fn delete_batch_size(&self) -> usize {
        self.delete_batch
    }
}

/// Suffix of every object file. Segments are stored with `%` escaped as `%25`, so no
/// escaped name ends in `%f`: object files and directories never collide, and key `a`
/// can live next to key `a/b` as on every cloud store.
const OBJECT_SUFFIX: &str = "%f";

/// The relative path of a key, refusing anything that could leave the bucket.
fn checked_key(key: &str) -> Result<PathBuf> {
    let bad = key.is_empty()
        || key.contains('\0')
        || key.contains('\\')
        || key.starts_with('/')
        || key
            .split('/')
            .any(|seg| seg.is_empty() || seg == "." || seg == "..");
    if bad {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "key {key:?} is not allowed by the local provider (empty, `.`/`..` segment, or absolute)"
            ),
        ));
    }
    let segs: Vec<&str> = key.split('/').collect();
    let last = segs.len() - 1;
    Ok(segs
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            let e = seg.replace('%', "%25");
            if i == last {
                format!("{e}{OBJECT_SUFFIX}")
            } else {
                e
            }
        })
        .collect())
}

/// The refusal of a path through (or of) a symbolic link below a bucket directory.
fn link_refused(key: &str, at: &Path) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "{key}: {} below the bucket directory is a symbolic link, and the local provider \
             follows no link",
            at.display()
        ),
    )
}

/// Whether every directory of `rel` (all components but the last) below the bucket
/// directory `dir` is a real directory: `Ok(false)` when one is missing or a file, an
/// error when one is a link. Each is checked with `lstat`, top down.
async fn dirs_without_links(dir: &Path, rel: &Path, key: &str) -> Result<bool> {
    let Some(parent) = rel.parent() else {
        return Ok(true);
    };
    let mut cur = dir.to_path_buf();
    for c in parent.components() {
        cur.push(c);
        match tokio::fs::symlink_metadata(&cur).await {
            Ok(md) if md.is_symlink() => {
                return Err(link_refused(key, cur.strip_prefix(dir).unwrap_or(&cur)));
            }
            Ok(md) if md.is_dir() => {}
            Ok(_) => return Ok(false),
            Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::NotADirectory) => {
                return Ok(false);
            }
            Err(e) => return Err(io_err(e, key)),
        }
    }
    Ok(true)
}

/// What is at `rel` below the bucket directory `dir`, by `lstat`, reached through real
/// directories only: `None` when absent, an error when it or a directory above it is a
/// link.
async fn lstat_object(dir: &Path, rel: &Path, key: &str) -> Result<Option<std::fs::Metadata>> {
    if !dirs_without_links(dir, rel, key).await? {
        return Ok(None);
    }
    match tokio::fs::symlink_metadata(dir.join(rel)).await {
        Ok(md) if md.is_symlink() => Err(link_refused(key, rel)),
        Ok(md) => Ok(Some(md)),
        Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::NotADirectory) => Ok(None),
        Err(e) => Err(io_err(e, key)),
    }
}

/// Creates the directories of `rel` below the bucket directory `dir` one at a time,
/// checking each with `lstat` after `mkdir` (which never follows a link): a link or a
/// file among them refuses the write.
async fn make_dirs(dir: &Path, rel: &Path, key: &str) -> Result<()> {
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    let mut cur = dir.to_path_buf();
    for c in parent.components() {
        cur.push(c);
        let md = match tokio::fs::symlink_metadata(&cur).await {
            Ok(md) => md,
            Err(e) if e.kind() == IoKind::NotFound => {
                match tokio::fs::create_dir(&cur).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == IoKind::AlreadyExists => {}
                    Err(e) => return Err(io_err(e, format!("{key}: create directory"))),
                }
                tokio::fs::symlink_metadata(&cur)
                    .await
                    .map_err(|e| io_err(e, format!("{key}: create directory")))?
            }
            Err(e) => return Err(io_err(e, format!("{key}: create directory"))),
        };
        let at = cur.strip_prefix(dir).unwrap_or(&cur);
        if md.is_symlink() {
            return Err(link_refused(key, at));
        }
        if !md.is_dir() {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{key}: {} is a file, not a directory", at.display()),
            ));
        }
    }
    Ok(())
}

/// Whether the opened file is the one `lstat` found (same device and inode).
#[cfg(unix)]
fn same_file(found: &std::fs::Metadata, opened: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    found.dev() == opened.dev() && found.ino() == opened.ino()
}

#[cfg(not(unix))]
fn same_file(_found: &std::fs::Metadata, _opened: &std::fs::Metadata) -> bool {
    true
}

/// Whether the kernel's path of the open file is `expected` (Linux's
/// `/proc/self/fd/N`, links resolved). Where `/proc` cannot be read the check is
/// skipped: [`same_file`] still holds.
#[cfg(target_os = "linux")]
fn opened_at(f: &tokio::fs::File, expected: &Path) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let Ok(actual) = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())) else {
        return true;
    };
    // A file deleted since it was opened is shown with this suffix; where it was is
    // still what counts.
    let actual = actual.as_os_str().as_bytes();
    let actual = actual.strip_suffix(b" (deleted)").unwrap_or(actual);
    actual == expected.as_os_str().as_bytes()
}

#[cfg(not(target_os = "linux"))]
fn opened_at(_f: &tokio::fs::File, _expected: &Path) -> bool {
    true
}

/// The directory path of a key prefix made of whole segments (`a/b` → `a/b`).
fn dir_path(prefix_dirs: &str) -> Option<PathBuf> {
    if prefix_dirs
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == ".." || seg.contains('\\'))
    {
        return None;
    }
    Some(
        prefix_dirs
            .split('/')
            .map(|seg| seg.replace('%', "%25"))
            .collect(),
    )
}

/// The key of a file path relative to the bucket, or `None` for non-object files.
fn decode_rel(rel: &Path, is_file: bool) -> Option<String> {
    let mut segs = Vec::new();
    for c in rel.components() {
        segs.push(c.as_os_str().to_str()?.to_string());
    }
    if is_file {
        let last = segs.last_mut()?;
        let stripped = last.strip_suffix(OBJECT_SUFFIX)?.to_string();
        *last = stripped;
    }
    Some(
        segs.iter()
            .map(|s| s.replace("%25", "%"))
            .collect::<Vec<_>>()
            .join("/"),
    )
}

fn meta_of(key: String, md: &std::fs::Metadata) -> ObjectMeta {
    ObjectMeta {
        key,
        size: md.len(),
        last_modified: md.modified().ok().map(DateTime::<Utc>::from),
        etag: None,
    }
}

fn io_err(e: std::io::Error, what: impl std::fmt::Display) -> Error {
    let kind = match e.kind() {
        IoKind::NotFound => ErrorKind::NotFound,
        IoKind::PermissionDenied => ErrorKind::Unauthorized,
        IoKind::AlreadyExists => ErrorKind::Conflict,
        IoKind::StorageFull | IoKind::QuotaExceeded => ErrorKind::QuotaExceeded,
        IoKind::Interrupted | IoKind::TimedOut | IoKind::WouldBlock => ErrorKind::Transient,
        IoKind::InvalidInput | IoKind::InvalidFilename => ErrorKind::Invalid,
        _ => ErrorKind::Transient,
    };
    Error::new(kind, format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the size of every `delete_many` round the trait's `delete_prefix` makes
    /// on the local store it wraps.
    #[derive(Debug)]
    struct Rounds {
        inner: LocalStore,
        sizes: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl ObjectStore for Rounds {
        fn kind(&self) -> ProviderKind {
            self.inner.kind()
        }
        fn retry_stats(&self) -> &RetryStats {
            self.inner.retry_stats()
        }
        async fn ensure_bucket(&self, b: &str, o: &BucketOptions) -> Result<BucketReport> {
            self.inner.ensure_bucket(b, o).await
        }
        async fn delete_bucket(&self, b: &str, empty_first: bool) -> Result<()> {
            self.inner.delete_bucket(b, empty_first).await
        }
        async fn put(&self, b: &str, k: &str, data: Bytes) -> Result<()> {
            self.inner.put(b, k, data).await
        }
        async fn put_reader(&self, b: &str, k: &str, r: BoxReader) -> Result<u64> {
            self.inner.put_reader(b, k, r).await
        }
        async fn get(&self, b: &str, k: &str) -> Result<ByteStream> {
            self.inner.get(b, k).await
        }
        async fn head(&self, b: &str, k: &str) -> Result<ObjectMeta> {
            self.inner.head(b, k).await
        }
        fn list<'a>(
            &'a self,
            b: &'a str,
            p: &'a str,
            d: Option<&'a str>,
        ) -> BoxStream<'a, Result<ListEntry>> {
            self.inner.list(b, p, d)
        }
        async fn delete_many(&self, b: &str, keys: &[String]) -> Result<DeleteReport> {
            self.sizes.lock().unwrap().push(keys.len());
            self.inner.delete_many(b, keys).await
        }
        async fn copy(&self, sb: &str, sk: &str, db: &str, dk: &str) -> Result<()> {
            self.inner.copy(sb, sk, db, dk).await
        }
        fn delete_batch_size(&self) -> usize {
            self.inner.delete_batch_size()
        }
    }

    #[tokio::test]
    async fn prefix_delete_goes_in_rounds_of_the_configured_batch_size() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            delete_batch_size: 3,
            ..StoreOptions::default()
        };
        let store = Rounds {
            inner: LocalStore::with_options(dir.path(), &opts).unwrap(),
            sizes: Mutex::new(Vec::new()),
        };
        assert_eq!(store.delete_batch_size(), 3);
        store
            .ensure_bucket("b", &BucketOptions::default())
            .await
            .unwrap();
        for i in 0..7 {
            store
                .put("b", &format!("p/k{i}"), Bytes::from_static(b"x"))
                .await
                .unwrap();
        }
        store
            .put("b", "q/kept", Bytes::from_static(b"x"))
            .await
            .unwrap();
        let report = store.delete_prefix("b", "p/").await.unwrap();
        assert_eq!(report.deleted, 7);
        assert_eq!(*store.sizes.lock().unwrap(), vec![3, 3, 1]);
        let left: Vec<String> = store
            .list("b", "", None)
            .map(|e| match e.unwrap() {
                ListEntry::Object(m) => m.key,
                ListEntry::Prefix(p) => p,
            })
            .collect()
            .await;
        assert_eq!(left, vec!["q/kept".to_string()]);

        // The defaults keep the cloud limit; a zero batch size still deletes.
        assert_eq!(
            LocalStore::new(dir.path()).unwrap().delete_batch_size(),
            1000
        );
        let zero = StoreOptions {
            delete_batch_size: 0,
            ..StoreOptions::default()
        };
        assert_eq!(
            LocalStore::with_options(dir.path(), &zero)
                .unwrap()
                .delete_batch_size(),
            1
        );
    }

    /// The check that closes the window between `lstat` and `open`: a file opened
    /// through a directory swapped for a link is not at the key's path.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn an_opened_file_is_checked_against_the_keys_real_path() {
        let tmp = tempfile::tempdir().unwrap();
        let store = LocalStore::new(tmp.path().join("data")).unwrap();
        store
            .ensure_bucket("b", &BucketOptions::default())
            .await
            .unwrap();
        store
            .put("b", "d/k", Bytes::from_static(b"v"))
            .await
            .unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("k%f"), b"secret").unwrap();
        let expected = store.real_root.join("b/d/k%f");
        let f = tokio::fs::File::open(tmp.path().join("data/b/d/k%f"))
            .await
            .unwrap();
        assert!(opened_at(&f, &expected));
        // `d` swapped for a link after the checks, before the open.
        std::fs::remove_dir_all(tmp.path().join("data/b/d")).unwrap();
        std::os::unix::fs::symlink(&outside, tmp.path().join("data/b/d")).unwrap();
        let f = tokio::fs::File::open(tmp.path().join("data/b/d/k%f"))
            .await
            .unwrap();
        assert!(!opened_at(&f, &expected));
        let e = store.get("b", "d/k").await.err().expect("refused");
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    }

    #[test]
    fn escaping_keys_refused() {
        for k in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "",
            "a/./b",
            "a\\b",
            "a/",
        ] {
            assert_eq!(
                checked_key(k).unwrap_err().kind(),
                ErrorKind::Invalid,
                "{k}"
            );
        }
        let p = checked_key("a b/ü+%/c%").unwrap();
        assert_eq!(p, PathBuf::from("a b/ü+%25/c%25%f"));
        assert_eq!(decode_rel(&p, true).as_deref(), Some("a b/ü+%/c%"));
        assert_eq!(
            decode_rel(Path::new("x/y"), true),
            None,
            "not an object file"
        );
        assert_eq!(
            decode_rel(Path::new("x%25f"), false).as_deref(),
            Some("x%f")
        );
    }
}

//! The `local` provider: buckets are directories under a root given by the process
//! (`--data-dir`), objects are files. Writes go to a temp file under `<root>/.tmp` and
//! are renamed into place, so a reader never sees half an object. Keys that would
//! leave the bucket directory (`..`, absolute paths, empty segments) are refused.

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
        Ok(LocalStore {
            root,
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

    async fn existing_bucket(&self, bucket: &str) -> Result<PathBuf> {
        let dir = self.bucket_dir(bucket)?;
        match tokio::fs::metadata(&dir).await {
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

    async fn object_path(&self, bucket: &str, key: &str) -> Result<PathBuf> {
        let dir = self.existing_bucket(bucket).await?;
        Ok(dir.join(checked_key(key)?))
    }

    fn temp_path(&self) -> PathBuf {
        self.root
            .join(".tmp")
            .join(uuid::Uuid::new_v4().to_string())
    }

    /// Renames a finished temp file to its key, creating parent directories.
    async fn commit(&self, tmp: &Path, dest: &Path) -> Result<()> {
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_err(e, "create parent directory"))?;
        }
        if let Err(e) = tokio::fs::rename(tmp, dest).await {
            let _ = tokio::fs::remove_file(tmp).await;
            return Err(io_err(e, "rename into place"));
        }
        Ok(())
    }

    async fn write_reader(&self, bucket: &str, key: &str, mut reader: BoxReader) -> Result<u64> {
        let dest = self.object_path(bucket, key).await?;
        let tmp = self.temp_path();
        let result = async {
            let mut f = tokio::fs::File::create(&tmp)
                .await
                .map_err(|e| io_err(e, "create temp file"))?;
            let n = tokio::io::copy(&mut reader, &mut f)
                .await
                .map_err(|e| io_err(e, "write"))?;
            f.sync_all().await.map_err(|e| io_err(e, "sync"))?;
            Ok::<_, Error>(n)
        }
        .await;
        match result {
            Ok(n) => {
                self.commit(&tmp, &dest).await?;
                Ok(n)
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(e)
            }
        }
    }

    /// All keys under `prefix` in the bucket, sorted.
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
            match dir_path(start_rel) {
                Some(p) => dir.join(p),
                None => return Ok(Vec::new()),
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
        let path = self.object_path(bucket, key).await?;
        let f = tokio::fs::File::open(&path)
            .await
            .map_err(|e| io_err(e, key))?;
        let md = f.metadata().await.map_err(|e| io_err(e, key))?;
        if !md.is_file() {
            return Err(Error::new(ErrorKind::NotFound, key.to_string()));
        }
        Ok(ReaderStream::with_capacity(f, 256 * 1024)
            .map(|r| r.map_err(|e| io_err(e, "read")))
            .boxed())
    }

    async fn head(&self, bucket: &str, key: &str) -> Result<ObjectMeta> {
        let path = self.object_path(bucket, key).await?;
        let md = tokio::fs::metadata(&path)
            .await
            .map_err(|e| io_err(e, key))?;
        if !md.is_file() {
            return Err(Error::new(ErrorKind::NotFound, key.to_string()));
        }
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
            let path = dir.join(checked_key(key)?);
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
        let src = self.object_path(src_bucket, src_key).await?;
        let dst = self.object_path(dst_bucket, dst_key).await?;
        let tmp = self.temp_path();
        if let Err(e) = tokio::fs::copy(&src, &tmp).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(io_err(e, src_key));
        }
        self.commit(&tmp, &dst).await
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

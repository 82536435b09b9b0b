//! The copy engine: copies the manifest's pending objects with at most `parallelism`
//! requests in flight, server-side when the plan says so (no byte through this process)
//! and streamed otherwise (memory bounded by the destination's part size), records each
//! result in the manifest and persists the manifest regularly. The first failure stops
//! new copies; those in flight finish and are recorded before the error is returned, so
//! a re-run never copies an object twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary_providers::{BoxReader, Error as StoreError, ObjectStore};

use super::MigrateError;
use super::manifest::{Manifest, ManifestObject, ObjectState, manifest_key};
use super::plan::{CopyMode, already_copied, pending};
use super::progress::{CopyCounters, CopyProgress, Output};
use granary_runtime::failpoints;

/// Failpoint before each object's copy request.
pub const FAILPOINT_COPY: &str = "migrate.copy.object";

/// Persist the manifest after this many results (at least), or this long after the
/// last save (at least).
const SAVE_EVERY_OBJECTS: usize = 500;
const SAVE_EVERY: Duration = Duration::from_secs(5);
/// At most this many saves a pass are triggered by the count of results, whatever the
/// size: each save writes the whole manifest, so a fixed count would make the bytes
/// written grow with the square of the number of objects.
const SAVES_PER_PASS: usize = 16;
/// A save triggered by time waits at least this many times as long as the last save
/// took, so the bookkeeping stays a small share of the copy's time.
const SAVE_TIME_SHARE: u32 = 20;

/// Whether the copy loop writes the manifest now: after `unsaved` results of a pass of
/// `pass_len` objects, `since_last` after the last save, which took `last_took`.
fn save_due(unsaved: usize, pass_len: usize, since_last: Duration, last_took: Duration) -> bool {
    let every = SAVE_EVERY_OBJECTS.max(pass_len / SAVES_PER_PASS);
    let wait = SAVE_EVERY.max(last_took * SAVE_TIME_SHARE);
    unsaved > 0 && (unsaved >= every || since_last >= wait)
}

/// The two stores of a migration and how objects travel between them.
#[derive(Clone)]
pub struct Endpoints {
    pub source: Arc<dyn ObjectStore>,
    pub destination: Arc<dyn ObjectStore>,
    pub mode: CopyMode,
    /// Whether etags can be compared across the two sides (same provider).
    pub compare_etags: bool,
}

/// What happened to one object.
enum Outcome {
    Copied {
        streamed_bytes: Option<u64>,
    },
    AlreadyPresent,
    NotFound,
    /// Not attempted: an earlier failure stopped the pass.
    Stopped,
}

impl Endpoints {
    /// Writes the manifest to the destination.
    pub async fn save(&self, manifest: &Manifest) -> Result<(), MigrateError> {
        let key = manifest_key(&manifest.destination.key_prefix, &manifest.source.bucket);
        self.destination
            .put(
                &manifest.destination.bucket,
                &key,
                Bytes::from(manifest.encode()),
            )
            .await?;
        Ok(())
    }

    /// Removes the manifest (a migration given up before it copied anything).
    pub async fn remove_manifest(&self, manifest: &Manifest) -> Result<(), MigrateError> {
        let key = manifest_key(&manifest.destination.key_prefix, &manifest.source.bucket);
        self.destination
            .delete_many(&manifest.destination.bucket, &[key])
            .await?;
        Ok(())
    }

    /// Reads the manifest back, `None` when there is none.
    pub async fn load(
        &self,
        destination_bucket: &str,
        destination_key_prefix: &str,
        source_bucket: &str,
    ) -> Result<Option<Manifest>, MigrateError> {
        let key = manifest_key(destination_key_prefix, source_bucket);
        match granary_providers::get_bytes(self.destination.as_ref(), destination_bucket, &key)
            .await
        {
            Ok(bytes) => Ok(Some(Manifest::decode(&bytes).map_err(|e| {
                MigrateError::Invalid(format!("{destination_bucket}/{key}: {e}"))
            })?)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Copies every pending object of `manifest`, recording results in it and what was
    /// done in `counters` (also when it fails), and reports the pass as a `pass` event.
    pub async fn copy_pending(
        &self,
        manifest: &mut Manifest,
        parallelism: usize,
        output: &Output,
        counters: &mut CopyCounters,
    ) -> Result<(), MigrateError> {
        let before = *counters;
        let result = self
            .copy_pass(manifest, parallelism, output, counters)
            .await;
        let mut pass = *counters;
        pass.subtract(&before);
        output.event(
            serde_json::json!({
                "event": "pass",
                "ok": result.is_ok(),
                "counters": pass,
            }),
            || {
                format!(
                    "copy pass: {} copy requests, {} already present, {} not found",
                    pass.copy_requests(),
                    pass.skipped_present,
                    pass.not_found
                )
            },
        );
        result
    }

    async fn copy_pass(
        &self,
        manifest: &mut Manifest,
        parallelism: usize,
        output: &Output,
        counters: &mut CopyCounters,
    ) -> Result<(), MigrateError> {
        let todo = pending(manifest);
        if todo.is_empty() {
            return Ok(());
        }
        // Before the first pass nothing of ours can be in the destination; from then on
        // a crash may have left copies the manifest does not know, so HEAD first.
        let check_destination = manifest.copy_passes > 0;
        manifest.copy_passes += 1;
        let started = Instant::now();
        self.save(manifest).await?;
        let mut last_took = started.elapsed();

        let pass_len = todo.len();
        let total_bytes = todo.iter().map(|i| manifest.objects[*i].size).sum();
        let mut progress = CopyProgress::new(output, todo.len() as u64, total_bytes);
        let stop = Arc::new(AtomicBool::new(false));
        let src_bucket = manifest.source.bucket.clone();
        let dst_bucket = manifest.destination.bucket.clone();
        let src_prefix = manifest.source.key_prefix.clone();
        let dst_prefix = manifest.destination.key_prefix.clone();
        let jobs: Vec<(usize, ManifestObject)> = todo
            .iter()
            .map(|i| (*i, manifest.objects[*i].clone()))
            .collect();
        let mut results = futures::stream::iter(jobs)
            .map(|(i, object)| {
                let stop = stop.clone();
                let src = (src_bucket.as_str(), format!("{src_prefix}{}", object.key));
                let dst = (dst_bucket.as_str(), format!("{dst_prefix}{}", object.key));
                async move {
                    let r = self
                        .copy_one(&object, src, dst, check_destination, &stop)
                        .await;
                    if r.is_err() {
                        stop.store(true, Ordering::Release);
                    }
                    (i, r)
                }
            })
            .buffer_unordered(parallelism.max(1));

        let mut first_error = None;
        let mut unsaved = 0usize;
        let mut last_save = Instant::now();
        while let Some((i, result)) = results.next().await {
            let object = &mut manifest.objects[i];
            match result {
                Ok(Outcome::Copied { streamed_bytes }) => {
                    object.state = ObjectState::Copied;
                    counters.bytes_copied += object.size;
                    match streamed_bytes {
                        Some(n) => {
                            counters.streamed_copies += 1;
                            counters.bytes_through_process += n;
                        }
                        None => counters.server_side_copies += 1,
                    }
                }
                Ok(Outcome::AlreadyPresent) => {
                    object.state = ObjectState::Copied;
                    counters.skipped_present += 1;
                }
                Ok(Outcome::NotFound) => {
                    object.state = ObjectState::NotFound;
                    counters.not_found += 1;
                }
                Ok(Outcome::Stopped) => continue,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            }
            progress.advance(object.size);
            unsaved += 1;
            if save_due(unsaved, pass_len, last_save.elapsed(), last_took) {
                // The copies in flight own their keys; only this loop touches the
                // manifest, so it can be written between two results.
                let started = Instant::now();
                self.save(manifest).await?;
                last_took = started.elapsed();
                unsaved = 0;
                last_save = Instant::now();
            }
        }
        drop(results);
        progress.finish();
        self.save(manifest).await?;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn copy_one(
        &self,
        object: &ManifestObject,
        (src_bucket, src_key): (&str, String),
        (dst_bucket, dst_key): (&str, String),
        check_destination: bool,
        stop: &AtomicBool,
    ) -> Result<Outcome, MigrateError> {
        if stop.load(Ordering::Acquire) {
            return Ok(Outcome::Stopped);
        }
        if check_destination {
            match self.destination.head(dst_bucket, &dst_key).await {
                Ok(meta) if already_copied(object, Some(&meta), self.compare_etags) => {
                    return Ok(Outcome::AlreadyPresent);
                }
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        failpoints::hit(FAILPOINT_COPY)?;
        match self.mode {
            CopyMode::ServerSide => {
                match self
                    .destination
                    .copy(src_bucket, &src_key, dst_bucket, &dst_key)
                    .await
                {
                    Ok(()) => Ok(Outcome::Copied {
                        streamed_bytes: None,
                    }),
                    Err(StoreError::NotFound(_)) => Ok(Outcome::NotFound),
                    Err(e) => Err(e.into()),
                }
            }
            CopyMode::Streaming => {
                let stream = match self.source.get(src_bucket, &src_key).await {
                    Ok(s) => s,
                    Err(StoreError::NotFound(_)) => return Ok(Outcome::NotFound),
                    Err(e) => return Err(e.into()),
                };
                let reader: BoxReader = Box::pin(tokio_util::io::StreamReader::new(
                    stream.map_err(std::io::Error::other),
                ));
                let n = self
                    .destination
                    .put_reader(dst_bucket, &dst_key, reader)
                    .await?;
                Ok(Outcome::Copied {
                    streamed_bytes: Some(n),
                })
            }
        }
    }

    /// Removes destination copies of objects deleted from the source after they were
    /// copied (relative keys).
    pub async fn remove_stale(
        &self,
        manifest: &Manifest,
        relative_keys: &[String],
    ) -> Result<(), MigrateError> {
        if relative_keys.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = relative_keys
            .iter()
            .map(|k| format!("{}{k}", manifest.destination.key_prefix))
            .collect();
        self.destination
            .delete_many(&manifest.destination.bucket, &keys)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn small_passes_save_every_500_results_or_5_seconds() {
        assert!(!save_due(499, 10_000, MS, MS));
        assert!(save_due(500, 8_000, MS, MS));
        assert!(save_due(1, 10, SAVE_EVERY, MS));
        assert!(!save_due(0, 10, SAVE_EVERY * 10, MS), "nothing new to save");
    }

    #[test]
    fn big_passes_save_a_bounded_number_of_times() {
        // 100,000 objects: a save every 6,250 results, 16 in the pass, where a fixed 500
        // made 200 saves of the whole manifest (the bytes written grew with n²).
        let n = 100_000;
        assert!(!save_due(6_249, n, MS, MS));
        assert!(save_due(6_250, n, MS, MS));
    }

    #[test]
    fn a_slow_save_spaces_the_timed_saves_out() {
        let took = Duration::from_millis(800);
        assert!(!save_due(10, 100_000, Duration::from_secs(15), took));
        assert!(save_due(10, 100_000, took * SAVE_TIME_SHARE, took));
    }
}

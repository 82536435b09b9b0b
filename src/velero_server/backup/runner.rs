//! One backup run (module docs of [`super`]): the existence check, the cluster reads
//! the filters need, collection with the tarball streaming to the store, then the files.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::actions::{self, ActionContext};
use super::catalog::Catalog;
use super::cluster;
use super::collect::{Collection, WriteJob};
use super::filters::{
    EXCLUDE_FROM_BACKUP_LABEL, IncludesExcludes, LiveNamespace, ResourceFilter, initially_tracked,
};
use super::logbook::{Logbook, Subject};
use super::persist::{self, Files};
use super::pipe::{PipeWriter, pipe};
use super::selectors::labels_of;
use super::{BackupError, BackupOutcome, BackupProgress, BackupRequest, BackupResultPhase};
use crate::api::velero::{BACKUP_VERSION, Backup};
use crate::velero::FORMAT_VERSION_WITH_MANIFEST;
use crate::velero::archive::{ArchiveError, ArchiveWriter};
use crate::velero::files::{ResourceList, encode_backup_json, encode_logs};
use crate::velero::manifest::Manifest;
use crate::velero::resource::GroupResource;

/// Bytes of tarball in flight between the writer and the upload.
const PIPE_CAPACITY: usize = 1 << 20;
/// Items waiting for the tarball writer.
const WRITE_QUEUE: usize = 64;

/// The phase of a backup whose files were all stored: `PartiallyFailed` when any error
/// was counted (Velero: any error-level log line), else `Completed`.
pub(super) fn stored_phase(errors: u32) -> BackupResultPhase {
    if errors > 0 {
        BackupResultPhase::PartiallyFailed
    } else {
        BackupResultPhase::Completed
    }
}

/// The Backup as stored in `velero-backup.json`: the controller's copy with the final
/// phase (Velero's finalizer re-uploads it with this phase; Granary has no plugin
/// operations to wait for, so it writes it once), format version, counts and times.
pub(super) fn stored_backup(
    backup: &Backup,
    outcome: &BackupOutcome,
    start: DateTime<Utc>,
) -> Backup {
    let mut b = backup.clone();
    let status = b.status.get_or_insert_with(Default::default);
    status.phase = Some(outcome.phase.as_phase());
    status.version = Some(BACKUP_VERSION);
    status.format_version = Some(outcome.format_version.clone());
    status.start_timestamp.get_or_insert(start);
    status.completion_timestamp = Some(outcome.completion_timestamp);
    status.errors = Some(i64::from(outcome.errors));
    status.warnings = Some(i64::from(outcome.warnings));
    status.progress = Some(BackupProgress {
        total_items: Some(outcome.total_items as i64),
        items_backed_up: Some(outcome.items_backed_up as i64),
    });
    b
}

/// Writes the tarball from the jobs until the queue closes, counting items written.
fn write_tarball(
    out: PipeWriter,
    mut jobs: mpsc::Receiver<WriteJob>,
    now: DateTime<Utc>,
    log: Arc<Logbook>,
    written: Arc<AtomicU64>,
) -> Result<Manifest, ArchiveError> {
    let mut archive = ArchiveWriter::new(out, now)?;
    while let Some(job) = jobs.blocking_recv() {
        match archive.add_item(&job.group_resource, &job.preferred_version, &job.object) {
            Ok(_) => {
                written.fetch_add(1, Ordering::Relaxed);
            }
            // The pipe broke: the upload failed; stop.
            Err(ArchiveError::Io(e)) => return Err(ArchiveError::Io(e)),
            Err(e) => {
                let meta = |f: &str| {
                    job.object
                        .pointer(&format!("/metadata/{f}"))
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                let (ns, name, gr) = (
                    meta("namespace"),
                    meta("name"),
                    job.group_resource.to_string(),
                );
                log.error(
                    Subject::Item(&gr, &ns, &name),
                    &format!("error writing item to the backup: {e}"),
                );
            }
        }
    }
    let (pipe, manifest) = archive.finish()?;
    pipe.finish()?;
    Ok(manifest)
}

/// What the run learns from the cluster before collecting.
struct ClusterView {
    catalog: Catalog,
    /// Groups discovery could not read (warnings).
    undiscovered: Vec<String>,
    namespace_objects: Vec<serde_json::Value>,
    crds: HashSet<String>,
}

async fn read_cluster(client: &kube::Client) -> Result<ClusterView, kube::Error> {
    let (catalog, undiscovered) = cluster::discover(client).await?;
    let namespace_objects = match catalog.get(&GroupResource::new("", "namespaces")) {
        Some(res) => cluster::list_all(client, res).await?,
        None => Vec::new(),
    };
    let crds = match catalog.get(&GroupResource::new(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    )) {
        Some(res) => cluster::list_all(client, res)
            .await?
            .iter()
            .filter_map(|c| {
                c.pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .map(str::to_owned)
            })
            .collect(),
        None => HashSet::new(),
    };
    Ok(ClusterView {
        catalog,
        undiscovered,
        namespace_objects,
        crds,
    })
}

pub(super) async fn run(req: BackupRequest<'_>) -> Result<BackupOutcome, BackupError> {
    let backup = req.backup;
    let name = backup.metadata.name.clone().unwrap_or_default();
    let keys = req.layout.backup(&name).map_err(|e| BackupError::Invalid {
        field: "metadata.name".into(),
        message: e.to_string(),
    })?;
    let bucket = req.layout.bucket();
    match req.store.head(bucket, &keys.metadata()).await {
        Ok(_) => return Err(BackupError::AlreadyExists(name)),
        Err(granary_providers::Error::NotFound(_)) => {}
        Err(e) => return Err(BackupError::Store(e)),
    }
    let ns = backup.metadata.namespace.clone().unwrap_or_default();
    let log = Arc::new(Logbook::new(format!("{ns}/{name}"), req.now));
    log.info(Subject::Backup, "Starting backup");
    let view = read_cluster(&req.client).await.map_err(BackupError::Kube)?;
    for warning in &view.undiscovered {
        log.warn(Subject::Backup, warning);
    }
    let spec = &backup.spec;

    // Namespaces labelled velero.io/exclude-from-backup=true are excluded (Velero adds
    // them to the excludes when it prepares the request). As in Velero, a non-empty
    // exclude list means the backup no longer covers "every namespace", so with
    // includeClusterResources unset it no longer collects cluster-scoped resources.
    let live: Vec<LiveNamespace> = view
        .namespace_objects
        .iter()
        .map(|o| LiveNamespace {
            name: o
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_owned(),
            labels: labels_of(o),
            active: o.pointer("/status/phase").and_then(|p| p.as_str()) == Some("Active"),
        })
        .collect();
    let mut excludes = spec.excluded_namespaces.clone().unwrap_or_default();
    excludes.extend(
        live.iter()
            .filter(|n| n.labels.get(EXCLUDE_FROM_BACKUP_LABEL).map(String::as_str) == Some("true"))
            .map(|n| n.name.clone()),
    );
    let includes = spec.included_namespaces.clone().unwrap_or_default();
    let namespaces = IncludesExcludes::new(includes.clone(), excludes);
    let resources = ResourceFilter::new(spec, &view.catalog, &namespaces);
    // Velero checks the included namespaces exist when it collects Namespace objects.
    let check_included = resources.should_include("namespaces", false);
    for ns in includes
        .iter()
        .filter(|n| check_included && !n.contains('*'))
    {
        if !live.iter().any(|l| &l.name == ns) {
            log.error(
                Subject::Backup,
                &format!(
                    "fail to get the namespace {ns} specified in backup.Spec.IncludedNamespaces"
                ),
            );
        }
    }
    let or_selectors = spec.or_label_selectors.clone().unwrap_or_default();
    let tracked: BTreeSet<String> = initially_tracked(
        &live,
        &namespaces,
        spec.label_selector.as_ref(),
        &or_selectors,
    )
    .into_iter()
    .collect();

    let total = AtomicU64::new(0);
    let written = Arc::new(AtomicU64::new(0));
    let (job_tx, job_rx) = mpsc::channel::<WriteJob>(WRITE_QUEUE);
    let (pipe_w, pipe_r) = pipe(PIPE_CAPACITY);
    let writer = {
        let (log, written, now) = (Arc::clone(&log), Arc::clone(&written), req.now);
        tokio::task::spawn_blocking(move || write_tarball(pipe_w, job_rx, now, log, written))
    };
    let collection = Collection {
        spec,
        ctx: ActionContext {
            client: req.client.clone(),
            catalog: view.catalog,
            crds: view.crds,
        },
        actions: actions::builtin(),
        namespaces,
        resources,
        live_namespaces: live.iter().map(|n| n.name.clone()).collect(),
        namespace_objects: view.namespace_objects,
        tracked: Mutex::new(tracked),
        seen: Mutex::new(HashSet::new()),
        log: &log,
        jobs: job_tx,
        total: &total,
        stopped: AtomicBool::new(false),
        page_size: req.page_size,
        workers: req.workers.max(1),
    };
    let tar_key = keys.contents();
    let upload = req.store.put_reader(bucket, &tar_key, Box::pin(pipe_r));
    let collect = async move {
        collection.run().await;
        // Dropping the collection closes the job queue: the writer finishes the tarball.
    };
    let report = || BackupProgress {
        total_items: Some(total.load(Ordering::Relaxed) as i64),
        items_backed_up: Some(written.load(Ordering::Relaxed) as i64),
    };
    let work = async { tokio::join!(upload, collect).0 };
    tokio::pin!(work);
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let uploaded = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = ticker.tick() => (req.progress)(report()),
        }
    };
    let written_tarball = match writer.await {
        Ok(r) => r,
        Err(e) => Err(ArchiveError::Io(std::io::Error::other(format!(
            "tarball writer panicked: {e}"
        )))),
    };
    let items = written.load(Ordering::Relaxed);
    let mut tarball_bytes = 0;
    let failure = match (uploaded, written_tarball) {
        (Ok(bytes), Ok(manifest)) => {
            tarball_bytes = bytes;
            Ok(manifest)
        }
        (Err(e), _) => Err(format!("error uploading {tar_key} to object storage: {e}")),
        (Ok(_), Err(e)) => Err(format!("error writing the backup tarball: {e}")),
    };
    let manifest = match failure {
        Ok(m) => m,
        Err(reason) => return Ok(fail(&req, &keys, &log, reason, items).await),
    };

    log.info(
        Subject::Backup,
        &format!("Backed up a total of {items} items"),
    );
    let (errors, warnings) = log.counts();
    let mut outcome = BackupOutcome {
        phase: stored_phase(errors),
        errors,
        warnings,
        total_items: items,
        items_backed_up: items,
        failure_reason: None,
        format_version: FORMAT_VERSION_WITH_MANIFEST.to_owned(),
        completion_timestamp: log.now(),
        tarball_bytes,
    };
    let stored = stored_backup(backup, &outcome, req.now);
    log.info(
        Subject::Backup,
        &format!("Backup completed with phase {}", outcome.phase.as_phase()),
    );
    let (lines, results) = log.take();
    let files = Files {
        manifest: manifest.to_gz_bytes(),
        resource_list: ResourceList::from_manifest(&manifest).to_gz_bytes(),
        results: results.to_gz_bytes(),
        logs: encode_logs(&lines),
        backup_json: encode_backup_json(&stored),
    };
    if let Err(reason) = persist::put_files(req.store, bucket, &keys, files).await {
        tracing::error!(backup = %format!("{ns}/{name}"), "{reason}");
        outcome.phase = BackupResultPhase::Failed;
        outcome.errors += 1;
        outcome.failure_reason = Some(reason);
    }
    (req.progress)(BackupProgress {
        total_items: Some(items as i64),
        items_backed_up: Some(items as i64),
    });
    Ok(outcome)
}

/// The store failed while the tarball was written: delete what was written, keep the
/// log if the store takes it, and report `Failed` (no `velero-backup.json` exists).
async fn fail(
    req: &BackupRequest<'_>,
    keys: &crate::velero::layout::BackupKeys,
    log: &Logbook,
    reason: String,
    items: u64,
) -> BackupOutcome {
    log.error(Subject::Backup, &reason);
    let bucket = req.layout.bucket();
    persist::clean_up(req.store, bucket, keys).await;
    let (errors, warnings) = log.counts();
    let completion_timestamp = log.now();
    let (lines, _) = log.take();
    persist::put_log(req.store, bucket, keys, encode_logs(&lines)).await;
    (req.progress)(BackupProgress {
        total_items: Some(items as i64),
        items_backed_up: Some(items as i64),
    });
    BackupOutcome {
        phase: BackupResultPhase::Failed,
        errors,
        warnings,
        total_items: items,
        items_backed_up: items,
        failure_reason: Some(reason),
        format_version: FORMAT_VERSION_WITH_MANIFEST.to_owned(),
        completion_timestamp,
        tarball_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::velero::{BackupPhase, BackupSpec};

    #[test]
    fn any_error_makes_a_stored_backup_partially_failed() {
        assert_eq!(stored_phase(0), BackupResultPhase::Completed);
        assert_eq!(stored_phase(1), BackupResultPhase::PartiallyFailed);
    }

    #[test]
    fn the_stored_backup_carries_the_outcome() {
        let start = DateTime::parse_from_rfc3339("2026-11-24T01:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let outcome = BackupOutcome {
            phase: BackupResultPhase::PartiallyFailed,
            errors: 2,
            warnings: 1,
            total_items: 7,
            items_backed_up: 7,
            failure_reason: None,
            format_version: "1.2.0".into(),
            completion_timestamp: start + chrono::TimeDelta::seconds(5),
            tarball_bytes: 1,
        };
        let b = stored_backup(&Backup::new("b", BackupSpec::default()), &outcome, start);
        let s = b.status.expect("status");
        assert_eq!(s.phase, Some(BackupPhase::PartiallyFailed));
        assert_eq!(s.format_version.as_deref(), Some("1.2.0"));
        assert_eq!(s.version, Some(1));
        assert_eq!(s.start_timestamp, Some(start));
        assert_eq!(s.errors, Some(2));
        assert_eq!(s.progress.and_then(|p| p.items_backed_up), Some(7));
    }
}

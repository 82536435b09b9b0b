//! The `download-request` controller: a DownloadRequest gets a URL for the file its
//! target names ([`super::download::target_key`]), `phase: Processed` and an
//! `expiration` 10 minutes out, as Velero's does; at its expiration the request is
//! deleted. The URL is signed by the location's store where it can sign (S3, Azure,
//! GCS); for `local` locations it is a one-time URL of this process's download endpoint
//! ([`super::download_server`]).
//!
//! A request that cannot be served (no such backup or restore, no location, a store
//! that cannot sign) keeps its phase, is retried, and expires like any other; Velero
//! only logs why, Granary also says it in a Warning event on the request, which
//! `granary backup logs|download` show. Neither logs nor events ever carry the URL.
//!
//! Only what verifies is served ([`verify_target`]): a request for a file of a backup
//! that fails its integrity check gets no URL and a Warning event saying why.

use super::context::{LocationProblem, VeleroContext, k8s_time};
use super::download::{DOWNLOAD_URL_TTL, Step, Tokens, step, target_key};
use super::download_server::{DownloadEndpoint, Served, ServedTokens};
use super::integrity;
use chrono::{DateTime, Utc};
use granary_api::velero::{
    ALLOW_UNVERIFIED_ANNOTATION, Backup, DownloadRequest, DownloadRequestPhase, Restore,
};
use granary_providers::ProviderKind;
use granary_runtime::work_queue::{Next, WorkQueue};
use granary_velero::integrity::Verdict;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// How soon a request that could not be served is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Why a request cannot be served now (the message goes into a Warning event).
#[derive(Debug, thiserror::Error)]
enum Problem {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl From<LocationProblem> for Problem {
    fn from(p: LocationProblem) -> Self {
        match p {
            LocationProblem::Kube(e) => Problem::Kube(e),
            other => Problem::Refused(format!("its backup storage location: {other}")),
        }
    }
}

pub async fn run(ctx: Arc<VeleroContext>) {
    let tokens: Arc<ServedTokens> = Arc::new(Tokens::default());
    let endpoint = match DownloadEndpoint::bind(&ctx.settings).await {
        Ok(e) => {
            tracing::info!(address = %e.base, "download endpoint for local locations");
            Some(e)
        }
        Err(e) => {
            tracing::error!(
                address = %ctx.settings.download_bind_address,
                error = %e,
                "download endpoint cannot bind: local locations get no download URLs"
            );
            None
        }
    };
    let base = endpoint.as_ref().map(|e| e.base.clone());
    let serve = {
        let tokens = tokens.clone();
        let clock = ctx.clock.clone();
        async move {
            match endpoint {
                Some(e) => e.serve(tokens, clock).await,
                None => std::future::pending().await,
            }
        }
    };
    let queue: WorkQueue<String> = WorkQueue::new();
    let feed = {
        let queue = queue.clone();
        let tokens = tokens.clone();
        super::watch::each_event(
            ctx.api::<DownloadRequest>(),
            "DownloadRequests",
            move |event| match event {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                    queue.trigger(o.name_any())
                }
                watcher::Event::Delete(o) => tokens.revoke(&o.name_any()),
                _ => {}
            },
        )
    };
    let work = queue.run(2, move |name| {
        let ctx = ctx.clone();
        let tokens = tokens.clone();
        let base = base.clone();
        async move {
            let done: futures::future::BoxFuture<'_, Result<Next, kube::Error>> =
                Box::pin(reconcile(&ctx, &tokens, base.as_deref(), &name));
            done.await.unwrap_or_else(|e| {
                tracing::warn!(request = %name, error = %e, "download-request");
                Next::After(RETRY)
            })
        }
    });
    tokio::join!(feed, work, serve);
}

fn until(at: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (at - now)
        .to_std()
        .unwrap_or_default()
        .max(Duration::from_secs(1))
}

async fn reconcile(
    ctx: &VeleroContext,
    tokens: &ServedTokens,
    base: Option<&str>,
    name: &str,
) -> Result<Next, kube::Error> {
    let api = ctx.api::<DownloadRequest>();
    let Some(request) = api.get_opt(name).await? else {
        tokens.revoke(name);
        return Ok(Next::Done);
    };
    let now = ctx.clock.now();
    match step(request.status.as_ref(), now) {
        Step::Delete => {
            tokens.revoke(name);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
            Ok(Next::Done)
        }
        Step::WaitUntil(at) => Ok(Next::After(until(at, now))),
        Step::Process => {
            let expiration = match request.status.as_ref().and_then(|s| s.expiration) {
                Some(at) => at,
                None => {
                    // First the expiration, so a request that is never served still goes.
                    let at = now + chrono::Duration::from_std(DOWNLOAD_URL_TTL).unwrap_or_default();
                    let patch = json!({"status": {"expiration": k8s_time(at)}});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    at
                }
            };
            match url_for(ctx, tokens, base, &request, expiration).await {
                Ok(url) => {
                    let patch = json!({"status": {
                        "phase": DownloadRequestPhase::Processed,
                        "downloadURL": url,
                        "expiration": k8s_time(expiration),
                    }});
                    if let Err(e) = api
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        tokens.revoke(name);
                        return Err(e);
                    }
                    Ok(Next::After(until(expiration, now)))
                }
                Err(Problem::Kube(e)) => Err(e),
                Err(Problem::Refused(why)) => {
                    tracing::info!(request = %name, reason = %why, "download request not served");
                    ctx.event(
                        &request,
                        EventType::Warning,
                        "DownloadFailed",
                        format!("cannot serve {}: {why}", describe_target(&request)),
                    )
                    .await;
                    Ok(Next::After(RETRY.min(until(expiration, now))))
                }
            }
        }
    }
}

/// Serves only what verifies (docs/formats.md#integrity-record): the backup's (or the
/// restore's) record checked and the requested object hashed against it. An unsigned
/// backup's files are served only for a request carrying an administrator's
/// `granary.gardener.cloud/allow-unverified: "true"` (a namespace owner's request never
/// does: NAC writes it). The object is checked when the URL is made; what the store
/// serves later is the client's to check.
async fn verify_target(
    ctx: &VeleroContext,
    request: &DownloadRequest,
    open: &super::context::OpenLocation,
    backup_name: &str,
    key: &str,
) -> Result<(), Problem> {
    let target = &request.spec.target;
    let layout = &open.access.layout;
    // Nothing there, nothing served: the URL is made and its fetch says the object is
    // missing, as Velero's signed URLs do.
    if let Err(granary_providers::Error::NotFound(_)) = open.store.head(layout.bucket(), key).await
    {
        return Ok(());
    }
    let keyring = ctx.keys.current();
    if keyring.is_empty() {
        return Err(Problem::Refused(
            "the integrity signing keys are not known yet".into(),
        ));
    }
    let (dir, checked) = if target.kind.is_restore_target() {
        let dir = layout
            .restore(&target.name)
            .map_err(|e| Problem::Refused(e.to_string()))?
            .dir()
            .to_owned();
        let name = integrity::name_in(&dir, key).to_owned();
        let c = integrity::check_restore(
            open.store.as_ref(),
            layout,
            &target.name,
            &keyring,
            integrity::Hash::Only(&name),
        )
        .await;
        (dir, c)
    } else {
        let dir = layout
            .backup(backup_name)
            .map_err(|e| Problem::Refused(e.to_string()))?
            .dir()
            .to_owned();
        let name = integrity::name_in(&dir, key).to_owned();
        let c = integrity::check_backup(
            open.store.as_ref(),
            layout,
            backup_name,
            &keyring,
            None,
            integrity::Hash::Only(&name),
        )
        .await;
        (dir, c)
    };
    let checked = checked.map_err(Problem::Refused)?;
    let name = integrity::name_in(&dir, key);
    match &checked.verdict {
        Verdict::Verified { .. } => match &checked.record {
            Some(r) if r.objects.contains_key(name) => Ok(()),
            _ => Err(Problem::Refused(format!(
                "{name} is not part of {} as written",
                describe_target(request)
            ))),
        },
        Verdict::Unsigned
            if request
                .annotations()
                .get(ALLOW_UNVERIFIED_ANNOTATION)
                .is_some_and(|v| v == "true") =>
        {
            Ok(())
        }
        Verdict::Unsigned => Err(Problem::Refused(format!(
            "{} (add the annotation {ALLOW_UNVERIFIED_ANNOTATION}: \"true\" to download it anyway)",
            checked.verdict.describe()
        ))),
        v => Err(Problem::Refused(format!(
            "it failed its integrity check: {}",
            v.describe()
        ))),
    }
}

fn describe_target(r: &DownloadRequest) -> String {
    format!("{:?} of {:?}", r.spec.target.kind, r.spec.target.name)
}

/// The URL of the request's file: the Backup (through the Restore for restore kinds),
/// its location, the key, then a signed URL or a one-time local one.
async fn url_for(
    ctx: &VeleroContext,
    tokens: &ServedTokens,
    base: Option<&str>,
    request: &DownloadRequest,
    expiration: DateTime<Utc>,
) -> Result<String, Problem> {
    let errs = request.validate();
    if let Some(e) = errs.first() {
        return Err(Problem::Refused(e.to_string()));
    }
    let target = &request.spec.target;
    let ns = ctx.namespace();
    let mut files_location = None;
    let backup_name = if target.kind.is_restore_target() {
        let restore = ctx
            .api::<Restore>()
            .get_opt(&target.name)
            .await?
            .ok_or_else(|| {
                Problem::Refused(format!(
                    "restore {:?} not found in namespace {ns}",
                    target.name
                ))
            })?;
        // A restore of a read-only location's backup keeps its files elsewhere.
        files_location = restore
            .annotations()
            .get(granary_api::velero::RESTORE_FILES_LOCATION_ANNOTATION)
            .cloned();
        restore
            .spec
            .backup_name
            .filter(|b| !b.is_empty())
            .ok_or_else(|| Problem::Refused(format!("restore {:?} names no backup", target.name)))?
    } else {
        target.name.clone()
    };
    let backup = ctx
        .api::<Backup>()
        .get_opt(&backup_name)
        .await?
        .ok_or_else(|| {
            Problem::Refused(format!(
                "backup {backup_name:?} not found in namespace {ns}"
            ))
        })?;
    let location = match files_location {
        Some(l) => l,
        None => backup
            .spec
            .storage_location
            .clone()
            .filter(|l| !l.is_empty())
            .ok_or_else(|| {
                Problem::Refused(format!("backup {backup_name:?} names no storage location"))
            })?,
    };
    let open = ctx.open_named(&location).await?;
    let layout = &open.access.layout;
    // A backup read from another seed's prefix is stored under its own name there.
    let stored = backup.stored_name();
    let target_name = if target.kind.is_restore_target() {
        &target.name
    } else {
        &stored
    };
    let key = target_key(layout, target.kind, target_name)
        .map_err(|e| Problem::Refused(format!("spec.target.name: {e}")))?;
    verify_target(ctx, request, &open, &stored, &key).await?;
    if open.store.kind() == ProviderKind::Local {
        let base = base.ok_or_else(|| {
            Problem::Refused(format!(
                "location {location:?} is on the local provider, whose downloads this server's download endpoint serves, and it is not running (velero.downloadBindAddress {:?} could not be bound)",
                ctx.settings.download_bind_address
            ))
        })?;
        let issued = tokens.issue(
            &request.name_any(),
            Served {
                store: open.store.clone(),
                bucket: layout.bucket().to_string(),
                key,
            },
            expiration,
            ctx.clock.now(),
        );
        return Ok(format!("{base}{}", issued.path()));
    }
    let ttl = (expiration - ctx.clock.now())
        .to_std()
        .unwrap_or_default()
        .max(Duration::from_secs(1));
    open.store
        .presign_get(layout.bucket(), &key, ttl)
        .await
        .map_err(|e| Problem::Refused(format!("location {location:?}: {e}")))
}

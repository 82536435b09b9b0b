//! Fetching a backup's (or restore's) files the way velero's CLI does
//! (`pkg/cmd/util/downloadrequest`): create a DownloadRequest `<name>-<yyyyMMddHHmmss>`,
//! wait until the server has put a URL in its status, GET the URL, gunzip everything but
//! the backup tarball, and delete the request. A request the server refuses (an event
//! `DownloadFailed` on it) ends the wait at once with the server's reason; no answer
//! before `--timeout` says which controller was expected to answer.
//!
//! With `--data-dir` the CLI reads the location itself instead ([`super::store`]): no
//! server needed, the location's credentials read from the cluster, the `local`
//! provider's files from that directory. The URL is a bearer secret and is never
//! printed.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};

use super::store::LocationStore;
use super::{is_conflict, is_not_found};
use granary_api::velero::{
    DownloadRequest, DownloadRequestSpec, DownloadTarget, DownloadTargetKind,
};
use granary_velero_server::download::gunzipped_by_clients;

/// velero's default `--timeout` for `logs` and `download`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// velero's flags of `backup logs|download` and `restore logs|describe` for fetching the
/// download URL; the `///` lines on the fields are their help.
#[derive(Clone, Debug, clap::Args)]
pub struct FetchOptions {
    /// How long to wait for the server to answer the DownloadRequest.
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    pub timeout: Duration,
    /// Do not verify the object store's TLS certificate (insecure).
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
    // A PEM file of CAs to trust for the store besides the system's.
    /// A PEM file of CA certificates to trust for the object store.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Also fetch from a backup without an integrity record (Velero's own, an older
    /// Granary's); one that fails its check is refused whatever this says.
    #[arg(long)]
    pub allow_unverified: bool,
}

/// A Go duration (`1m`, `30s`, `1h30m`), as velero's `--timeout` takes it.
fn go_duration(s: &str) -> Result<Duration, String> {
    granary_api::velero::Duration::parse(s)
        .and_then(|d| d.to_std())
        .map_err(|e| e.to_string())
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            timeout: DEFAULT_TIMEOUT,
            insecure_skip_tls_verify: false,
            cacert: None,
            allow_unverified: false,
        }
    }
}

impl FetchOptions {
    fn http_client(&self) -> anyhow::Result<reqwest::Client> {
        let mut b = reqwest::Client::builder().connect_timeout(Duration::from_secs(30));
        if self.insecure_skip_tls_verify {
            b = b.danger_accept_invalid_certs(true);
        }
        if let Some(path) = &self.cacert {
            let pem = std::fs::read(path)
                .with_context(|| format!("--cacert: reading {}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| anyhow::anyhow!("--cacert {}: {e}", path.display()))?;
            if certs.is_empty() {
                bail!("--cacert {}: no PEM certificate in it", path.display());
            }
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        b.build().context("building the HTTP client")
    }
}

/// How often the request is looked at while waiting.
const POLL: Duration = Duration::from_millis(250);

/// Where the bytes go: gunzipped first unless the file is the backup tarball.
enum Sink<'a> {
    Gunzip(Box<flate2::write::MultiGzDecoder<&'a mut (dyn Write + Send)>>),
    Raw(&'a mut (dyn Write + Send)),
}

impl<'a> Sink<'a> {
    fn new(kind: DownloadTargetKind, out: &'a mut (dyn Write + Send)) -> Self {
        if gunzipped_by_clients(kind) {
            Sink::Gunzip(Box::new(flate2::write::MultiGzDecoder::new(out)))
        } else {
            Sink::Raw(out)
        }
    }

    fn write_all(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            Sink::Gunzip(w) => w.write_all(chunk),
            Sink::Raw(w) => w.write_all(chunk),
        }
    }

    /// Writes what the decoder still holds (a truncated gzip stream is an error).
    fn finish(self) -> std::io::Result<()> {
        match self {
            Sink::Gunzip(w) => w.finish()?.flush(),
            Sink::Raw(w) => w.flush(),
        }
    }
}

/// Streams the file `kind` of `name` into `out` through a DownloadRequest; returns the
/// bytes fetched (before gunzipping). The request is deleted whatever happened.
pub async fn through_server(
    client: &Client,
    ns: &str,
    kind: DownloadTargetKind,
    name: &str,
    options: &FetchOptions,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<u64> {
    let http = options.http_client()?;
    let api: Api<DownloadRequest> = Api::namespaced(client.clone(), ns);
    let request = create(&api, kind, name, options.allow_unverified).await?;
    let result = wait_and_fetch(
        client,
        &api,
        ns,
        &request,
        (kind, name),
        options.timeout,
        &http,
        out,
    )
    .await;
    match api.delete(&request, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => eprintln!("warning: DownloadRequest {request} was not deleted: {e}"),
    }
    result
}

async fn create(
    api: &Api<DownloadRequest>,
    kind: DownloadTargetKind,
    name: &str,
    allow_unverified: bool,
) -> anyhow::Result<String> {
    let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
    let mut request_name = format!("{name}-{stamp}");
    for attempt in 0..3 {
        let mut request = DownloadRequest::new(
            &request_name,
            DownloadRequestSpec {
                target: DownloadTarget {
                    kind,
                    name: name.to_string(),
                },
            },
        );
        if allow_unverified {
            request.metadata.annotations = Some(
                [(
                    granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION.to_owned(),
                    "true".to_owned(),
                )]
                .into(),
            );
        }
        match api.create(&PostParams::default(), &request).await {
            Ok(_) => return Ok(request_name),
            // Another download of the same thing in the same second.
            Err(e) if is_conflict(&e) && attempt < 2 => {
                let suffix: u32 = rand::random::<u32>() % 100_000;
                request_name = format!("{name}-{stamp}-{suffix:05}");
            }
            Err(e) => return Err(e).context("creating the DownloadRequest"),
        }
    }
    bail!("could not create a DownloadRequest for {name}")
}

#[allow(clippy::too_many_arguments)]
async fn wait_and_fetch(
    client: &Client,
    api: &Api<DownloadRequest>,
    ns: &str,
    request: &str,
    (kind, name): (DownloadTargetKind, &str),
    timeout: Duration,
    http: &reqwest::Client,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<u64> {
    let deadline = tokio::time::Instant::now() + timeout;
    let url = loop {
        let r = api
            .get(request)
            .await
            .context("reading the DownloadRequest")?;
        if let Some(url) = r
            .status
            .and_then(|s| s.download_url)
            .filter(|u| !u.is_empty())
        {
            break url;
        }
        if let Some(why) = refusal(client, ns, request).await {
            bail!("the server cannot serve the download: {why}");
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "timed out after {timeout:?} waiting for the server to process DownloadRequest {request} in namespace {ns}: is `granary server` (or a seed) running its download-request controller there? (To read a location directly instead, with the data directory of a local location at hand, pass --data-dir DIR.)"
            );
        }
        tokio::time::sleep(POLL).await;
    };
    let what = format!("{kind:?} of {name}");
    let response = http
        .get(&url)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("downloading {what}: {}", e.without_url()))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(300).collect();
        if status == reqwest::StatusCode::NOT_FOUND {
            bail!(
                "{what} was not found in its storage location ({status}) {}",
                body.trim()
            );
        }
        bail!(
            "downloading {what}: the store answered {status}: {}",
            body.trim()
        );
    }
    let mut fetched = 0u64;
    let mut response = response;
    let mut w = Sink::new(kind, out);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| anyhow::anyhow!("downloading {what}: {}", e.without_url()))?
    {
        fetched += chunk.len() as u64;
        w.write_all(&chunk)
            .with_context(|| format!("writing {what}"))?;
    }
    w.finish().with_context(|| format!("writing {what}"))?;
    Ok(fetched)
}

/// The reason of the server's `DownloadFailed` event on `request`, if any.
async fn refusal(client: &Client, ns: &str, request: &str) -> Option<String> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!(
        "regarding.kind=DownloadRequest,regarding.name={request}"
    ));
    let list = api.list(&lp).await.ok()?.items;
    list.into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(request))
        .find(|e| e.reason.as_deref() == Some("DownloadFailed"))
        .and_then(|e| e.note)
}

/// Streams the file at `key` of an opened location into `out` (`--data-dir`: no server).
pub async fn direct(
    loc: &LocationStore,
    kind: DownloadTargetKind,
    key: &str,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<u64> {
    let cannot = || {
        format!(
            "cannot read {key} from bucket {} of location {}",
            loc.layout.bucket(),
            loc.name
        )
    };
    let mut stream = loc
        .store
        .get(loc.layout.bucket(), key)
        .await
        .with_context(cannot)?;
    let mut w = Sink::new(kind, out);
    let mut fetched = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.with_context(cannot)?;
        fetched += chunk.len() as u64;
        w.write_all(&chunk)
            .with_context(|| format!("{key} is not a gzip file"))?;
    }
    w.finish()
        .with_context(|| format!("{key} is not a gzip file"))?;
    Ok(fetched)
}

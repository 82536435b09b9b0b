//! The HTTPS webhook `granary garden` serves when `seedAuthorization.bindAddress` is set:
//! `POST /authorize` answers kube-apiserver's `SubjectAccessReview`s
//! (`--authorization-webhook-config-file`, or a `Webhook` authorizer of an
//! `AuthorizationConfiguration`) and `POST /validate` its `AdmissionReview`s (the
//! `ValidatingWebhookConfiguration` in deploy/garden/seed-authorization/).
//!
//! Every replica serves it, leader or not: kube-apiserver calls whichever the Service
//! picks. So it keeps caches of its own (the buckets and entries, through the same
//! object selector as the controllers); until they are filled, reviews are answered
//! with an evaluation error and no opinion.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_util::sync::CancellationToken;

use crate::config::SeedAuthorizationConfig;
use crate::seed_authz::admission::{Admission, admit};
use crate::seed_authz::decision::{Decision, GardenView, Policy, decide};
use crate::seed_authz::identity::SeedIdentities;
use crate::seed_authz::review;
use granary_api::core::{BackupBucket, BackupEntry};
use granary_runtime::backoff::WatchBackoff;
use granary_runtime::health::{ReadinessFlag, parse_bind_address};
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_runtime::tls_listener::TlsListener;
use prometheus::{IntCounterVec, Opts};

/// Why the webhook could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("seedAuthorization.bindAddress {0:?}: expected host:port or :port")]
    Address(String),
    #[error("seedAuthorization.bindAddress {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
    #[error("seedAuthorization TLS: {0}")]
    Tls(String),
    #[error("registering the webhook's metrics: {0}")]
    Metrics(String),
}

/// The caches a decision reads, and whether they are filled.
#[derive(Clone)]
struct Caches {
    buckets: Store<BackupBucket>,
    entries: Store<BackupEntry>,
    ready: [watch::Receiver<bool>; 2],
}

impl Caches {
    fn ready(&self) -> bool {
        self.ready.iter().all(|r| *r.borrow())
    }
}

#[derive(Clone)]
struct AppState {
    caches: Caches,
    policy: Arc<Policy>,
    /// `granary_seed_authorization_reviews_total{review, decision}`.
    reviews: IntCounterVec,
}

/// The webhook, running.
pub struct RunningWebhook {
    pub local_addr: SocketAddr,
    ready: ReadinessFlag,
    token: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl RunningWebhook {
    /// Binds, starts the caches and serves until [`RunningWebhook::stop`]; counts
    /// reviews into `metrics`.
    pub async fn start(
        client: Client,
        config: &SeedAuthorizationConfig,
        selector: &ObjectSelector,
        metrics: &Metrics,
    ) -> Result<Self, WebhookError> {
        let reviews = IntCounterVec::new(
            Opts::new(
                "granary_seed_authorization_reviews_total",
                "Reviews the seed authorization webhook answered, by review \
                 (authorize, admit) and decision (allow, deny, no_opinion, unanswered).",
            ),
            &["review", "decision"],
        )
        .and_then(|c| metrics.register(Box::new(c.clone())).map(|_| c))
        .map_err(|e| WebhookError::Metrics(e.to_string()))?;
        let acceptor = ServingCert::open(config)?.acceptor()?;
        let address = &config.bind_address;
        let addr =
            parse_bind_address(address).map_err(|_| WebhookError::Address(address.clone()))?;
        let bind_err = |source| WebhookError::Bind {
            address: address.clone(),
            source,
        };
        let tcp = TcpListener::bind(addr).await.map_err(bind_err)?;
        let local_addr = tcp.local_addr().map_err(bind_err)?;
        let token = CancellationToken::new();
        let wc = || match selector.label_selector() {
            Some(s) => watcher::Config::default().labels(&s),
            None => watcher::Config::default(),
        };
        let (buckets, fill_buckets, buckets_ready) =
            cache::<BackupBucket>(Api::all(client.clone()), wc());
        let (entries, fill_entries, entries_ready) = cache::<BackupEntry>(Api::all(client), wc());
        let state = AppState {
            caches: Caches {
                buckets,
                entries,
                ready: [buckets_ready, entries_ready],
            },
            reviews,
            policy: Arc::new(Policy {
                identities: SeedIdentities {
                    service_account_namespace: config.seed_service_account_namespace.clone(),
                },
                allow_list_without_label_selector: config.allow_list_without_label_selector,
            }),
        };
        let router = Router::new()
            .route("/authorize", post(authorize))
            .route("/validate", post(validate))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(state.clone());
        let ready = ReadinessFlag::default();
        let caches = state.caches.clone();
        let flag = ready.clone();
        let mark_ready = async move {
            let mut filled = true;
            for mut r in caches.ready {
                filled &= r.wait_for(|filled| *filled).await.is_ok();
            }
            flag.set(filled);
        };
        let listener = TlsListener::new(tcp, acceptor, token.clone()).map_err(|source| {
            WebhookError::Bind {
                address: config.bind_address.clone(),
                source,
            }
        })?;
        let stop = token.clone();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, router)
                .with_graceful_shutdown(stop.clone().cancelled_owned());
            let caches = async {
                tokio::join!(fill_buckets, fill_entries, mark_ready);
            };
            tokio::select! {
                result = serve => {
                    if let Err(e) = result {
                        tracing::error!(error = %e, "seed authorization webhook stopped");
                    }
                }
                _ = caches => {}
            }
        });
        Ok(RunningWebhook {
            local_addr,
            ready,
            token,
            task,
        })
    }

    /// Set once the caches are filled: a replica takes reviews only then.
    pub fn readiness(&self) -> ReadinessFlag {
        self.ready.clone()
    }

    pub async fn stop(self) {
        self.token.cancel();
        let _ = self.task.await;
    }
}

/// The serving certificate and key, read from their files and read again when either
/// file changes (cert-manager and Secret volumes replace them in place), so a renewal
/// needs no restart. A renewal that does not load keeps the previous pair in use.
#[derive(Debug)]
struct ServingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    provider: Arc<CryptoProvider>,
    loaded: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    stamps: (Option<SystemTime>, Option<SystemTime>),
    key: Arc<CertifiedKey>,
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl ServingCert {
    fn open(config: &SeedAuthorizationConfig) -> Result<Self, WebhookError> {
        let (cert_file, key_file) = (
            PathBuf::from(&config.tls_cert_file),
            PathBuf::from(&config.tls_key_file),
        );
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let stamps = (modified(&cert_file), modified(&key_file));
        let key = Arc::new(load_pair(&cert_file, &key_file, &provider)?);
        Ok(ServingCert {
            cert_file,
            key_file,
            provider,
            loaded: Mutex::new(Loaded { stamps, key }),
        })
    }

    /// The pair to serve now, re-read first if a file changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let stamps = (modified(&self.cert_file), modified(&self.key_file));
        if stamps != loaded.stamps {
            // Marked seen either way: a broken pair is reported once, not per handshake.
            loaded.stamps = stamps;
            match load_pair(&self.cert_file, &self.key_file, &self.provider) {
                Ok(key) => {
                    tracing::info!(file = %self.cert_file.display(), "seed authorization webhook: serving certificate reloaded");
                    loaded.key = Arc::new(key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "seed authorization webhook: the changed certificate does not load; keeping the previous one")
                }
            }
        }
        loaded.key.clone()
    }

    fn acceptor(self) -> Result<TlsAcceptor, WebhookError> {
        let provider = self.provider.clone();
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| WebhookError::Tls(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self));
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(tls)))
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A certificate chain and its private key from PEM files, checked to belong together.
fn load_pair(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, WebhookError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| WebhookError::Tls(format!("{}: {e}", path.display())))
    };
    let (cert_pem, key_pem) = (read(cert_file)?, read(key_file)?);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| WebhookError::Tls(format!("{}: {e}", cert_file.display())))?;
    if chain.is_empty() {
        return Err(WebhookError::Tls(format!(
            "{}: no PEM certificate",
            cert_file.display()
        )));
    }
    // The parser's error could quote the key; say only that it is unusable.
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|_| WebhookError::Tls(format!("{}: no PEM private key", key_file.display())))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        WebhookError::Tls(format!(
            "{} and {}: {e}",
            cert_file.display(),
            key_file.display()
        ))
    })
}

async fn authorize(
    State(state): State<AppState>,
    Json(sar): Json<SubjectAccessReview>,
) -> Json<SubjectAccessReview> {
    let count = |decision: &str| {
        state
            .reviews
            .with_label_values(&["authorize", decision])
            .inc()
    };
    if !state.caches.ready() {
        count("unanswered");
        return Json(review::unanswerable(
            sar,
            "granary garden: the BackupBucket/BackupEntry caches are not filled yet",
        ));
    }
    let attrs = review::attributes(&sar);
    let (buckets, entries) = (state.caches.buckets.state(), state.caches.entries.state());
    let view = GardenView {
        buckets: &buckets,
        entries: &entries,
    };
    let decision = decide(&attrs, view, &state.policy);
    count(match decision {
        Decision::Allow => "allow",
        Decision::Deny(_) => "deny",
        Decision::NoOpinion => "no_opinion",
    });
    if let (Decision::Deny(reason), Some(r)) = (&decision, &attrs.resource) {
        tracing::info!(
            user = %attrs.user,
            verb = %r.verb,
            resource = %r.resource,
            subresource = %r.subresource,
            namespace = %r.namespace,
            name = %r.name,
            %reason,
            "seed request denied"
        );
    }
    Json(review::answer(sar, &decision))
}

async fn validate(
    State(state): State<AppState>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, (StatusCode, &'static str)> {
    let Some((uid, request)) = review::write_request(&body) else {
        return Err((StatusCode::BAD_REQUEST, "not an AdmissionReview request"));
    };
    let admission = admit(&request, &state.policy.identities);
    let decision = match admission {
        Admission::Allowed => "allow",
        Admission::Denied(_) => "deny",
    };
    state.reviews.with_label_values(&["admit", decision]).inc();
    if let Admission::Denied(reason) = &admission {
        tracing::info!(user = %request.user, operation = %request.operation,
            resource = %request.resource, subresource = %request.subresource,
            namespace = %request.namespace, name = %request.name, %reason,
            "seed write refused");
    }
    Ok(Json(review::admission_response(&uid, &admission)))
}

/// A reflector store of `K`, the future that fills it and a flag set once it is.
fn cache<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl std::future::Future<Output = ()>,
    watch::Receiver<bool>,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let (tx, rx) = watch::channel(false);
    let fill = reflector::reflector(writer, watcher(api, config))
        .backoff(WatchBackoff::default())
        .for_each(move |event| {
            match event {
                Ok(watcher::Event::InitDone) => {
                    tx.send_replace(true);
                }
                Err(e) => tracing::debug!(error = %e, "webhook cache watch error; retrying"),
                Ok(_) => {}
            }
            std::future::ready(())
        });
    (store, fill, rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).expect("params");
        let cert = params.self_signed(&key).expect("certificate");
        (cert.pem(), key.serialize_pem())
    }

    fn served_name(cert: &ServingCert) -> Vec<u8> {
        cert.current().cert[0].to_vec()
    }

    #[test]
    fn a_renewed_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let write = |(cert, key): &(String, String)| {
            std::fs::write(&cert_file, cert).expect("cert");
            std::fs::write(&key_file, key).expect("key");
        };
        let first = pair("first.example");
        write(&first);
        let config = SeedAuthorizationConfig {
            bind_address: "127.0.0.1:0".into(),
            tls_cert_file: cert_file.display().to_string(),
            tls_key_file: key_file.display().to_string(),
            ..SeedAuthorizationConfig::default()
        };
        let serving = ServingCert::open(&config).expect("loads");
        let before = served_name(&serving);

        let second = pair("second.example");
        write(&second);
        // A file system with coarse timestamps may not show the change: make it show.
        let later = SystemTime::now() + Duration::from_secs(5);
        for f in [&cert_file, &key_file] {
            std::fs::File::options()
                .write(true)
                .open(f)
                .and_then(|f| f.set_modified(later))
                .expect("touch");
        }
        let renewed = served_name(&serving);
        assert_ne!(renewed, before, "the renewed certificate is served");

        // A certificate with another pair's key is refused; the renewed one stays.
        std::fs::write(&key_file, &first.1).expect("mismatched key");
        std::fs::File::options()
            .write(true)
            .open(&key_file)
            .and_then(|f| f.set_modified(later + Duration::from_secs(5)))
            .expect("touch");
        assert_eq!(served_name(&serving), renewed);

        std::fs::write(&key_file, "garbage").expect("garbage");
        let err = ServingCert::open(&config).expect_err("garbage is no key");
        assert!(!err.to_string().contains("garbage"), "{err}");
    }
}

//! The embedded Kubernetes API server used by `granary dev` and the integration tests.
//!
//! It speaks kube-apiserver's HTTP API on 127.0.0.1 with a bearer token, so
//! `kube::Client` and `kubectl` work against it unchanged: discovery, built-in kinds
//! (one table, [`builtin`]), CustomResourceDefinitions and their custom resources with
//! schema validation, server-side apply with managedFields (`managed`),
//! get/list/watch/create/update/patch/delete with kube-apiserver's
//! semantics, status and scale subresources, finalizers, ownerReference garbage
//! collection, namespace deletion and OpenAPI documents. Optionally durable with a data
//! directory.
//!
//! Hostile input gets kube-apiserver's answers, so nothing a typed client cannot decode
//! is ever stored: metadata is type-checked and validated (`metadata`, with the name
//! rules of `granary_api::names`), as are ConfigMap and Secret payloads (`payload`);
//! request bodies over 3 MiB are 413 and objects over etcd's 1.5 MiB are refused
//! (`store`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), granary_apiserver::EmbeddedError> {
//! use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
//! let server = EmbeddedServer::start(EmbeddedOptions::default()).await?;
//! let client = server.client().await?;
//! server.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod aggregation;
mod apply;
mod authn;
mod bootstrap_rbac;
mod builtin;
mod builtin_columns;
mod builtin_schema;
mod crd;
mod defaults;
mod discovery;
mod errors;
mod events;
mod field_validation;
mod fieldset;
mod gc;
mod gc_index;
mod history;
mod identity;
mod kubeconfig;
mod list;
mod managed;
mod merge;
mod metadata;
/// kube-apiserver's rules for label keys and values, for the API types' own validation.
mod negotiation;
mod objects;
mod openapi;
mod partial;
mod patch;
mod payload;
mod persist;
mod protobuf;
mod rbac;
mod recorder;
mod registry;
mod schema;
mod selectors;
mod server;
mod services;
mod shape;
mod state;
mod store;
mod strategic;
mod table;
mod tls;
mod typed;
mod validation;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use state::State;

pub use granary_runtime::clock::Clock;

/// Decodes a Kubernetes protobuf request body (`application/vnd.kubernetes.protobuf`) to
/// the object's JSON as the server does, or says why it cannot, with the HTTP status
/// the server would answer. Public for the fuzz target (`fuzz/fuzz_targets/protobuf_body.rs`).
pub fn decode_protobuf_body(body: &[u8]) -> Result<serde_json::Value, (u16, String)> {
    protobuf::decode(body).map_err(|e| (e.code, e.message))
}
pub use recorder::{ADMIN_USER, ApiCall};

/// How to start an [`EmbeddedServer`].
#[derive(Debug, Clone, Default)]
pub struct EmbeddedOptions {
    /// The loopback port to listen on. When `None`: the port of the previous start with
    /// this `data_dir` if it is free, else a free one.
    pub port: Option<u16>,
    /// Persist every write under this directory and restore from it at start; the
    /// server's identity (CA, token) and port are kept there too, so kubeconfigs written
    /// by an earlier start keep working. Without it, every start has a new identity.
    pub data_dir: Option<PathBuf>,
}

/// Why a server could not start or be reached.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing kubeconfig {path}: {source}")]
    WriteKubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("building kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("building client: {0}")]
    Client(#[from] kube::Error),
    #[error("making the serving certificate: {0}")]
    Tls(String),
    #[error("bootstrapping: {0}")]
    Bootstrap(String),
    #[error("token file {path}: {why}")]
    TokenFile { path: PathBuf, why: String },
}

/// A running embedded API server. Dropping it stops serving (use
/// [`EmbeddedServer::shutdown`] to also wait for it).
pub struct EmbeddedServer {
    addr: SocketAddr,
    state: Arc<State>,
    ca_pem: String,
    server: Option<JoinHandle<()>>,
    controllers: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for EmbeddedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Events buffered per watcher before it is considered too slow and closed.
const WATCH_BUFFER: usize = 8_192;

/// Binds 127.0.0.1: on `port` when given, else on the port recorded in `data_dir` when
/// it is free, else on a free one.
async fn bind(
    port: Option<u16>,
    data_dir: Option<&Path>,
) -> Result<tokio::net::TcpListener, EmbeddedError> {
    let bind = |port: u16| async move {
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|source| EmbeddedError::Bind { port, source })
    };
    if let Some(port) = port {
        return bind(port).await;
    }
    if let Some(previous) = data_dir.and_then(identity::recorded_port) {
        match bind(previous).await {
            Ok(listener) => return Ok(listener),
            Err(e) => tracing::warn!(
                error = %e,
                "the API server's previous port is taken; using a free one (kubeconfigs \
                 written before point at the old port)"
            ),
        }
    }
    bind(0).await
}

/// Creates kube-apiserver's bootstrap ClusterRoles and ClusterRoleBindings that are
/// missing (a restart with a data directory keeps the stored ones as they are).
fn bootstrap_rbac(state: &State) -> Result<(), EmbeddedError> {
    let objects = [
        ("clusterroles", bootstrap_rbac::cluster_roles()),
        (
            "clusterrolebindings",
            bootstrap_rbac::cluster_role_bindings(),
        ),
    ];
    for (plural, bodies) in objects {
        let info = state
            .registry
            .lookup("rbac.authorization.k8s.io", "v1", plural)
            .ok_or_else(|| EmbeddedError::Bootstrap(format!("{plural} are not served")))?;
        for body in bodies {
            match state.create(&info, None, body, state::Tracking::None) {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(EmbeddedError::Bootstrap(e.to_string())),
            }
        }
    }
    Ok(())
}

impl EmbeddedServer {
    /// Starts a server with the real clock.
    pub async fn start(opts: EmbeddedOptions) -> Result<Self, EmbeddedError> {
        Self::start_with_clock(opts, Clock::system()).await
    }

    /// Starts a server that also knows the users of a kube-apiserver static token file
    /// (`--token-auth-file`: CSV lines `token,user,uid,"group1,group2"`). Their requests
    /// are authorized with RBAC (`system:masters` members may do anything) and refused
    /// with kube-apiserver's 403; the server's own token keeps full access.
    pub async fn start_with_token_file(
        opts: EmbeddedOptions,
        token_file: &Path,
    ) -> Result<Self, EmbeddedError> {
        let text = std::fs::read_to_string(token_file).map_err(|e| EmbeddedError::TokenFile {
            path: token_file.to_path_buf(),
            why: e.to_string(),
        })?;
        let users = authn::parse_token_file(&text).map_err(|why| EmbeddedError::TokenFile {
            path: token_file.to_path_buf(),
            why,
        })?;
        Self::start_inner(opts, Clock::system(), users).await
    }

    /// Starts a server whose timestamps come from `clock`.
    pub async fn start_with_clock(
        opts: EmbeddedOptions,
        clock: Clock,
    ) -> Result<Self, EmbeddedError> {
        Self::start_inner(opts, clock, Vec::new()).await
    }

    async fn start_inner(
        opts: EmbeddedOptions,
        clock: Clock,
        users: Vec<(String, authn::UserInfo)>,
    ) -> Result<Self, EmbeddedError> {
        let listener = bind(opts.port, opts.data_dir.as_deref()).await?;
        let port = opts.port.unwrap_or(0);
        let addr = listener
            .local_addr()
            .map_err(|source| EmbeddedError::Bind { port, source })?;
        let mut store = store::Store::new(history::Limits::SERVER, WATCH_BUFFER);
        let identity = match &opts.data_dir {
            Some(dir) => {
                let data_err = |source| EmbeddedError::DataDir {
                    path: dir.clone(),
                    source,
                };
                let (journal, rv, objects) = persist::open(dir).map_err(data_err)?;
                store.restore(rv, objects);
                store.set_journal(Box::new(journal));
                events::fold_separate_events_v1(&store);
                let identity = identity::load_or_create(dir, clock.now()).map_err(data_err)?;
                identity::record_port(dir, addr.port()).map_err(data_err)?;
                identity
            }
            None => identity::fresh(clock.now()).map_err(EmbeddedError::Tls)?,
        };
        let state = Arc::new(State {
            store,
            registry: registry::Registry::new(),
            authn: authn::Authenticator::new(identity.token.clone(), users),
            token: identity.token,
            clock,
            bookmark_interval: Duration::from_secs(5),
            shutdown: CancellationToken::new(),
            address: addr.to_string(),
            recorder: recorder::Recorder::default(),
            service_writes: std::sync::Mutex::new(()),
        });
        state.reconcile_crds();
        let ns_info = state
            .registry
            .lookup("", "v1", "namespaces")
            .ok_or_else(|| EmbeddedError::Bootstrap("namespaces are not served".into()))?;
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"metadata": {"name": ns}});
            match state.create(&ns_info, None, body, state::Tracking::None) {
                Ok(_) => {}
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(EmbeddedError::Bootstrap(e.to_string())),
            }
        }
        bootstrap_rbac(&state)?;
        state.aggregate_cluster_roles();
        state.store.compact_history();
        let router = server::router(state.clone());
        let cancel = state.shutdown.clone();
        let listener = tls::TlsListener::new(listener, identity.tls.acceptor, cancel.clone())
            .map_err(|source| EmbeddedError::Bind { port, source })?;
        let server = tokio::spawn(async move {
            let result = axum::serve(listener, router)
                .with_graceful_shutdown(cancel.cancelled_owned())
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "embedded API server stopped");
            }
        });
        let controllers = tokio::spawn(gc::run_controllers(state.clone()));
        tracing::info!(url = %format!("https://{addr}"), "embedded API server listening");
        Ok(EmbeddedServer {
            addr,
            state,
            ca_pem: identity.tls.ca_pem,
            server: Some(server),
            controllers: Some(controllers),
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// PEM of the CA the serving certificate chains to (also in the kubeconfig).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The bearer token every request must carry.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// A kubeconfig for this server (context `granary`, namespace `default`).
    pub fn kubeconfig(&self) -> Result<kube::config::Kubeconfig, EmbeddedError> {
        Ok(kubeconfig::kubeconfig(
            "granary",
            &self.url(),
            self.token(),
            &self.ca_pem,
        )?)
    }

    /// Writes the kubeconfig (mode 0600) to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmbeddedError> {
        let err = |source| EmbeddedError::WriteKubeconfig {
            path: path.to_path_buf(),
            source,
        };
        // Created 0600 (the token is in it), never world-readable for a moment; an
        // existing file is tightened before it is rewritten.
        use std::io::Write;
        let mut opts = std::fs::OpenOptions::new();
        opts.create(true).write(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(path).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(err)?;
        }
        file.write_all(
            kubeconfig::yaml("granary", &self.url(), self.token(), &self.ca_pem).as_bytes(),
        )
        .map_err(err)?;
        Ok(())
    }

    /// A `kube::Client` for this server.
    pub async fn client(&self) -> Result<kube::Client, EmbeddedError> {
        let config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig()?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Starts recording every authenticated request (see [`ApiCall`]); off by default.
    pub fn record_requests(&self) {
        self.state.recorder.enable();
    }

    /// The requests recorded since [`EmbeddedServer::record_requests`], in arrival order.
    pub fn recorded_requests(&self) -> Vec<ApiCall> {
        self.state.recorder.calls()
    }

    /// The requests recorded so far, in arrival order; the log starts again empty.
    pub fn take_recorded_requests(&self) -> Vec<ApiCall> {
        self.state.recorder.take()
    }

    /// Stops serving, ends open watches and waits for the server to finish.
    pub async fn shutdown(mut self) {
        self.state.shutdown.cancel();
        if let Some(s) = self.server.take() {
            let _ = s.await;
        }
        if let Some(c) = self.controllers.take() {
            let _ = c.await;
        }
        self.state.store.flush();
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.state.shutdown.cancel();
        self.state.store.flush();
    }
}

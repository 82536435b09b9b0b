//! The integration-test harness: every test gets a [`TestCluster`].
//!
//! By default that is a fresh embedded API server in-process. When
//! `GRANARY_TEST_KUBECONFIG` names a kubeconfig, the tests run against that real cluster
//! instead (and against `GRANARY_TEST_SEED_KUBECONFIG` as the seed, else the same
//! cluster): each test then works in its own uniquely named namespaces and objects and
//! deletes what it registered when dropped. Each test also gets its own
//! `object_selector` value for the controllers' `--object-selector` flag, so tests sharing
//! a real cluster never act on each other's objects.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The label every controller filters on with `--object-selector`.
pub const INSTANCE_LABEL: &str = granary_runtime::selector::INSTANCE_LABEL;

/// How long polls wait before a test fails. Generous on purpose: a poll returns as soon
/// as its condition holds, so the deadline only decides how long a real failure takes to
/// report, and a loaded 2-core CI machine (debug binaries, emulators, two API servers)
/// must not turn a slow success into a failure.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// One cluster (embedded or real) as a test sees it.
pub struct Side {
    pub client: Client,
    /// Present in embedded mode.
    pub server: Option<EmbeddedServer>,
    /// A kubeconfig file for this side (for kubectl or the granary binary).
    pub kubeconfig_path: PathBuf,
}

/// An object deleted when the test ends: (resource, namespace, name).
type Cleanup = (ApiResource, Option<String>, String);

/// What a test works against.
pub struct TestCluster {
    pub garden: Side,
    /// The seed; the garden cluster itself unless a separate one is configured.
    pub seed: Option<Side>,
    /// Unique per test: use it in names and as `--object-selector`.
    pub object_selector: String,
    tmp: tempfile::TempDir,
    cleanup: Mutex<Vec<Cleanup>>,
}

fn unique_suffix() -> String {
    let u = uuid::Uuid::new_v4().simple().to_string();
    u[..8].to_string()
}

async fn real_side(path: &Path) -> Side {
    let kc =
        Kubeconfig::read_from(path).expect("GRANARY_TEST_KUBECONFIG must be a readable kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig must be usable");
    Side {
        client: Client::try_from(config).expect("client from kubeconfig"),
        server: None,
        kubeconfig_path: path.to_path_buf(),
    }
}

async fn embedded_side(dir: &Path, name: &str) -> Side {
    let server = EmbeddedServer::start(EmbeddedOptions::default())
        .await
        .expect("embedded API server starts");
    let kubeconfig_path = dir.join(format!("{name}.kubeconfig"));
    server
        .write_kubeconfig(&kubeconfig_path)
        .expect("kubeconfig is written");
    Side {
        client: server
            .client()
            .await
            .expect("client for the embedded server"),
        server: Some(server),
        kubeconfig_path,
    }
}

impl TestCluster {
    /// A cluster for one test.
    pub async fn start() -> Self {
        let tmp = tempfile::tempdir().expect("temp dir");
        let (garden, seed) = match std::env::var_os("GRANARY_TEST_KUBECONFIG") {
            Some(path) => {
                let garden = real_side(Path::new(&path)).await;
                let seed = match std::env::var_os("GRANARY_TEST_SEED_KUBECONFIG") {
                    Some(p) => Some(real_side(Path::new(&p)).await),
                    None => None,
                };
                (garden, seed)
            }
            None => (embedded_side(tmp.path(), "garden").await, None),
        };
        TestCluster {
            garden,
            seed,
            object_selector: format!("t-{}", unique_suffix()),
            tmp,
            cleanup: Mutex::new(Vec::new()),
        }
    }

    /// Whether this is the in-process embedded server.
    pub fn is_embedded(&self) -> bool {
        self.garden.server.is_some()
    }

    pub fn client(&self) -> Client {
        self.garden.client.clone()
    }

    /// The seed cluster's client (the garden's when they are the same cluster).
    pub fn seed_client(&self) -> Client {
        self.seed.as_ref().unwrap_or(&self.garden).client.clone()
    }

    /// A seed that is a second embedded server (started on first use in embedded mode).
    pub async fn separate_seed(&mut self) -> &Side {
        if self.seed.is_none() && self.is_embedded() {
            self.seed = Some(embedded_side(self.tmp.path(), "seed").await);
        }
        self.seed.as_ref().unwrap_or(&self.garden)
    }

    /// `<base>-<object_selector>`: unique per test, valid as a DNS label for short bases.
    pub fn name(&self, base: &str) -> String {
        format!("{base}-{}", self.object_selector)
    }

    /// The `granary.gardener.cloud/instance=<object_selector>` label.
    pub fn instance_label(&self) -> (String, String) {
        (INSTANCE_LABEL.to_string(), self.object_selector.clone())
    }

    /// Creates a fresh namespace (deleted at drop).
    pub async fn namespace(&self, base: &str) -> String {
        let name = self.name(base);
        let api: Api<Namespace> = Api::all(self.client());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        let (k, v) = self.instance_label();
        ns.metadata.labels = Some([(k, v)].into());
        api.create(&PostParams::default(), &ns)
            .await
            .expect("namespace is created");
        self.delete_at_drop(ApiResource::erase::<Namespace>(&()), None, &name);
        name
    }

    /// Registers an object to delete when the test ends (real-cluster mode).
    pub fn delete_at_drop(&self, ar: ApiResource, namespace: Option<&str>, name: &str) {
        self.cleanup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((ar, namespace.map(String::from), name.to_string()));
    }

    /// Applies every document of a YAML string (server-side apply, forced).
    pub async fn apply_yaml(&self, client: &Client, yaml: &str) -> Vec<DynamicObject> {
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml).expect("valid YAML");
        let discovery = kube::discovery::Discovery::new(client.clone())
            .run()
            .await
            .expect("discovery");
        let mut out = Vec::new();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let obj: DynamicObject = serde_json::from_value(doc).expect("a Kubernetes object");
            let tm = obj.types.clone().expect("apiVersion and kind are set");
            let gvk = kube::api::GroupVersionKind::try_from(&tm).expect("valid apiVersion");
            let (ar, caps) = discovery.resolve_gvk(&gvk).expect("kind is served");
            let name = obj.metadata.name.clone().expect("named object");
            let api: Api<DynamicObject> = match (&caps.scope, &obj.metadata.namespace) {
                (kube::discovery::Scope::Namespaced, Some(ns)) => {
                    Api::namespaced_with(client.clone(), ns, &ar)
                }
                (kube::discovery::Scope::Namespaced, None) => {
                    Api::default_namespaced_with(client.clone(), &ar)
                }
                _ => Api::all_with(client.clone(), &ar),
            };
            let applied = api
                .patch(
                    &name,
                    &PatchParams::apply("granary-tests").force(),
                    &Patch::Apply(&obj),
                )
                .await
                .expect("apply succeeds");
            out.push(applied);
        }
        out
    }

    /// Applies every `*.yaml`/`*.yml` in `dir` (as a user's `kubectl apply -f dir/`) and
    /// waits until every CustomResourceDefinition among them is Established.
    pub async fn install_crds_from_dir(&self, client: &Client, dir: &Path) {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("CRD directory is readable")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).expect("readable CRD file");
            for obj in self.apply_yaml(client, &text).await {
                if obj
                    .types
                    .as_ref()
                    .is_some_and(|t| t.kind == "CustomResourceDefinition")
                {
                    wait_established(client, obj.metadata.name.as_deref().unwrap_or_default())
                        .await;
                }
            }
        }
    }
}

/// Waits until the CRD `name` has `Established=True`.
pub async fn wait_established(client: &Client, name: &str) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    poll_until(&format!("CRD {name} established"), || async {
        api.get_opt(name).await.ok().flatten().is_some_and(|crd| {
            crd.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
    })
    .await;
}

/// Polls `check` until it is true, failing the test after [`DEADLINE`].
pub async fn poll_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut delay = Duration::from_millis(10);
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.is_embedded() {
            return;
        }
        let items = std::mem::take(&mut *self.cleanup.lock().unwrap_or_else(|e| e.into_inner()));
        if items.is_empty() {
            return;
        }
        let path = self.garden.kubeconfig_path.clone();
        // Drop cannot await, and the test's runtime may be shutting down: clean up on a
        // thread with its own runtime and client.
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let side = real_side(&path).await;
                for (ar, ns, name) in items.into_iter().rev() {
                    let api: Api<DynamicObject> = match &ns {
                        Some(ns) => Api::namespaced_with(side.client.clone(), ns, &ar),
                        None => Api::all_with(side.client.clone(), &ar),
                    };
                    let _ = api.delete(&name, &DeleteParams::background()).await;
                }
            });
        });
        let _ = handle.join();
    }
}

/// A GET over plain HTTP/1.1 (health and metrics endpoints), the whole response as text;
/// `None` while nothing answers on `addr`.
pub async fn try_http_get(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await.ok()?;
    Some(out)
}

/// [`try_http_get`] on an endpoint that must answer.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|| panic!("nothing answers GET {path} on {addr}"))
}

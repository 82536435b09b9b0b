//! Support for the `granary seed` scenarios: a landscape of one garden and one seed
//! embedded API server with the CRDs installed, garden credentials for a storage backend
//! (the `local` store in a temp dir, or an emulator), helpers that play the garden
//! controller (create buckets and entries, label them for a seed), and seed agents
//! started in-process.
#![allow(dead_code)]

use crate::emulators;
use crate::{TestCluster, poll_until};
use granary_api::core::{
    self, BackupBucketProvider, BackupBucketSpec, BackupEntrySpec, FINALIZER_GARDENER,
    GARDEN_NAMESPACE, LABEL_SEED,
};
use granary_providers::{ObjectStore, SecretData, StoreOptions};
use granary_runtime::config::ConfigDuration;
use granary_seed::config::SeedConfiguration;
use granary_seed::{RunningSeed, SeedAgent};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Azurite's well-known development account key (public, documented by Microsoft).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The credentials secret of every test landscape, in the garden's `garden` namespace.
pub const CREDENTIALS: &str = "backup-credentials";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Local,
    S3,
    Azure,
    Gcs,
}

impl Backend {
    pub fn provider(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::S3 => "aws",
            Backend::Azure => "azure",
            Backend::Gcs => "gcp",
        }
    }
}

/// The emulator endpoint of `backend`, or `None` (the test is skipped loudly).
pub fn endpoint(backend: Backend) -> Option<String> {
    unsafe_env_init();
    match backend {
        Backend::Local => Some(String::new()),
        Backend::S3 => emulators::s3(),
        Backend::Azure => emulators::azure(),
        Backend::Gcs => emulators::gcs(),
    }
}

#[allow(unsafe_code)] // set_var is unsafe in edition 2024
fn unsafe_env_init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, before any AWS client of this process reads it.
    ONCE.call_once(|| unsafe { std::env::set_var("AWS_EC2_METADATA_DISABLED", "true") });
}

/// One garden, one seed, a backend and a data directory for the `local` store.
pub struct Landscape {
    pub cluster: TestCluster,
    pub garden: Client,
    pub seed: Client,
    pub backend: Backend,
    pub endpoint: String,
    pub data_dir: tempfile::TempDir,
    /// An S3 key created in a moto that checks credentials ([`Landscape::start_checked`]).
    s3_key: Option<(String, String)>,
}

fn repo_dir(rel: &str) -> PathBuf {
    crate::repo_root().join(rel)
}

/// Installs the seed-side CRDs into another cluster (a second seed).
pub async fn install_seed_crds(cluster: &TestCluster, client: &Client) {
    cluster
        .install_crds_from_dir(client, &repo_dir("deploy/seed/crds"))
        .await;
}

impl Landscape {
    /// A landscape on `backend`, or `None` when its emulator is not available.
    pub async fn start(backend: Backend) -> Option<Landscape> {
        let endpoint = endpoint(backend)?;
        Some(Landscape::start_at(backend, endpoint, None).await)
    }

    /// A landscape on a backend that checks every request's credentials, or `None`
    /// when its emulator is not available: Azurite (always checks SharedKey
    /// signatures), or for S3 a moto of its own with authentication on, in which a user
    /// with an access key and an allow-all policy is created first.
    pub async fn start_checked(backend: Backend) -> Option<Landscape> {
        match backend {
            Backend::S3 => {
                unsafe_env_init();
                let endpoint = emulators::s3_auth()?;
                let key = moto_user(&endpoint).await;
                Some(Landscape::start_at(backend, endpoint, Some(key)).await)
            }
            Backend::Azure => Landscape::start(backend).await,
            Backend::Local | Backend::Gcs => {
                panic!("{backend:?} does not check credentials")
            }
        }
    }

    async fn start_at(
        backend: Backend,
        endpoint: String,
        s3_key: Option<(String, String)>,
    ) -> Landscape {
        // Controller warnings go to stderr, which the test runner shows on failure.
        let _ = granary_runtime::logging::init(granary_runtime::logging::LogFormat::Text, "warn");
        let mut cluster = TestCluster::start().await;
        let seed = cluster.separate_seed().await.client.clone();
        let garden = cluster.client();
        cluster
            .install_crds_from_dir(&garden, &repo_dir("deploy/garden/crds"))
            .await;
        install_seed_crds(&cluster, &seed).await;
        ensure_namespace(&garden, GARDEN_NAMESPACE).await;
        let landscape = Landscape {
            cluster,
            garden,
            seed,
            backend,
            endpoint,
            data_dir: tempfile::tempdir().expect("temp dir"),
            s3_key,
        };
        landscape
            .set_credentials(&landscape.good_credentials())
            .await;
        landscape
    }

    /// Credentials that work on the backend.
    pub fn good_credentials(&self) -> Vec<(String, String)> {
        let pairs: Vec<(&str, &str)> = match self.backend {
            Backend::Local => vec![("note", "the local store needs no credentials")],
            Backend::S3 => vec![
                ("accessKeyID", self.s3_key.as_ref().map_or("test", |k| &k.0)),
                (
                    "secretAccessKey",
                    self.s3_key.as_ref().map_or("test", |k| &k.1),
                ),
                ("endpoint", &self.endpoint),
                ("s3ForcePathStyle", "true"),
            ],
            Backend::Azure => vec![
                ("storageAccount", AZURITE_ACCOUNT),
                ("storageKey", AZURITE_KEY),
                ("endpoint", &self.endpoint),
            ],
            // fake-gcs-server takes anonymous requests.
            Backend::Gcs => vec![("endpoint", &self.endpoint)],
        };
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Creates or replaces the garden credentials secret.
    pub async fn set_credentials(&self, pairs: &[(String, String)]) {
        let api: Api<Secret> = Api::namespaced(self.garden.clone(), GARDEN_NAMESPACE);
        let data: BTreeMap<String, ByteString> = pairs
            .iter()
            .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
            .collect();
        match api.get_opt(CREDENTIALS).await.expect("get secret") {
            Some(mut s) => {
                s.data = Some(data);
                api.replace(CREDENTIALS, &PostParams::default(), &s)
                    .await
                    .expect("replace secret");
            }
            None => {
                let mut s = Secret {
                    data: Some(data),
                    ..Default::default()
                };
                s.metadata.name = Some(CREDENTIALS.to_string());
                api.create(&PostParams::default(), &s)
                    .await
                    .expect("create secret");
            }
        }
    }

    /// A seed configuration for tests: no leader election, a 1 s liveness renewal.
    pub fn config(&self, seed_name: &str) -> SeedConfiguration {
        let mut c = SeedConfiguration {
            seed_name: seed_name.to_string(),
            ..Default::default()
        };
        c.leader_election.enabled = false;
        c.seed_liveness.renew_interval = ConfigDuration(Duration::from_secs(1));
        // A Velero namespace of this test's own: tests side by side on one real cluster
        // never share Velero objects.
        c.velero.namespace = format!("velero-{}", self.cluster.object_selector);
        c
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            local_root: Some(self.data_dir.path().to_path_buf()),
            retry: granary_providers::RetryPolicy::fast(3),
            ..StoreOptions::default()
        }
    }

    /// Starts a seed agent in-process against `seed` (this landscape's seed by default).
    pub async fn start_agent(
        &self,
        seed: Option<Client>,
        config: SeedConfiguration,
    ) -> RunningSeed {
        SeedAgent::new(
            self.garden.clone(),
            seed.unwrap_or_else(|| self.seed.clone()),
            config,
        )
        .store_options(self.store_options())
        .object_selector(Some(self.cluster.object_selector.clone()))
        .metrics_bind_address(Some("127.0.0.1:0".to_string()))
        .start()
        .await
        .expect("seed agent starts")
    }

    /// The object store, as the test sees it.
    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        let data: SecretData = self
            .good_credentials()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        granary_providers::open(
            self.backend.provider(),
            Some("us-east-1"),
            &data,
            &self.store_options(),
        )
        .await
        .expect("open store")
    }

    /// A bucket name unique to this test.
    pub fn bucket_name(&self, tag: &str) -> String {
        format!("b{tag}-{}", self.cluster.object_selector)
    }

    /// An entry name `shoot--p--<tag>-<sel>--<uid>` and its technical ID.
    pub fn entry_name(&self, tag: &str) -> (String, String) {
        let technical = format!("shoot--p--{tag}-{}", self.cluster.object_selector);
        let uid = uuid::Uuid::new_v4().to_string();
        (format!("{technical}--{uid}"), technical)
    }

    pub fn labels(&self, seed: &str) -> BTreeMap<String, String> {
        let (k, v) = self.cluster.instance_label();
        [(k, v), (LABEL_SEED.to_string(), seed.to_string())].into()
    }

    /// Plays the garden controller: a BackupBucket for `seed`.
    pub async fn create_bucket(&self, name: &str, seed: &str) -> core::BackupBucket {
        self.create_bucket_labelled(name, seed, &[]).await
    }

    /// [`Landscape::create_bucket`] with extra labels (e.g. `pool-kind=legacy`).
    pub async fn create_bucket_labelled(
        &self,
        name: &str,
        seed: &str,
        extra_labels: &[(&str, &str)],
    ) -> core::BackupBucket {
        let mut b = core::BackupBucket::new(
            name,
            BackupBucketSpec {
                provider: BackupBucketProvider {
                    type_: self.backend.provider().to_string(),
                    region: "us-east-1".to_string(),
                },
                credentials_ref: Some(granary_api::common::ObjectReference {
                    api_version: "v1".into(),
                    kind: "Secret".into(),
                    name: CREDENTIALS.into(),
                    namespace: GARDEN_NAMESPACE.into(),
                    ..Default::default()
                }),
                seed_name: Some(seed.to_string()),
                ..Default::default()
            },
        );
        let mut labels = self.labels(seed);
        labels.extend(
            extra_labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        b.metadata.labels = Some(labels);
        Api::<core::BackupBucket>::all(self.garden.clone())
            .create(&PostParams::default(), &b)
            .await
            .expect("create garden bucket")
    }

    /// Plays the garden controller: a BackupEntry in project namespace `ns`.
    pub async fn create_entry(
        &self,
        ns: &str,
        name: &str,
        bucket: &str,
        seed: &str,
        annotations: &[(&str, &str)],
    ) -> core::BackupEntry {
        let mut e = core::BackupEntry::new(
            name,
            BackupEntrySpec {
                bucket_name: bucket.to_string(),
                seed_name: Some(seed.to_string()),
                shoot_ref: None,
            },
        );
        e.metadata.namespace = Some(ns.to_string());
        e.metadata.labels = Some(self.labels(seed));
        e.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Api::<core::BackupEntry>::namespaced(self.garden.clone(), ns)
            .create(&PostParams::default(), &e)
            .await
            .expect("create garden entry")
    }

    pub fn buckets(&self) -> Api<core::BackupBucket> {
        Api::all(self.garden.clone())
    }

    pub fn entries(&self, ns: &str) -> Api<core::BackupEntry> {
        Api::namespaced(self.garden.clone(), ns)
    }

    /// Waits until the garden bucket reports Succeeded for its current generation.
    pub async fn wait_bucket_ready(&self, name: &str) -> core::BackupBucket {
        let api = self.buckets();
        poll_until(&format!("garden bucket {name} Succeeded"), || async {
            let b = api.get(name).await.expect("get bucket");
            succeeded(b.status.as_ref().and_then(|s| s.last_operation.as_ref()))
                && b.status.as_ref().and_then(|s| s.observed_generation) == b.metadata.generation
                && b.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_ref())
                    .is_none()
        })
        .await;
        api.get(name).await.expect("get bucket")
    }

    /// Waits until the garden entry reports Succeeded for its current generation.
    pub async fn wait_entry_ready(&self, ns: &str, name: &str) -> core::BackupEntry {
        let api = self.entries(ns);
        poll_until(&format!("garden entry {name} Succeeded"), || async {
            let e = api.get(name).await.expect("get entry");
            succeeded(e.status.as_ref().and_then(|s| s.last_operation.as_ref()))
                && e.status.as_ref().and_then(|s| s.observed_generation) == e.metadata.generation
                && e.status
                    .as_ref()
                    .and_then(|s| s.last_error.as_ref())
                    .is_none()
        })
        .await;
        api.get(name).await.expect("get entry")
    }

    /// Waits until the garden entry is gone (its finalizer removed after the cleanup).
    pub async fn wait_entry_gone(&self, ns: &str, name: &str) {
        let api = self.entries(ns);
        poll_until(&format!("garden entry {name} gone"), || async {
            api.get_opt(name).await.expect("get entry").is_none()
        })
        .await;
    }

    /// Puts `n` objects under `prefix/` in `bucket`, a bounded number at a time (an
    /// emulator answers a few dozen parallel requests fastest; thousands at once only
    /// queue up in its accept backlog).
    pub async fn fill(&self, bucket: &str, prefix: &str, n: usize) {
        use futures::{StreamExt, TryStreamExt};
        const IN_FLIGHT: usize = 32;
        let store = self.store().await;
        futures::stream::iter(0..n)
            .map(|i| {
                let store = store.clone();
                let key = format!("{prefix}/etcd-main/obj-{i:05}");
                async move {
                    store
                        .put(bucket, &key, bytes::Bytes::from_static(b"x"))
                        .await
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<()>()
            .await
            .expect("objects written");
    }

    /// How many objects are under `prefix` in `bucket`.
    pub async fn count(&self, bucket: &str, prefix: &str) -> usize {
        let store = self.store().await;
        granary_providers::list_all(store.as_ref(), bucket, prefix, None)
            .await
            .map(|l| l.len())
            .unwrap_or(0)
    }
}

fn succeeded(op: Option<&granary_api::common::LastOperation>) -> bool {
    op.is_some_and(|o| o.state == granary_api::common::LastOperationState::Succeeded)
}

/// Creates namespace `name` if missing.
pub async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.expect("get namespace").is_some() {
        return;
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    let _ = api.create(&PostParams::default(), &ns).await;
}

/// True when the garden object carries the `gardener` finalizer.
pub fn has_gardener_finalizer<K: ResourceExt>(obj: &K) -> bool {
    obj.finalizers().iter().any(|f| f == FINALIZER_GARDENER)
}

/// Creates, in a moto started with authentication on, a user with an access key and an
/// allow-all policy, during the three calls moto takes without credentials. Returns the
/// key's ID and secret.
async fn moto_user(endpoint: &str) -> (String, String) {
    let policy =
        r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    iam(
        endpoint,
        &[("Action", "CreateUser"), ("UserName", "granary")],
    )
    .await;
    let key = iam(
        endpoint,
        &[("Action", "CreateAccessKey"), ("UserName", "granary")],
    )
    .await;
    iam(
        endpoint,
        &[
            ("Action", "PutUserPolicy"),
            ("UserName", "granary"),
            ("PolicyName", "all"),
            ("PolicyDocument", policy),
        ],
    )
    .await;
    (
        xml_field(&key, "AccessKeyId"),
        xml_field(&key, "SecretAccessKey"),
    )
}

/// One IAM query-API call (a form POST over plain HTTP/1.1) to moto; the response body.
async fn iam(endpoint: &str, form: &[(&str, &str)]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = endpoint.trim_start_matches("http://");
    let body = form
        .iter()
        .chain(&[("Version", "2010-05-08")])
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    // moto routes by the credential scope's service; it checks no signature during
    // its first unauthenticated calls.
    let request = format!(
        "POST / HTTP/1.1\r\nHost: iam.amazonaws.com\r\nConnection: close\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to moto");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("IAM request sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("IAM response");
    assert!(
        response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200"),
        "IAM {form:?}: {response}"
    );
    response
}

fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn xml_field(xml: &str, name: &str) -> String {
    let open = format!("<{name}>");
    let start = xml.find(&open).unwrap_or_else(|| panic!("{name} in {xml}")) + open.len();
    let end = xml[start..].find('<').expect("closing tag") + start;
    xml[start..end].to_string()
}

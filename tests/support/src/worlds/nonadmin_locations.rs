//! The world of the tests of namespace owners' own locations and downloads
//! (nonadmin_locations, attack_local_links, attack_planted_backups): the embedded API
//! server with the owners of [`super::nonadmin`], the controllers, and a `tenants`
//! bucket the owners point their own locations at.

use crate::poll_until;
use chrono::Utc;
use granary_api::oadp::{
    NonAdminBackup, NonAdminBackupSpec, NonAdminBackupStorageLocation,
    NonAdminBackupStorageLocationSpec, NonAdminDownloadRequest, NonAdminDownloadRequestSpec,
    NonAdminPhase,
};
use granary_api::velero::{
    BackupSpec, BackupStorageLocation, BackupStorageLocationPhase, BackupStorageLocationSpec,
    DownloadTarget, DownloadTargetKind, ObjectStorageLocation,
};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_providers::{BucketOptions, ListEntry, ObjectStore, StoreOptions};
use granary_runtime::clock::Clock;
use granary_runtime::config::ConfigDuration;
use granary_runtime::metrics::Metrics;
use granary_runtime::selector::ObjectSelector;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::server::run_controllers;
use granary_velero_server::settings::VeleroSettings;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, SecretKeySelector};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};

use super::nonadmin::{TOKENS, client_as, install_seed_crds_and_owner_role};
use std::sync::Arc;
use std::time::Duration;

pub const VELERO: &str = "velero";
pub const BUCKET: &str = "nonadmin";
pub const PREFIX: &str = "velero";
/// The bucket the namespace owners point their own locations at.
pub const TENANTS: &str = "tenants";

pub struct World {
    _server: EmbeddedServer,
    pub admin: Client,
    pub owner_a: Client,
    pub owner_b: Client,
    pub store: Arc<dyn ObjectStore>,
    pub clock: Clock,
    /// The `local` store's data directory.
    pub data: tempfile::TempDir,
    _dir: tempfile::TempDir,
    pub controllers: tokio::task::JoinHandle<()>,
}

impl Drop for World {
    fn drop(&mut self) {
        self.controllers.abort();
    }
}

pub async fn bind(admin: &Client, ns: &str, user: &str, kind: &str, role: &str) {
    let mut b = RoleBinding::default();
    b.metadata.name = Some(format!("{user}-{role}"));
    b.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: role.into(),
    };
    b.subjects = Some(vec![Subject {
        kind: "User".into(),
        name: user.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &b)
        .await
        .expect("rolebinding");
}

/// deploy/seed/nonadmin-rbac.yaml does not name NonAdminDownloadRequests yet: the owners
/// get them from a Role of their namespace.
pub async fn download_role(admin: &Client, ns: &str) {
    let mut r = Role::default();
    r.metadata.name = Some("nonadmin-downloads".into());
    r.rules = Some(vec![PolicyRule {
        api_groups: Some(vec!["oadp.openshift.io".into()]),
        resources: Some(vec!["nonadmindownloadrequests".into()]),
        verbs: ["create", "delete", "get", "list", "watch"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    }]);
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &r)
        .await
        .expect("role");
}

pub async fn start(adjust: impl FnOnce(&mut VeleroSettings)) -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).expect("token file");
    let server = EmbeddedServer::start_with_token_file(EmbeddedOptions::default(), &tokens)
        .await
        .expect("server");
    let admin = client_as(&server, "root-token-0123456789").await;
    install_seed_crds_and_owner_role(&admin).await;
    for ns in [VELERO, "ns-a", "ns-b"] {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.into());
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &n)
            .await
            .expect("namespace");
    }
    for (ns, user) in [("ns-a", "owner-a"), ("ns-b", "owner-b")] {
        bind(&admin, ns, user, "ClusterRole", "admin").await;
        bind(&admin, ns, user, "ClusterRole", "nonadmin-editor-role").await;
        download_role(&admin, ns).await;
        bind(&admin, ns, user, "Role", "nonadmin-downloads").await;
    }
    let data = tempfile::tempdir().expect("data");
    let options = StoreOptions {
        local_root: Some(data.path().to_path_buf()),
        ..StoreOptions::default()
    };
    let store = granary_providers::open("local", None, &Default::default(), &options)
        .await
        .expect("store");
    for bucket in [BUCKET, TENANTS] {
        store
            .ensure_bucket(bucket, &BucketOptions::default())
            .await
            .expect("bucket");
    }
    let location = BackupStorageLocation::new(
        "default",
        BackupStorageLocationSpec {
            provider: "local".into(),
            object_storage: ObjectStorageLocation {
                bucket: BUCKET.into(),
                prefix: Some(PREFIX.into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let locations: Api<BackupStorageLocation> = Api::namespaced(admin.clone(), VELERO);
    locations
        .create(&PostParams::default(), &location)
        .await
        .expect("location");
    let mut settings = VeleroSettings {
        namespace: VELERO.into(),
        // Expiry is noticed on the controllers' recheck, not only on a change.
        queued_backup_recheck_frequency: ConfigDuration(Duration::from_millis(500)),
        ..VeleroSettings::default()
    };
    settings.non_admin.enable = true;
    // The tenants' locations use the `local` provider (the server's own disk), which only
    // the administrator may choose, as `granary dev` does: `enforceBSLSpec: {provider: local}`.
    settings.non_admin.enforce_bsl_spec.provider = "local".into();
    settings.non_admin.allowed_local_buckets = vec![TENANTS.to_string()];
    adjust(&mut settings);
    // A clock the test moves, to reach a download URL's expiration.
    let clock = Clock::manual(Utc::now());
    let ctx = Arc::new(VeleroContext::new(
        server.client().await.expect("controller client"),
        settings,
        options,
        clock.clone(),
        VeleroMetrics::new(&Metrics::new()),
        ObjectSelector::new(None),
    ));
    let controllers = tokio::spawn(run_controllers(ctx, vec![]));
    poll_until("location Available", || async {
        locations
            .get("default")
            .await
            .ok()
            .and_then(|l| l.status)
            .and_then(|s| s.phase)
            == Some(BackupStorageLocationPhase::Available)
    })
    .await;
    World {
        owner_a: client_as(&server, "owner-a-token-0123456789").await,
        owner_b: client_as(&server, "owner-b-token-0123456789").await,
        _server: server,
        admin,
        store,
        clock,
        data,
        _dir: dir,
        controllers,
    }
}

impl World {
    pub fn velero<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.admin.clone(), VELERO)
    }

    pub async fn velero_names<K>(&self) -> Vec<String>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.velero::<K>()
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .iter()
            .map(|o| o.name_any())
            .collect()
    }

    /// The owner's credentials Secret `creds` (key `cloud`) in `ns`.
    pub async fn secret(&self, owner: &Client, ns: &str, name: &str) {
        let mut s = Secret::default();
        s.metadata.name = Some(name.into());
        s.data = Some(
            [(
                "cloud".to_string(),
                ByteString(format!("credentials of {ns}").into_bytes()),
            )]
            .into(),
        );
        Api::<Secret>::namespaced(owner.clone(), ns)
            .create(&PostParams::default(), &s)
            .await
            .expect("secret");
    }

    /// ns-a's own location `body` (credentials: ns-a's Secret `creds`, made here),
    /// created by ns-a's owner and waited on until it is available.
    pub async fn own_location(
        &self,
        body: &NonAdminBackupStorageLocation,
    ) -> NonAdminBackupStorageLocation {
        let nabsls: Api<NonAdminBackupStorageLocation> =
            Api::namespaced(self.owner_a.clone(), "ns-a");
        self.secret(&self.owner_a, "ns-a", "creds").await;
        nabsls
            .create(&PostParams::default(), body)
            .await
            .expect("create nabsl");
        wait_available(&nabsls, &body.name_any()).await
    }

    pub async fn tenant_keys(&self, dir: &str) -> Vec<String> {
        granary_providers::list_all(self.store.as_ref(), TENANTS, dir, None)
            .await
            .expect("list")
            .into_iter()
            .filter_map(|e| match e {
                ListEntry::Object(m) => Some(m.key),
                ListEntry::Prefix(_) => None,
            })
            .collect()
    }
}

pub fn nabsl(
    name: &str,
    bucket: &str,
    prefix: Option<&str>,
    secret: &str,
) -> NonAdminBackupStorageLocation {
    NonAdminBackupStorageLocation::new(
        name,
        NonAdminBackupStorageLocationSpec {
            backup_storage_location_spec: BackupStorageLocationSpec {
                provider: "local".into(),
                object_storage: ObjectStorageLocation {
                    bucket: bucket.into(),
                    prefix: prefix.map(String::from),
                    ..Default::default()
                },
                credential: Some(SecretKeySelector {
                    name: secret.into(),
                    key: "cloud".into(),
                    optional: None,
                }),
                ..Default::default()
            },
        },
    )
}

pub fn nab(name: &str, location: Option<&str>) -> NonAdminBackup {
    NonAdminBackup::new(
        name,
        NonAdminBackupSpec {
            backup_spec: BackupSpec {
                storage_location: location.map(String::from),
                ..Default::default()
            },
            delete_backup: None,
        },
    )
}

pub fn nadr(name: &str, kind: DownloadTargetKind, target: &str) -> NonAdminDownloadRequest {
    NonAdminDownloadRequest::new(
        name,
        NonAdminDownloadRequestSpec {
            target: DownloadTarget {
                kind,
                name: target.into(),
            },
        },
    )
}

/// Creates `request` and waits until it is served (Created); a refusal fails the test.
pub async fn created_download(
    api: &Api<NonAdminDownloadRequest>,
    request: NonAdminDownloadRequest,
) {
    let name = request.name_any();
    api.create(&PostParams::default(), &request)
        .await
        .expect("nadr");
    poll_until(&format!("download {name} served"), || async {
        let s = api
            .get(&name)
            .await
            .expect("nadr")
            .status
            .unwrap_or_default();
        if s.phase == Some(NonAdminPhase::BackingOff) {
            panic!("download {name} refused: {:?}", s.conditions);
        }
        s.phase == Some(NonAdminPhase::Created)
    })
    .await;
}

pub fn condition(v: &serde_json::Value, type_: &str) -> Option<serde_json::Value> {
    v["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
}

pub async fn json_of<K>(api: &Api<K>, name: &str) -> serde_json::Value
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + serde::Serialize,
{
    serde_json::to_value(api.get(name).await.expect("object")).expect("json")
}

/// Waits until the NABSL is `Created` with an Available Velero location; returns it.
pub async fn wait_available(
    api: &Api<NonAdminBackupStorageLocation>,
    name: &str,
) -> NonAdminBackupStorageLocation {
    poll_until(
        &format!("NonAdminBackupStorageLocation {name} available"),
        || async {
            let n = api.get(name).await.expect("nabsl");
            let s = n.status.unwrap_or_default();
            if s.phase == Some(NonAdminPhase::BackingOff) {
                panic!("{name} refused: {:?}", s.conditions);
            }
            s.phase == Some(NonAdminPhase::Created)
                && s.velero_backup_storage_location
                    .and_then(|v| v.status)
                    .and_then(|s| s.phase)
                    == Some(BackupStorageLocationPhase::Available)
        },
    )
    .await;
    api.get(name).await.expect("nabsl")
}

/// Waits until the object is `BackingOff` with `Accepted=False`; returns the message.
pub async fn wait_refused<K>(api: &Api<K>, name: &str) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + serde::Serialize,
{
    poll_until(&format!("{name} looked at"), || async {
        condition(&json_of(api, name).await, "Accepted").is_some()
    })
    .await;
    let v = json_of(api, name).await;
    let c = condition(&v, "Accepted").expect("Accepted");
    assert_eq!(c["status"], "False", "{name} was accepted: {v}");
    assert_eq!(v["status"]["phase"], "BackingOff");
    c["message"].as_str().unwrap_or_default().to_string()
}

pub fn uuid_of(n: &NonAdminBackupStorageLocation) -> String {
    n.status
        .clone()
        .and_then(|s| s.velero_backup_storage_location)
        .and_then(|v| v.nacuuid)
        .expect("nacuuid")
}

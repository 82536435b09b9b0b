//! The RBAC of `deploy/` against a recorded run: the garden controllers and a seed agent
//! run in-process against two embedded servers that record every call, each client
//! impersonating the ServiceAccount it is deployed as, through a placement, the seed's
//! provisioning, an entry's deletion and a bucket's deletion (`local` provider). Then
//! every call must be allowed by the roles bound to its caller, and every granted cell
//! must have been used by some call (or be allowlisted below with its reason).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use granary_api::core::{
    ANNOTATION_OPERATION, BackupBucket, BackupEntry, GARDEN_NAMESPACE, LABEL_INSTANCE, Shoot,
    bucket_secret_name,
};
use granary_apiserver::{ApiCall, EmbeddedServer};
use granary_garden::GardenController;
use granary_garden::config::GardenConfiguration;
use granary_garden::seed_authz::{
    Attributes, Decision, GardenView, Policy, ResourceRequest, decide,
};
use granary_runtime::config::Override;
use granary_runtime::selector::ObjectSelector;
use granary_seed::SeedAgent;
use granary_seed::config::SeedConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use super::{GARDEN_USER, SEED_USER, ensure_namespace};
use granary_test_support::garden::{backup, create_profile, create_seed, shoot};
use granary_test_support::manifests::{
    self, Doc, config_from_configmap, denied, grants_for, unused,
};
use granary_test_support::poll_until;
use granary_test_support::seed::{Backend, CREDENTIALS, Landscape};

/// Granted cells a short run cannot exercise: (role, resource, verb, why).
const ALLOWED_UNUSED: &[(&str, &str, &str, &str)] = &[
    (
        "ClusterRole/granary-garden",
        "backupbuckets",
        "get",
        "the placement ledger fetches a bucket after a refused count write, for a move into a bucket its cache does not show yet, and before removing an empty shard; a run without a conflict makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "restores",
        "patch",
        "the restore controller writes a restore's phase, finalizer and queue annotations; the run makes no restore",
    ),
    (
        "ClusterRole/granary-seed",
        "backups",
        "patch",
        "the backup queue patches a backup's phase; the run takes no Velero backup",
    ),
    (
        "ClusterRole/granary-seed",
        "backups",
        "get",
        "the deletion controller reads the backup a request names; the run makes no request",
    ),
    (
        "ClusterRole/granary-seed",
        "backups",
        "create",
        "backup sync imports backups from object storage and schedules create backups; the run has neither",
    ),
    (
        "ClusterRole/granary-seed",
        "backups",
        "delete",
        "a backup is deleted by a deletion request or by sync when gone from the bucket; the run has neither",
    ),
    (
        "ClusterRole/granary-seed",
        "deletebackuprequests",
        "get",
        "a request is read when processed; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "deletebackuprequests",
        "create",
        "gc asks for the deletion of an expired backup; the run has no backup",
    ),
    (
        "ClusterRole/granary-seed",
        "deletebackuprequests",
        "patch",
        "a request's status is patched when processed; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "deletebackuprequests",
        "delete",
        "processed requests are removed after 24h or when another succeeds; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "schedules",
        "get",
        "a schedule is read when reconciled; the run has none",
    ),
    (
        "ClusterRole/granary-seed",
        "schedules",
        "patch",
        "a schedule's status is patched when reconciled; the run has none",
    ),
    (
        "ClusterRole/granary-seed",
        "restores",
        "list",
        "the restores of a deleted backup are looked up; the run deletes no backup",
    ),
    (
        "ClusterRole/granary-seed",
        "restores",
        "delete",
        "the restores of a deleted backup are removed; the run deletes no backup",
    ),
    (
        "ClusterRole/granary-seed",
        "restores",
        "get",
        "a download request for a restore's file reads the restore; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "downloadrequests",
        "get",
        "a download request is read when processed; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "downloadrequests",
        "patch",
        "a download request's status gets its URL; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "downloadrequests",
        "delete",
        "download requests are removed when they expire; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "serverstatusrequests",
        "get",
        "a server status request is read when processed; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "serverstatusrequests",
        "patch",
        "a server status request's status is written; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "serverstatusrequests",
        "delete",
        "server status requests are removed a minute after; the run makes none",
    ),
    (
        "ClusterRole/granary-seed",
        "events",
        "patch",
        "an event raised again is patched (its series); the run raises each event once",
    ),
    (
        "ClusterRole/granary-garden",
        "backupbuckets",
        "delete",
        "empty shards are removed only with controllers.backupBucket.removeEmptyShardsAfter \
         set (off in the shipped configuration), after that delay",
    ),
    (
        "ClusterRole/granary-garden",
        "backupentries",
        "patch",
        "an entry is patched only when its shoot moves to another seed",
    ),
    (
        "ClusterRole/granary-garden",
        "events",
        "patch",
        "an event raised again is patched (its series); the run raises each event once",
    ),
];

/// Cells of the non-admin controllers: they run only with `velero.nonAdmin.enable`, off
/// in the shipped configuration and so in this run (their calls are exercised by
/// tests/e2e/nonadmin.rs and nonadmin_locations.rs). (resource, verb).
const NON_ADMIN_UNUSED: &[(&str, &str)] = &[
    ("namespaces", "list"),
    ("backupstoragelocations", "update"),
    ("backupstoragelocations", "delete"),
    ("restores", "create"),
    ("downloadrequests", "create"),
    ("nonadminbackups", "get"),
    ("nonadminbackups", "list"),
    ("nonadminbackups", "watch"),
    ("nonadminbackups", "create"),
    ("nonadminbackups", "patch"),
    ("nonadminbackups", "delete"),
    ("nonadminrestores", "get"),
    ("nonadminrestores", "list"),
    ("nonadminrestores", "watch"),
    ("nonadminrestores", "patch"),
    ("nonadminrestores", "delete"),
    ("nonadminbackupstoragelocations", "get"),
    ("nonadminbackupstoragelocations", "list"),
    ("nonadminbackupstoragelocations", "watch"),
    ("nonadminbackupstoragelocations", "patch"),
    ("nonadminbackupstoragelocationrequests", "get"),
    ("nonadminbackupstoragelocationrequests", "list"),
    ("nonadminbackupstoragelocationrequests", "watch"),
    ("nonadminbackupstoragelocationrequests", "create"),
    ("nonadminbackupstoragelocationrequests", "patch"),
    ("nonadminbackupstoragelocationrequests", "delete"),
    ("nonadmindownloadrequests", "list"),
    ("nonadmindownloadrequests", "watch"),
    ("nonadmindownloadrequests", "delete"),
    ("nonadminbackups/status", "patch"),
    ("nonadminrestores/status", "patch"),
    ("nonadminbackupstoragelocations/status", "patch"),
    ("nonadmindownloadrequests/status", "patch"),
    ("nonadminbackupstoragelocationrequests/status", "update"),
];

/// Seed calls in the garden the seed authorization decision refuses today: (verb,
/// resource, why). Each is a known gap of the seed agent, not of the decision.
const ALLOWED_DENIED: &[(&str, &str, &str)] = &[];

/// The garden's buckets and entries as last seen (deletions ignored), so calls made
/// while an object existed are judged against it after it is gone.
#[derive(Clone, Default)]
struct LastSeen {
    buckets: Arc<Mutex<BTreeMap<String, Arc<BackupBucket>>>>,
    entries: Arc<Mutex<BTreeMap<String, Arc<BackupEntry>>>>,
}

impl LastSeen {
    fn follow(&self, client: &Client, selector: &str) -> Vec<tokio::task::JoinHandle<()>> {
        fn keep<K>(
            api: Api<K>,
            selector: &str,
            into: Arc<Mutex<BTreeMap<String, Arc<K>>>>,
        ) -> tokio::task::JoinHandle<()>
        where
            K: kube::Resource
                + Clone
                + std::fmt::Debug
                + serde::de::DeserializeOwned
                + Send
                + Sync
                + 'static,
            K::DynamicType: Default,
        {
            let config = watcher::Config::default().labels(&format!("{LABEL_INSTANCE}={selector}"));
            tokio::spawn(async move {
                let stream = watcher::watcher(api, config).default_backoff();
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = event {
                        let key = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                        into.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key, Arc::new(o));
                    }
                }
            })
        }
        vec![
            keep(
                Api::<BackupBucket>::all(client.clone()),
                selector,
                self.buckets.clone(),
            ),
            keep(
                Api::<BackupEntry>::all(client.clone()),
                selector,
                self.entries.clone(),
            ),
        ]
    }

    /// The calls of `user` the seed authorization decision does not allow.
    fn denied<'a>(&self, calls: &'a [ApiCall], user: &str) -> Vec<(&'a ApiCall, String)> {
        let buckets: Vec<_> = self
            .buckets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let entries: Vec<_> = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
        let view = GardenView {
            buckets: &buckets,
            entries: &entries,
        };
        // The recorder keeps no label selectors; the seed's lists and watches select its
        // seed label (granary-seed's `agent`), which tests/e2e/seed_authz.rs checks end to end.
        let policy = Policy {
            allow_list_without_label_selector: true,
            ..Policy::default()
        };
        calls
            .iter()
            .filter(|c| c.user == user && c.non_resource_path.is_empty())
            .filter_map(|c| {
                let attrs = Attributes {
                    user: c.user.clone(),
                    groups: vec![],
                    resource: Some(ResourceRequest {
                        verb: c.verb.clone(),
                        group: c.group.clone(),
                        resource: c.resource.clone(),
                        subresource: c.subresource.clone(),
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        ..ResourceRequest::default()
                    }),
                };
                match decide(&attrs, view, &policy) {
                    Decision::Allow => None,
                    Decision::Deny(why) => Some((c, why)),
                    Decision::NoOpinion => Some((c, "no opinion, and no RBAC".to_string())),
                }
            })
            .collect()
    }
}

/// A client of `server` that impersonates `user` (the recorder's notion of the caller).
async fn client_as(server: &EmbeddedServer, user: &str) -> Client {
    let kubeconfig = server.kubeconfig().expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config from kubeconfig");
    config.auth_info.impersonate = Some(user.to_string());
    Client::try_from(config).expect("client")
}

fn side_docs(side: &str) -> Vec<Doc> {
    manifests::load_kustomization(&manifests::deploy_dir().join(side))
}

fn report(title: &str, calls: &[&ApiCall]) -> String {
    let mut lines: Vec<String> = calls
        .iter()
        .map(|c| {
            format!(
                "  {} {}/{}{}{} ns={:?}",
                c.verb,
                c.group,
                c.resource,
                if c.subresource.is_empty() { "" } else { "/" },
                c.subresource,
                c.namespace
            )
        })
        .collect();
    lines.sort();
    lines.dedup();
    format!("{title}:\n{}", lines.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_of_deploy_covers_every_recorded_call_and_grants_nothing_more() {
    let Some(l) = Landscape::start(Backend::Local).await else {
        return;
    };
    let tc = &l.cluster;
    if !tc.is_embedded() {
        eprintln!("SKIPPED: recording API calls needs the embedded server");
        return;
    }
    let garden_server = tc.garden.server.as_ref().expect("embedded garden");
    let seed_server = tc
        .seed
        .as_ref()
        .and_then(|s| s.server.as_ref())
        .expect("embedded seed");
    ensure_namespace(&l.garden, "granary-system").await;
    ensure_namespace(&l.seed, "granary-system").await;
    garden_server.record_requests();
    seed_server.record_requests();
    let last_seen = LastSeen::default();
    let following = last_seen.follow(&l.garden, &tc.object_selector);

    let deploy = manifests::deploy_dir();
    let garden_config: GardenConfiguration =
        config_from_configmap(&deploy.join("garden/configmap.yaml"), &[])
            .expect("the garden ConfigMap loads");
    let garden = GardenController::new(client_as(garden_server, GARDEN_USER).await, garden_config)
        .object_selector(ObjectSelector::new(Some(tc.object_selector.clone())))
        .start()
        .expect("garden starts");

    let profile = tc.name("local");
    let seed_name = tc.name("seed");
    create_profile(
        tc,
        &profile,
        "local",
        Some(backup("local", None, CREDENTIALS)),
    )
    .await;
    create_seed(tc, &seed_name, "local", "eu-1", None).await;

    // A shoot: the garden places its entry in a new bucket and assigns it to the seed
    // once the seed agent runs; the seed provisions both and writes the shoot's
    // etcd-backup secret.
    let project = tc.namespace("garden-rbac").await;
    let web = shoot(tc, &project, "web", &profile, &seed_name);
    ensure_namespace(&l.seed, &web.technical_id()).await;
    Api::<Shoot>::namespaced(l.garden.clone(), &project)
        .create(&PostParams::default(), &web)
        .await
        .expect("shoot created");
    let entries = l.entries(&project);
    poll_until("entry placed", || async {
        !entries
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    })
    .await;
    let entry = entries
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .remove(0);
    let bucket_name = entry.spec.bucket_name.clone();
    // The seed agent starts only now: with no liveness Lease yet, the garden made the
    // bucket without a seed and assigns it once the seed is ready (an event), rather
    // than either way depending on which came first.
    assert_eq!(
        l.buckets()
            .get(&bucket_name)
            .await
            .expect("bucket")
            .spec
            .seed_name,
        None,
        "a bucket made before its seed was ready has no seed yet"
    );
    let seed_config: SeedConfiguration = config_from_configmap(
        &deploy.join("seed/configmap.yaml"),
        &[
            Override::new("seedName", seed_name.clone()),
            // Renew the liveness Lease within the run (an update after the create).
            Override::new("seedLiveness.renewInterval", "500ms"),
            // Renew the Velero namespace's Lease within the run too: with the shipped 2s
            // a quick run could end before the first renewal.
            Override::new("leaderElection.retryPeriod", "200ms"),
        ],
    )
    .expect("the seed ConfigMap loads");
    // The seed's garden identity: the ServiceAccount the webhook knows it by.
    let seed_in_garden = format!("system:serviceaccount:granary-system:granary-seed-{seed_name}");
    let agent = SeedAgent::new(
        client_as(garden_server, &seed_in_garden).await,
        client_as(seed_server, SEED_USER).await,
        seed_config,
    )
    .store_options(l.store_options())
    .object_selector(Some(tc.object_selector.clone()))
    .start()
    .await
    .expect("seed agent starts");
    l.wait_bucket_ready(&bucket_name).await;
    l.wait_entry_ready(&project, &entry.name_any()).await;
    let etcd: Api<Secret> = Api::namespaced(l.seed.clone(), &web.technical_id());
    poll_until("etcd-backup secret", || async {
        etcd.get_opt("etcd-backup").await.expect("get").is_some()
    })
    .await;

    // Rotated credentials: a reconcile asked for on the bucket replaces the seed's copy.
    let mut rotated = l.good_credentials();
    rotated.push(("rotated".to_string(), "yes".to_string()));
    l.set_credentials(&rotated).await;
    let reconcile =
        serde_json::json!({"metadata": {"annotations": {ANNOTATION_OPERATION: "reconcile"}}});
    l.buckets()
        .patch(
            &bucket_name,
            &PatchParams::default(),
            &Patch::Merge(&reconcile),
        )
        .await
        .expect("bucket annotated");
    let copies: Api<Secret> = Api::namespaced(l.seed.clone(), GARDEN_NAMESPACE);
    poll_until("rotated credentials on the seed", || async {
        copies
            .get_opt(&bucket_secret_name(&bucket_name))
            .await
            .expect("get")
            .and_then(|s| s.data)
            .is_some_and(|d| d.contains_key("rotated"))
    })
    .await;
    // The liveness Lease has been renewed (not only created).
    let leases: Api<Lease> = Api::namespaced(l.garden.clone(), GARDEN_NAMESPACE);
    let lease_name = format!("seed-{seed_name}");
    let first = leases
        .get(&lease_name)
        .await
        .expect("liveness lease")
        .resource_version();
    poll_until("liveness lease renewed", || async {
        leases
            .get(&lease_name)
            .await
            .expect("lease")
            .resource_version()
            != first
    })
    .await;

    // The Velero namespace's Lease has been renewed too (granted `update`).
    let velero_leases: Api<Lease> = Api::namespaced(l.seed.clone(), "velero");
    let first = velero_leases
        .get(granary_velero_server::server::VELERO_LEASE)
        .await
        .expect("velero lease")
        .resource_version();
    poll_until("velero lease renewed", || async {
        velero_leases
            .get(granary_velero_server::server::VELERO_LEASE)
            .await
            .expect("lease")
            .resource_version()
            != first
    })
    .await;

    // The shoot goes: its entry is deleted (grace 0) and released by the seed.
    Api::<Shoot>::namespaced(l.garden.clone(), &project)
        .delete("web", &DeleteParams::default())
        .await
        .expect("shoot deleted");
    l.wait_entry_gone(&project, &entry.name_any()).await;
    // The bucket goes: the garden lets go, the seed deletes it at the provider.
    let buckets: Api<BackupBucket> = Api::all(l.garden.clone());
    let old_uid = buckets.get(&bucket_name).await.expect("bucket").uid();
    buckets
        .delete(&bucket_name, &DeleteParams::default())
        .await
        .expect("bucket deletion requested");
    poll_until("bucket deleted", || async {
        buckets
            .get_opt(&bucket_name)
            .await
            .expect("get")
            .and_then(|b| b.uid())
            != old_uid
    })
    .await;
    agent.shutdown().await;
    garden.stop().await;
    for task in following {
        task.abort();
    }

    let garden_calls = garden_server.recorded_requests();
    let seed_calls = seed_server.recorded_requests();
    let garden_docs = side_docs("garden");
    let checks = [
        (
            "garden controllers in the garden",
            &garden_docs,
            &garden_calls,
            GARDEN_USER,
        ),
        (
            "seed agent in the seed",
            &side_docs("seed"),
            &seed_calls,
            SEED_USER,
        ),
    ];
    let mut problems = Vec::new();
    for (who, docs, calls, user) in checks {
        let mine: Vec<&ApiCall> = calls.iter().filter(|c| c.user == user).collect();
        assert!(!mine.is_empty(), "{who}: no calls recorded");
        eprintln!("{}", report(&format!("{who} ({user})"), &mine));
        let grants = grants_for(docs, user);
        let denied = denied(&grants, calls, user);
        if !denied.is_empty() {
            problems.push(report(&format!("{who}: calls no rule allows"), &denied));
        }
        let excused: Vec<(&str, &str, &str, &str)> = ALLOWED_UNUSED
            .iter()
            .copied()
            .chain(NON_ADMIN_UNUSED.iter().map(|(resource, verb)| {
                (
                    "ClusterRole/granary-seed",
                    *resource,
                    *verb,
                    "non-admin controllers are off in the shipped configuration",
                )
            }))
            .collect();
        let unused = unused(&grants, calls, user, &excused);
        if !unused.is_empty() {
            problems.push(format!(
                "{who}: granted but never needed:\n  {}",
                unused.into_iter().collect::<Vec<_>>().join("\n  ")
            ));
        }
    }
    // The seed agent in the garden: no RBAC, the seed authorization decision alone.
    let mine: Vec<&ApiCall> = garden_calls
        .iter()
        .filter(|c| c.user == seed_in_garden)
        .collect();
    assert!(
        !mine.is_empty(),
        "seed agent in the garden: no calls recorded"
    );
    eprintln!(
        "{}",
        report(
            &format!("seed agent in the garden ({seed_in_garden})"),
            &mine
        )
    );
    let refused: Vec<String> = last_seen
        .denied(&garden_calls, &seed_in_garden)
        .into_iter()
        .filter(|(c, _)| {
            !ALLOWED_DENIED
                .iter()
                .any(|(verb, resource, _)| c.verb == *verb && c.resource == *resource)
        })
        .map(|(c, why)| {
            format!(
                "  {} {}/{} {}/{}: {why}",
                c.verb, c.resource, c.subresource, c.namespace, c.name
            )
        })
        .collect();
    if !refused.is_empty() {
        problems.push(format!(
            "seed agent in the garden: calls the seed authorization refuses:\n{}",
            refused.join("\n")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

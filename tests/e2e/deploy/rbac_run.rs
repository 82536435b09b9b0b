//! The RBAC of `deploy/` against a recorded run: the garden controllers and a seed agent
//! run in-process against two embedded servers that record every call, each client
//! impersonating the ServiceAccount it is deployed as, through a placement, the seed's
//! provisioning, an entry's deletion and a bucket's deletion (`local` provider). Then
//! every call must be allowed by the roles bound to its caller, and every granted cell
//! must have been used by some call (or be allowlisted below with its reason).

use granary::api::core::{
    ANNOTATION_OPERATION, BackupBucket, GARDEN_NAMESPACE, Shoot, bucket_secret_name,
};
use granary::embedded::{ApiCall, EmbeddedServer};
use granary::garden::GardenController;
use granary::runtime::config::{GardenConfiguration, Override, SeedConfiguration};
use granary::runtime::selector::ObjectSelector;
use granary::seed::SeedAgent;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use super::manifests::{self, Doc, config_from_configmap, denied, grants_for, unused};
use super::{GARDEN_USER, SEED_IN_GARDEN_USER, SEED_USER, ensure_namespace};
use crate::garden::{backup, create_profile, create_seed, shoot};
use crate::seed_support::{Backend, CREDENTIALS, Landscape};
use crate::support::poll_until;

/// Granted cells a short run cannot exercise: (role, resource, verb, why).
const ALLOWED_UNUSED: &[(&str, &str, &str, &str)] = &[
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
    let seed_config: SeedConfiguration = config_from_configmap(
        &deploy.join("seed/configmap.yaml"),
        &[
            Override::new("seedName", seed_name.clone()),
            // Renew the liveness Lease within the run (an update after the create).
            Override::new("seedLiveness.renewInterval", "500ms"),
        ],
    )
    .expect("the seed ConfigMap loads");
    let agent = SeedAgent::new(
        client_as(garden_server, SEED_IN_GARDEN_USER).await,
        client_as(seed_server, SEED_USER).await,
        seed_config,
    )
    .store_options(l.store_options())
    .object_selector(Some(tc.object_selector.clone()))
    .start()
    .await
    .expect("seed agent starts");

    // A shoot: the garden places its entry in a new bucket assigned to the seed, the
    // seed provisions both and writes the shoot's etcd-backup secret.
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

    let garden_calls = garden_server.recorded_requests();
    let seed_calls = seed_server.recorded_requests();
    let garden_docs = side_docs("garden");
    let mut garden_docs_with_seed = garden_docs.clone();
    garden_docs_with_seed.extend(manifests::read_docs(
        &deploy.join("examples/overlays/garden/seed-access.yaml"),
    ));
    let checks = [
        (
            "garden controllers in the garden",
            &garden_docs,
            &garden_calls,
            GARDEN_USER,
        ),
        (
            "seed agent in the garden",
            &garden_docs_with_seed,
            &garden_calls,
            SEED_IN_GARDEN_USER,
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
        let unused = unused(&grants, calls, user, ALLOWED_UNUSED);
        if !unused.is_empty() {
            problems.push(format!(
                "{who}: granted but never needed:\n  {}",
                unused.into_iter().collect::<Vec<_>>().join("\n  ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

//! Restores (#17) end to end against the embedded API server and the local provider:
//! real backups taken by the controllers, restored by the `restore` controller.
//! An application with a CRD, custom resources owning ConfigMaps, a Deployment owning a
//! ReplicaSet, a Service and RBAC comes back into a mapped namespace, owners first and
//! with its ownership intact; item actions wait for additional items; existing objects
//! are kept or updated; a hostile tarball is refused; non-overlapping restores run
//! together while overlapping ones wait.

use futures::future::BoxFuture;
use granary_api::velero::{Backup, Restore, RestorePhase, RestoreSpec};
use granary_providers::StoreOptions;
use granary_runtime::clock::Clock;
use granary_test_support::builders::backup_spec;
use granary_test_support::poll_until;
use granary_test_support::worlds::velero::{
    World, controllers, create, dynamic, foreign_backup, from_backup, restore, restore_unverified,
    results, tarball, wait_restore,
};
use granary_velero::resource::GroupResource;
use granary_velero_server::context::VeleroContext;
use granary_velero_server::metrics::VeleroMetrics;
use granary_velero_server::restore::actions::{
    ActionError, ResourceIdentifier, RestoreActionContext, RestoreActionInput, RestoreActionOutput,
    RestoreItemAction,
};
use granary_velero_server::restore_controller::{self, ANNOTATION_WAITING_FOR};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn owner(api_version: &str, kind: &str, o: &DynamicObject) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": o.name_any(), "uid": o.uid().expect("uid"), "controller": true})
}

fn rv(o: &DynamicObject) -> u64 {
    o.resource_version()
        .and_then(|v| v.parse().ok())
        .expect("numeric resourceVersion")
}

fn owner_uids(o: &DynamicObject) -> Vec<String> {
    o.owner_references().iter().map(|r| r.uid.clone()).collect()
}

/// Proves a garbage-collector pass ran after now: an object whose owner does not exist
/// is collected.
async fn wait_for_gc_pass(w: &World, ns: &str) {
    let api: Api<ConfigMap> = Api::namespaced(w.client.clone(), ns);
    let mut canary = ConfigMap::default();
    canary.metadata.name = Some("gc-canary".into());
    canary.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "nobody".into(),
            uid: "00000000-0000-4000-8000-00000000dead".into(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &canary)
        .await
        .expect("canary");
    poll_until("the garbage collector to collect the canary", || async {
        api.get_opt("gc-canary").await.ok().flatten().is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_comes_back_into_a_mapped_namespace_owners_first_and_intact() {
    let w = World::start().await;
    let c = w.client.clone();
    let app = w.app.clone();
    let group = format!("{}.example.com", w.cluster.object_selector);
    let crd_name = format!("widgets.{group}");
    let crds = dynamic(
        &c,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    create(&crds, json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })).await;
    granary_test_support::wait_established(&c, &crd_name).await;
    let widgets = dynamic(&c, &group, "v1", "Widget", "widgets", Some(&app));
    let w1 = create(&widgets, json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}})).await;
    let cms = dynamic(&c, "", "v1", "ConfigMap", "configmaps", Some(&app));
    create(&cms, json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "w1-config", "ownerReferences": [owner(&format!("{group}/v1"), "Widget", &w1)]},
        "data": {"k": "v"}})).await;
    let deployments = dynamic(&c, "apps", "v1", "Deployment", "deployments", Some(&app));
    let web = create(&deployments, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;
    let replicasets = dynamic(&c, "apps", "v1", "ReplicaSet", "replicasets", Some(&app));
    create(&replicasets, json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d8f", "labels": {"app": "web"}, "ownerReferences": [owner("apps/v1", "Deployment", &web)]},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;
    let services = dynamic(&c, "", "v1", "Service", "services", Some(&app));
    create(
        &services,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
    )
    .await;
    // Allocated by the API server: restored with new ones (Velero's Service and Job
    // actions clear them, or the create would be refused).
    create(
        &services,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "edge"},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 443}]}}),
    )
    .await;
    let jobs = dynamic(&c, "batch", "v1", "Job", "jobs", Some(&app));
    let migrate = create(&jobs, json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox:1.36"}]}}}})).await;
    let sas = dynamic(
        &c,
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        Some(&app),
    );
    create(
        &sas,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "runner"}}),
    )
    .await;
    let roles = dynamic(
        &c,
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        Some(&app),
    );
    create(&roles, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})).await;
    let bindings = dynamic(
        &c,
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        Some(&app),
    );
    create(&bindings, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": app}]})).await;

    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("app-backup", None).await;

    // The application is gone: its namespace and its CRD.
    let namespaces = dynamic(&c, "", "v1", "Namespace", "namespaces", None);
    namespaces
        .delete(&app, &DeleteParams::default())
        .await
        .expect("delete namespace");
    crds.delete(&crd_name, &DeleteParams::default())
        .await
        .expect("delete crd");
    poll_until("the namespace and the CRD to be gone", || async {
        namespaces.get_opt(&app).await.ok().flatten().is_none()
            && crds.get_opt(&crd_name).await.ok().flatten().is_none()
    })
    .await;

    let target = w.cluster.name("app-restored");
    w.cluster.delete_at_drop(
        ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
        None,
        &target,
    );
    let mut spec = from_backup("app-backup");
    spec.namespace_mapping = Some([(app.clone(), target.clone())].into());
    restore(&w, "r1", spec).await;
    let r = wait_restore(&w, "r1", &[RestorePhase::Completed]).await;
    let status = r.status.clone().expect("status");
    assert_eq!(status.errors.unwrap_or(0), 0, "{status:?}");
    assert!(
        r.finalizers()
            .iter()
            .any(|f| f == granary_api::velero::RESTORE_FINALIZER)
    );

    let get = |api: Api<DynamicObject>, name: &'static str| async move {
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("{name} restored: {e}"))
    };
    let crd = get(crds.clone(), Box::leak(crd_name.clone().into_boxed_str())).await;
    let widgets = dynamic(&c, &group, "v1", "Widget", "widgets", Some(&target));
    let cms = dynamic(&c, "", "v1", "ConfigMap", "configmaps", Some(&target));
    let deployments = dynamic(&c, "apps", "v1", "Deployment", "deployments", Some(&target));
    let replicasets = dynamic(&c, "apps", "v1", "ReplicaSet", "replicasets", Some(&target));
    let new_w1 = get(widgets, "w1").await;
    let new_cfg = get(cms.clone(), "w1-config").await;
    let new_web = get(deployments, "web").await;
    let new_rs = get(replicasets, "web-5d8f").await;
    get(
        dynamic(&c, "", "v1", "Service", "services", Some(&target)),
        "web",
    )
    .await;
    let new_edge = get(
        dynamic(&c, "", "v1", "Service", "services", Some(&target)),
        "edge",
    )
    .await;
    let new_migrate = get(
        dynamic(&c, "batch", "v1", "Job", "jobs", Some(&target)),
        "migrate",
    )
    .await;
    // New addresses, node ports and selectors, from this API server.
    assert!(
        new_edge.data["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok()),
        "{new_edge:?}"
    );
    assert!(
        new_edge.data["spec"]["ports"][0]["nodePort"]
            .as_u64()
            .is_some(),
        "{new_edge:?}"
    );
    let uid = new_migrate.uid().expect("uid");
    assert_ne!(migrate.uid(), Some(uid.clone()));
    assert_eq!(
        new_migrate.data["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        json!(uid)
    );
    assert_eq!(
        new_migrate.data["spec"]["template"]["metadata"]["labels"]["controller-uid"],
        json!(uid)
    );
    get(
        dynamic(
            &c,
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            Some(&target),
        ),
        "runner",
    )
    .await;
    get(
        dynamic(
            &c,
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            Some(&target),
        ),
        "reader",
    )
    .await;
    let binding = get(
        dynamic(
            &c,
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            Some(&target),
        ),
        "reader",
    )
    .await;

    // Ownership points at the restored owners.
    assert_eq!(owner_uids(&new_cfg), vec![new_w1.uid().unwrap()]);
    assert_eq!(owner_uids(&new_rs), vec![new_web.uid().unwrap()]);
    assert_ne!(new_w1.uid(), w1.uid());
    // Created in a valid order: the CRD before its resources, owners before dependents.
    assert!(rv(&crd) < rv(&new_w1));
    assert!(
        rv(&new_w1) < rv(&new_cfg),
        "the Widget is created before the ConfigMap it owns"
    );
    assert!(
        rv(&new_web) < rv(&new_rs),
        "the Deployment is created before its ReplicaSet"
    );
    // Restore labels; the RoleBinding's subject follows the namespace mapping.
    assert_eq!(
        new_cfg
            .labels()
            .get("velero.io/restore-name")
            .map(String::as_str),
        Some("r1")
    );
    assert_eq!(
        new_cfg
            .labels()
            .get("velero.io/backup-name")
            .map(String::as_str),
        Some("app-backup")
    );
    assert_eq!(binding.data["subjects"][0]["namespace"], json!(target));

    // Nothing is garbage-collected afterwards.
    wait_for_gc_pass(&w, &target).await;
    assert!(cms.get_opt("w1-config").await.expect("get").is_some());
    assert!(
        dynamic(&c, "apps", "v1", "ReplicaSet", "replicasets", Some(&target))
            .get_opt("web-5d8f")
            .await
            .expect("get")
            .is_some()
    );

    // The restore's files are in object storage; deleting the Restore removes them.
    let files = w.keys("restores/r1/").await;
    // Logs, results, resource list and their integrity record.
    assert_eq!(files.len(), 4, "{files:?}");
    w.api::<Restore>()
        .delete("r1", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone::<Restore>("restore r1", "r1").await;
    assert!(w.keys("restores/r1/").await.is_empty());
}

/// Velero's RIA v2 wait: the item named `main` waits until its additional
/// item `dep` is ready (3 s after the first check); `lonely` waits for `ghost`, which
/// never is, and is restored after its action's own 2 s timeout, with a warning.
struct WaitingAction {
    first_check: Mutex<Option<Instant>>,
}

impl RestoreItemAction for WaitingAction {
    fn name(&self) -> &str {
        "test/waiting"
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        gr.group.is_empty() && gr.resource == "configmaps"
    }
    fn execute<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        Box::pin(async move {
            let name = input.item["metadata"]["name"].as_str().unwrap_or("");
            let ns = input.item_from_backup["metadata"]["namespace"]
                .as_str()
                .unwrap_or("");
            let _ = ctx;
            let dep = |n: &str| ResourceIdentifier::new("", "configmaps", ns, n);
            Ok(match name {
                "main" => RestoreActionOutput {
                    additional_items: vec![dep("dep")],
                    wait_for_additional_items: true,
                    ..Default::default()
                },
                "lonely" => RestoreActionOutput {
                    additional_items: vec![dep("ghost")],
                    wait_for_additional_items: true,
                    additional_items_ready_timeout: Some(Duration::from_secs(2)),
                    ..Default::default()
                },
                _ => RestoreActionOutput::default(),
            })
        })
    }
    fn are_additional_items_ready<'a>(
        &'a self,
        _ctx: &'a RestoreActionContext,
        items: &'a [ResourceIdentifier],
    ) -> BoxFuture<'a, Result<bool, ActionError>> {
        Box::pin(async move {
            if items.iter().any(|i| i.name == "ghost") {
                return Ok(false);
            }
            let mut first = self.first_check.lock().unwrap_or_else(|p| p.into_inner());
            let first = *first.get_or_insert_with(Instant::now);
            Ok(first.elapsed() >= Duration::from_secs(3))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_waits_for_its_additional_items_and_gives_up_after_its_timeout() {
    let w = World::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), &w.app);
    for n in ["main", "dep", "lonely", "ghost"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(n.into());
        cms.create(&PostParams::default(), &cm).await.expect("cm");
    }
    let actions: Vec<Box<dyn RestoreItemAction>> = vec![Box::new(WaitingAction {
        first_check: Mutex::new(None),
    })];
    let _controllers = controllers(&w, w.settings(), Some(actions));
    w.location("default", false).await;
    w.take_backup("b", None).await;
    let target = w.cluster.namespace("waited").await;
    let mut spec = from_backup("b");
    spec.namespace_mapping = Some([(w.app.clone(), target.clone())].into());
    spec.included_resources = Some(vec!["configmaps".into()]);
    restore(&w, "r-wait", spec).await;
    let r = wait_restore(&w, "r-wait", &[RestorePhase::Completed]).await;
    assert!(r.status.as_ref().and_then(|s| s.warnings).unwrap_or(0) >= 1);
    // Additional items the plan holds anyway are counted once.
    let progress = r
        .status
        .as_ref()
        .and_then(|s| s.progress.clone())
        .expect("progress");
    assert_eq!(
        progress.total_items, progress.items_restored,
        "{progress:?}"
    );

    let restored: Api<ConfigMap> = Api::namespaced(w.client.clone(), &target);
    let get = |n: &'static str| {
        let restored = restored.clone();
        async move { restored.get(n).await.unwrap_or_else(|e| panic!("{n}: {e}")) }
    };
    let (main, dep, lonely, ghost) = (
        get("main").await,
        get("dep").await,
        get("lonely").await,
        get("ghost").await,
    );
    let rv = |c: &ConfigMap| {
        c.resource_version()
            .and_then(|v| v.parse::<u64>().ok())
            .expect("rv")
    };
    assert!(
        rv(&dep) < rv(&main),
        "the additional item is restored first"
    );
    let created = |c: &ConfigMap| c.creation_timestamp().expect("created").0.as_second();
    assert!(
        created(&main) - created(&dep) >= 2,
        "main waited for dep to be ready"
    );
    assert!(
        rv(&ghost) < rv(&lonely),
        "the item is still restored after the timeout"
    );
    let results = results(&w, "r-wait").await;
    let warnings = results["warnings"].to_string();
    assert!(warnings.contains("were not ready within 2s"), "{warnings}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_objects_are_kept_with_none_and_updated_with_update() {
    let w = World::start().await;
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("b", None).await;
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), &w.app);
    let mut cm = cms.get("cm-0").await.expect("cm");
    cm.data = Some([("k".to_string(), "changed".to_string())].into());
    cms.replace("cm-0", &PostParams::default(), &cm)
        .await
        .expect("change");
    cms.delete("cm-1", &DeleteParams::default())
        .await
        .expect("delete");

    let only_cms = |policy: Option<&str>| RestoreSpec {
        backup_name: Some("b".into()),
        included_resources: Some(vec!["configmaps".into()]),
        existing_resource_policy: policy.map(String::from),
        ..Default::default()
    };
    restore(&w, "keep", only_cms(None)).await;
    let r = wait_restore(&w, "keep", &[RestorePhase::Completed]).await;
    assert!(r.status.and_then(|s| s.warnings).unwrap_or(0) >= 1);
    let data = |c: ConfigMap| c.data.unwrap_or_default().get("k").cloned();
    assert_eq!(
        data(cms.get("cm-0").await.expect("cm-0")).as_deref(),
        Some("changed")
    );
    assert_eq!(
        data(cms.get("cm-1").await.expect("cm-1 restored")).as_deref(),
        Some("v1")
    );
    let warnings = results(&w, "keep").await["warnings"].to_string();
    assert!(warnings.contains("already exists. Warning: the in-cluster version is different than the backed-up version"), "{warnings}");

    restore(&w, "overwrite", only_cms(Some("update"))).await;
    wait_restore(&w, "overwrite", &[RestorePhase::Completed]).await;
    let cm0 = cms.get("cm-0").await.expect("cm-0");
    assert_eq!(
        cm0.labels()
            .get("velero.io/restore-name")
            .map(String::as_str),
        Some("overwrite")
    );
    assert_eq!(data(cm0).as_deref(), Some("v0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_velero_written_backup_restores_and_a_hostile_one_is_refused() {
    let w = World::start().await;
    let mut settings = w.settings();
    settings.backup_sync_period = granary_runtime::config::ConfigDuration(Duration::ZERO);
    let _controllers = controllers(&w, settings, None);
    w.location("default", false).await;
    let cm = |ns: &str| {
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "from-velero", "namespace": ns, "uid": "4f8a1c2e-0000-4000-8000-000000000010", "resourceVersion": "77"},
            "data": {"made": "by velero"}}))
        .expect("json")
    };
    foreign_backup(
        &w,
        "velero-made",
        tarball(&[
            ("metadata/version", b"1.1.0\n".to_vec()),
            (
                "resources/configmaps/namespaces/shop/from-velero.json",
                cm("shop"),
            ),
            (
                "resources/configmaps/v1-preferredversion/namespaces/shop/from-velero.json",
                cm("shop"),
            ),
        ]),
    )
    .await;
    let target = w.cluster.namespace("shop").await;
    let mut spec = from_backup("velero-made");
    spec.namespace_mapping = Some([("shop".to_string(), target.clone())].into());
    // Velero's own backup carries no integrity record: an administrator allows it.
    restore_unverified(&w, "from-velero", spec).await;
    wait_restore(&w, "from-velero", &[RestorePhase::Completed]).await;
    let restored: Api<ConfigMap> = Api::namespaced(w.client.clone(), &target);
    let got = restored.get("from-velero").await.expect("restored");
    assert_eq!(
        got.data.unwrap_or_default().get("made").map(String::as_str),
        Some("by velero")
    );

    foreign_backup(
        &w,
        "hostile",
        tarball(&[
            ("metadata/version", b"1.1.0\n".to_vec()),
            (
                "resources/configmaps/namespaces/shop/../../../../evil.json",
                cm("shop"),
            ),
        ]),
    )
    .await;
    restore_unverified(&w, "from-hostile", from_backup("hostile")).await;
    let r = wait_restore(&w, "from-hostile", &[RestorePhase::Failed]).await;
    let reason = r.status.and_then(|s| s.failure_reason).unwrap_or_default();
    assert!(
        reason.starts_with("the backup's tarball is refused"),
        "{reason}"
    );
}

/// Holds a restore InProgress: its `gate` ConfigMap waits for `gate-dep` until a
/// ConfigMap `release` exists in the Velero namespace.
struct Gate {
    namespace: String,
}

impl RestoreItemAction for Gate {
    fn name(&self) -> &str {
        "test/gate"
    }
    fn applies_to(&self, gr: &GroupResource) -> bool {
        gr.group.is_empty() && gr.resource == "configmaps"
    }
    fn execute<'a>(
        &'a self,
        _ctx: &'a RestoreActionContext,
        input: RestoreActionInput<'a>,
    ) -> BoxFuture<'a, Result<RestoreActionOutput, ActionError>> {
        Box::pin(async move {
            let ns = input.item_from_backup["metadata"]["namespace"]
                .as_str()
                .unwrap_or("");
            Ok(if input.item["metadata"]["name"] == "gate" {
                RestoreActionOutput {
                    additional_items: vec![ResourceIdentifier::new(
                        "",
                        "configmaps",
                        ns,
                        "gate-dep",
                    )],
                    wait_for_additional_items: true,
                    additional_items_ready_timeout: Some(Duration::from_secs(300)),
                    ..Default::default()
                }
            } else {
                RestoreActionOutput::default()
            })
        })
    }
    fn are_additional_items_ready<'a>(
        &'a self,
        ctx: &'a RestoreActionContext,
        _items: &'a [ResourceIdentifier],
    ) -> BoxFuture<'a, Result<bool, ActionError>> {
        Box::pin(async move {
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &self.namespace);
            Ok(api.get_opt("release").await?.is_some())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_overlapping_restores_run_together_and_overlapping_ones_wait() {
    let w = World::start().await;
    let other = w.cluster.namespace("other").await;
    for ns in [&w.app, &other] {
        let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), ns);
        for n in ["gate", "gate-dep"] {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(n.into());
            cms.create(&PostParams::default(), &cm).await.expect("cm");
        }
    }
    let mut settings = w.settings();
    settings.concurrent_restores = 2;
    settings.queued_backup_recheck_frequency =
        granary_runtime::config::ConfigDuration(Duration::from_millis(500));
    let actions: Vec<Box<dyn RestoreItemAction>> = vec![Box::new(Gate {
        namespace: w.namespace.clone(),
    })];
    let _controllers = controllers(&w, settings, Some(actions));
    w.location("default", false).await;
    let b = Backup::new(
        "both",
        backup_spec()
            .namespaces([w.app.clone(), other.clone()])
            .location("default")
            .build(),
    );
    w.api::<Backup>()
        .create(&PostParams::default(), &b)
        .await
        .expect("backup");
    w.wait_backup_phase("both", granary_api::velero::BackupPhase::Completed)
        .await;

    let only = |ns: &str, to: &str| RestoreSpec {
        backup_name: Some("both".into()),
        included_namespaces: Some(vec![ns.to_string()]),
        namespace_mapping: Some([(ns.to_string(), to.to_string())].into()),
        ..Default::default()
    };
    let (a_to, b_to) = (w.cluster.name("a-to"), w.cluster.name("b-to"));
    for n in [&a_to, &b_to] {
        w.cluster.delete_at_drop(
            ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            None,
            n,
        );
    }
    restore(&w, "ra", only(&w.app, &a_to)).await;
    restore(&w, "rb", only(&other, &b_to)).await;
    wait_restore(&w, "ra", &[RestorePhase::InProgress]).await;
    wait_restore(&w, "rb", &[RestorePhase::InProgress]).await;
    // Both are held InProgress at once; a third into ra's namespace waits for ra.
    restore(&w, "ra-again", only(&w.app, &a_to)).await;
    let api = w.api::<Restore>();
    poll_until("ra-again to wait for ra", || async {
        let r = api.get("ra-again").await.expect("get");
        r.annotations()
            .get(ANNOTATION_WAITING_FOR)
            .is_some_and(|v| v.contains("ra"))
            && r.status.as_ref().and_then(|s| s.phase) == Some(RestorePhase::New)
    })
    .await;
    assert_eq!(
        api.get("ra")
            .await
            .expect("ra")
            .status
            .and_then(|s| s.phase),
        Some(RestorePhase::InProgress)
    );
    let mut release = ConfigMap::default();
    release.metadata.name = Some("release".into());
    Api::<ConfigMap>::namespaced(w.client.clone(), &w.namespace)
        .create(&PostParams::default(), &release)
        .await
        .expect("release");
    for n in ["ra", "rb", "ra-again"] {
        wait_restore(&w, n, &[RestorePhase::Completed]).await;
    }
    let again = api.get("ra-again").await.expect("get");
    assert!(again.annotations().get(ANNOTATION_WAITING_FOR).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_restores_fail_validation_with_velero_messages() {
    let w = World::start().await;
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    restore(&w, "no-backup", from_backup("missing")).await;
    let r = wait_restore(&w, "no-backup", &[RestorePhase::FailedValidation]).await;
    assert_eq!(
        r.status.and_then(|s| s.validation_errors),
        Some(vec![
            "Error retrieving backup: backups.velero.io \"missing\" not found".to_string()
        ])
    );
    let mut spec = from_backup("missing");
    spec.hooks = Some(granary_api::velero::RestoreHooks {
        resources: Some(vec![granary_api::velero::RestoreResourceHookSpec {
            name: "h".into(),
            ..Default::default()
        }]),
    });
    restore(&w, "hooks", spec).await;
    let r = wait_restore(&w, "hooks", &[RestorePhase::FailedValidation]).await;
    let errors = r
        .status
        .and_then(|s| s.validation_errors)
        .unwrap_or_default();
    assert!(
        errors.iter().any(|e| e.starts_with("spec.hooks")),
        "{errors:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reports_every_item_in_order_and_changes_nothing() {
    use granary_velero_server::restore::run::ItemAction;
    let w = World::start().await;
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("b", None).await;
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), &w.app);
    let mut cm = cms.get("cm-0").await.expect("cm");
    cm.data = Some([("k".to_string(), "changed".to_string())].into());
    cms.replace("cm-0", &PostParams::default(), &cm)
        .await
        .expect("change");
    cms.delete("cm-1", &DeleteParams::default())
        .await
        .expect("delete");
    let versions = || async {
        let list = cms.list(&Default::default()).await.expect("list").items;
        list.iter()
            .map(|c| (c.name_any(), c.resource_version()))
            .collect::<Vec<_>>()
    };
    let before = versions().await;

    let ctx = VeleroContext::new(
        w.client.clone(),
        w.settings(),
        StoreOptions {
            local_root: Some(w.data.path().to_path_buf()),
            ..StoreOptions::default()
        },
        Clock::system(),
        VeleroMetrics::new(&w.metrics),
        granary_runtime::selector::ObjectSelector::new(None),
    );
    // The keys the server made, as `granary restore create --dry-run` reads them.
    let keys = granary_velero_server::integrity::read(&w.client, &w.namespace)
        .await
        .expect("keys")
        .expect("the server made its keys");
    ctx.keys.set(keys);
    let mut r = Restore::new("preview", from_backup("b"));
    r.metadata.namespace = Some(w.namespace.clone());
    r.spec.included_resources = Some(vec!["configmaps".into()]);
    r.spec.existing_resource_policy = Some("update".into());
    let outcome = restore_controller::dry_run(&ctx, &r)
        .await
        .expect("dry run");
    let seen: Vec<(String, ItemAction)> = outcome
        .handled
        .iter()
        .map(|h| (format!("{}:{}", h.resource_key, h.name), h.action))
        .collect();
    let ns_entry = ("v1/Namespace:".to_string() + &w.app, ItemAction::Skipped);
    assert_eq!(seen[0], ns_entry);
    let cm = |n: &str, a| (format!("v1/ConfigMap:{n}"), a);
    for want in [
        cm("cm-0", ItemAction::Updated),
        cm("cm-1", ItemAction::Created),
        cm("cm-2", ItemAction::Skipped),
    ] {
        assert!(seen.contains(&want), "{want:?} in {seen:?}");
    }
    // Nothing changed: every ConfigMap as it was, and no Restore exists.
    assert_eq!(before, versions().await);
    assert!(cms.get_opt("cm-1").await.expect("get").is_none());
    assert!(
        w.api::<Restore>()
            .get_opt("preview")
            .await
            .expect("get")
            .is_none()
    );
}

/// The same restore on S3 (moto): the tarball read from, and the restore's files
/// written to and deleted from, a real S3 API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_on_s3_reads_the_backup_and_keeps_its_files_there() {
    let Some(w) = World::start_on(granary_test_support::seed::Backend::S3).await else {
        eprintln!("moto not available; skipped");
        return;
    };
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("on-s3", None).await;
    let target = w.cluster.namespace("from-s3").await;
    let mut spec = from_backup("on-s3");
    spec.namespace_mapping = Some([(w.app.clone(), target.clone())].into());
    restore(&w, "r-s3", spec).await;
    wait_restore(&w, "r-s3", &[RestorePhase::Completed]).await;
    let restored: Api<ConfigMap> = Api::namespaced(w.client.clone(), &target);
    for i in 0..3 {
        restored.get(&format!("cm-{i}")).await.expect("restored");
    }
    // Logs, results, resource list and their integrity record.
    assert_eq!(w.keys("restores/r-s3/").await.len(), 4);
    let warnings = results(&w, "r-s3").await;
    assert!(warnings.is_object());
    w.api::<Restore>()
        .delete("r-s3", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone::<Restore>("restore r-s3", "r-s3").await;
    assert!(w.keys("restores/r-s3/").await.is_empty());
}

/// `granary restore create --dry-run` as a user runs it: the plan printed in order,
/// nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_dry_run_prints_the_plan_and_creates_nothing() {
    let w = World::start().await;
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("b", None).await;
    let cms: Api<ConfigMap> = Api::namespaced(w.client.clone(), &w.app);
    cms.delete("cm-1", &DeleteParams::default())
        .await
        .expect("delete");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args([
        "restore",
        "create",
        "preview",
        "--from-backup",
        "b",
        "--dry-run",
    ])
    .arg("--include-resources=configmaps")
    .arg("--data-dir")
    .arg(w.data.path())
    .arg("--kubeconfig")
    .arg(&w.cluster.garden.kubeconfig_path)
    .args(["-n", &w.namespace])
    .env_remove("KUBECONFIG");
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("granary runs"))
        .await
        .expect("task");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |verb: &str, name: &str| {
        stdout.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.first() == Some(&verb)
                && words.last() == Some(&format!("{}/{name}", w.app).as_str())
        })
    };
    assert!(line("create", "cm-1"), "{stdout}");
    assert!(line("skip", "cm-0"), "{stdout}");
    assert!(
        stdout.contains("1 to create, 0 to update, 3 to skip"),
        "{stdout}"
    );
    assert!(cms.get_opt("cm-1").await.expect("get").is_none());
    assert!(
        w.api::<Restore>()
            .get_opt("preview")
            .await
            .expect("get")
            .is_none()
    );
}

/// `granary restore logs` through the download-request controller (a one-time URL of
/// the controller's own endpoint on the local provider).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_logs_come_through_the_download_request_controller() {
    let w = World::start().await;
    let _controllers = controllers(&w, w.settings(), None);
    w.location("default", false).await;
    w.take_backup("b", None).await;
    let target = w.cluster.namespace("logged").await;
    let mut spec = from_backup("b");
    spec.namespace_mapping = Some([(w.app.clone(), target)].into());
    restore(&w, "r-logs", spec).await;
    wait_restore(&w, "r-logs", &[RestorePhase::Completed]).await;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args(["restore", "logs", "r-logs"])
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .args(["-n", &w.namespace])
        .env_remove("KUBECONFIG");
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("granary runs"))
        .await
        .expect("task");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("msg=\"Starting restore of backup b\""),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("restore={}/r-logs", w.namespace)),
        "{stdout}"
    );

    // describe --details: the resource list and the (empty) results, the same way.
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_granary"));
    cmd.args(["restore", "describe", "r-logs", "--details"])
        .arg("--kubeconfig")
        .arg(&w.cluster.garden.kubeconfig_path)
        .args(["-n", &w.namespace])
        .env_remove("KUBECONFIG");
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("granary runs"))
        .await
        .expect("task");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Resource List:\n"), "{stdout}");
    assert!(stdout.contains("  v1/ConfigMap:\n"), "{stdout}");
    assert!(stdout.contains("/cm-0(created)"), "{stdout}");
    assert!(stdout.contains("Errors:\n  <none>"), "{stdout}");
}

//! API-behaviour checks through `kube::Client`, written from kube-apiserver's documented
//! behaviour: they run against the embedded server by default and against a real
//! cluster with `GRANARY_TEST_KUBECONFIG`, so any difference shows up as a failure.
//! This file covers objects and verbs; `conformance_crd.rs` covers CRDs, status,
//! garbage collection and namespaces.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent,
    WatchParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use granary_test_support::api::{api_error, cm, list_version};
use granary_test_support::{TestCluster, poll_until};

async fn setup() -> (TestCluster, Api<ConfigMap>, String) {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("conf").await;
    let api = Api::namespaced(cluster.client(), &ns);
    (cluster, api, ns)
}

#[tokio::test]
async fn requests_without_credentials_are_refused() {
    let cluster = TestCluster::start().await;
    let kc = kube::config::Kubeconfig::read_from(&cluster.garden.kubeconfig_path).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.auth_info = Default::default();
    let anonymous = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(anonymous, "default");
    let e = api_error(api.list(&ListParams::default()).await);
    assert!(e.code == 401 || e.code == 403, "{e:?}");
}

#[tokio::test]
async fn discovery_serves_builtins_with_subresources() {
    let cluster = TestCluster::start().await;
    let discovery = kube::discovery::Discovery::new(cluster.client())
        .run()
        .await
        .unwrap();
    for (group, kind) in [
        ("", "ConfigMap"),
        ("", "Namespace"),
        ("apps", "Deployment"),
        ("coordination.k8s.io", "Lease"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ] {
        let g = discovery
            .groups()
            .find(|g| g.name() == group)
            .unwrap_or_else(|| panic!("group {group:?}"));
        assert!(
            g.recommended_resources()
                .iter()
                .any(|(ar, _)| ar.kind == kind),
            "{kind}"
        );
    }
    let list = cluster
        .client()
        .list_api_group_resources("apps/v1")
        .await
        .unwrap();
    let names: Vec<&str> = list.resources.iter().map(|r| r.name.as_str()).collect();
    assert!(
        names.contains(&"deployments/scale") && names.contains(&"deployments/status"),
        "{names:?}"
    );
    let deploy = list
        .resources
        .iter()
        .find(|r| r.name == "deployments")
        .unwrap();
    assert_eq!(deploy.singular_name, "deployment");
    assert!(deploy.namespaced);
    assert!(
        deploy
            .short_names
            .as_ref()
            .unwrap()
            .contains(&"deploy".to_string())
    );
    assert!(deploy.verbs.contains(&"watch".to_string()));
}

#[tokio::test]
async fn create_sets_server_owned_metadata() {
    let (_c, api, ns) = setup().await;
    let created = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let m = &created.metadata;
    assert_eq!(m.namespace.as_deref(), Some(ns.as_str()));
    assert!(m.uid.as_ref().is_some_and(|u| !u.is_empty()));
    assert!(m.creation_timestamp.is_some());
    assert!(m.resource_version.as_ref().unwrap().parse::<u64>().is_ok());
    let mut gen_name = ConfigMap::default();
    gen_name.metadata.generate_name = Some("gen-".into());
    let g = api.create(&PostParams::default(), &gen_name).await.unwrap();
    let name = g.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() > 4, "{name}");
}

#[tokio::test]
async fn errors_carry_status_reason_and_code() {
    let (_c, api, _ns) = setup().await;
    api.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let e = api_error(api.create(&PostParams::default(), &cm("a", &[])).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    let e = api_error(api.get("missing").await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    let e = api_error(
        api.create(&PostParams::default(), &cm("Not_Valid", &[]))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let e = api_error(api.list(&ListParams::default().labels("a in b")).await);
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
}

#[tokio::test]
async fn create_in_missing_namespace_is_not_found() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &cluster.name("nope"));
    let e = api_error(api.create(&PostParams::default(), &cm("a", &[])).await);
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn update_with_stale_resource_version_conflicts() {
    let (_c, api, _ns) = setup().await;
    let first = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let mut second = first.clone();
    second.data = Some(BTreeMap::from([("k".into(), "2".into())]));
    let updated = api
        .replace("a", &PostParams::default(), &second)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        first.metadata.resource_version
    );
    let e = api_error(api.replace("a", &PostParams::default(), &first).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn name_namespace_and_uid_are_immutable() {
    let (_c, api, _ns) = setup().await;
    let obj = api
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let mut renamed = obj.clone();
    renamed.metadata.name = Some("b".into());
    let e = api_error(api.replace("a", &PostParams::default(), &renamed).await);
    assert_eq!(e.code, 400);
    let mut other_uid = obj.clone();
    other_uid.metadata.uid = Some("00000000-0000-0000-0000-000000000001".into());
    let e = api_error(api.replace("a", &PostParams::default(), &other_uid).await);
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn label_selectors_select() {
    let (_c, api, _ns) = setup().await;
    for (name, labels) in [
        ("a", vec![("app", "web"), ("tier", "front")]),
        ("b", vec![("app", "db")]),
        ("c", vec![("app", "cache"), ("tier", "back")]),
        ("d", vec![]),
    ] {
        api.create(&PostParams::default(), &cm(name, &labels))
            .await
            .unwrap();
    }
    let names = |sel: &'static str| {
        let api = api.clone();
        async move {
            let list = api.list(&ListParams::default().labels(sel)).await.unwrap();
            list.items
                .into_iter()
                .map(|c| c.metadata.name.unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("app=web").await, ["a"]);
    assert_eq!(names("app==db").await, ["b"]);
    assert_eq!(names("app!=web").await, ["b", "c", "d"]);
    assert_eq!(names("app in (web, db)").await, ["a", "b"]);
    assert_eq!(names("app notin (web,db)").await, ["c", "d"]);
    assert_eq!(names("tier").await, ["a", "c"]);
    assert_eq!(names("!tier").await, ["b", "d"]);
    assert_eq!(names("app,tier!=front").await, ["b", "c"]);
}

#[tokio::test]
async fn field_selectors_on_name_and_namespace() {
    let (_c, api, ns) = setup().await;
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n, &[]))
            .await
            .unwrap();
    }
    let list = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let sel = format!("metadata.namespace={ns},metadata.name!=b");
    let list = api.list(&ListParams::default().fields(&sel)).await.unwrap();
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
    let e = api_error(api.list(&ListParams::default().fields("data.k=v")).await);
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let (_c, api, _ns) = setup().await;
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        assert!(page.metadata.resource_version.is_some());
        seen.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    assert_eq!(seen, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());
}

/// Every page of a list is read at the first page's resourceVersion, one snapshot (kube-
/// apiserver reads every page at the first page's etcd revision): an object created after
/// the first page is in no page, one changed is as it was, one deleted is still there.
#[tokio::test]
async fn continued_pages_are_one_snapshot() {
    let (_c, api, _ns) = setup().await;
    for name in ["s1", "s2", "s3", "s4"] {
        api.create(&PostParams::default(), &cm(name, &[]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // After the first page: one created (sorting last), one changed, one deleted.
    api.create(&PostParams::default(), &cm("s5", &[]))
        .await
        .unwrap();
    api.patch(
        "s2",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    api.delete("s3", &DeleteParams::default()).await.unwrap();
    let rest = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    let names: Vec<String> = rest
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["s2", "s3", "s4"], "as at the first page");
    let s2 = &rest.items[0];
    assert_eq!(
        s2.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("v"),
        "s2 as it was"
    );
    assert_eq!(rest.metadata.resource_version.as_deref(), Some(rv.as_str()));
    // A fresh list sees the present.
    let now: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(now, ["s1", "s2", "s4", "s5"]);
}

/// resourceVersion edges as kube-apiserver answers them: `Exact` at a recent version
/// reads the collection as it was then; a version the server has not reached is a 504
/// "Too large resource version" for a list and an ERROR event for a watch (never a
/// silent wait).
#[tokio::test]
async fn resource_versions_back_and_ahead() {
    let (cluster, api, ns) = setup().await;
    let one = api
        .create(&PostParams::default(), &cm("r1", &[]))
        .await
        .unwrap();
    let then = one.metadata.resource_version.clone().unwrap();
    api.create(&PostParams::default(), &cm("r2", &[]))
        .await
        .unwrap();
    let exact = api
        .list(
            &ListParams::default()
                .at(&then)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    let names: Vec<String> = exact
        .items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["r1"], "as at {then}");
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(then.as_str())
    );

    let ahead = (then.parse::<u64>().unwrap() + 1_000_000).to_string();
    // kube's client retries a 504 for minutes: this one asks once.
    let kc = kube::config::Kubeconfig::read_from(&cluster.garden.kubeconfig_path).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.default_retry = false;
    let once: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), &ns);
    let status = api_error(
        once.list(
            &ListParams::default()
                .at(&ahead)
                .matching(kube::api::VersionMatch::NotOlderThan),
        )
        .await,
    );
    assert_eq!(
        (status.code, &*status.reason),
        (504, "Timeout"),
        "{status:?}"
    );
    assert!(
        status.message.contains("Too large resource version"),
        "{}",
        status.message
    );
    let mut stream = api
        .watch(&WatchParams::default().timeout(30), &ahead)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .expect("an answer, not a silent wait")
        .expect("an event");
    match event {
        Ok(WatchEvent::Error(e)) => {
            assert_eq!(e.code, 504, "{e:?}");
            assert!(e.message.contains("Too large resource version"), "{e:?}");
        }
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 504, "{e:?}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Every page of a list carries the first page's resourceVersion, so an object created
/// between two pages that sorts before the next page's start (in no page) still reaches
/// a watch started from the list's resourceVersion (kube-apiserver lists from one
/// snapshot). With the newest resourceVersion on the last page it was lost until a
/// relist: a shoot created during a garden restart was never placed.
#[tokio::test]
async fn an_object_created_between_pages_reaches_the_watch_from_the_list() {
    let (_c, api, _ns) = setup().await;
    for i in 1..=4 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    api.create(&PostParams::default(), &cm("p0", &[]))
        .await
        .unwrap();
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let names: Vec<String> = first
        .items
        .iter()
        .chain(&second.items)
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["p1", "p2", "p3", "p4"], "p0 is in no page");
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(rv.as_str())
    );
    let mut stream = api
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let event = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .expect("an event")
        .expect("stream open")
        .unwrap();
    match event {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("p0")),
        other => panic!("expected p0 added, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_from_resource_version_sees_every_change() {
    let (_c, api, _ns) = setup().await;
    let rv = list_version(&api).await;
    let mut stream = api
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("w", &[]))
        .await
        .unwrap();
    let patch = json!({"data": {"k": "changed"}});
    api.patch("w", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    api.delete("w", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        let ev = tokio::time::timeout(granary_test_support::DEADLINE, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match ev {
            WatchEvent::Added(c) => kinds.push(("ADDED", c.data.unwrap()["k"].clone())),
            WatchEvent::Modified(c) => kinds.push(("MODIFIED", c.data.unwrap()["k"].clone())),
            WatchEvent::Deleted(c) => kinds.push(("DELETED", c.data.unwrap()["k"].clone())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(
        kinds,
        [
            ("ADDED", "v".to_string()),
            ("MODIFIED", "changed".to_string()),
            ("DELETED", "changed".to_string())
        ]
    );
}

/// A bookmark carries the store's progress, writes to other resources included, as
/// kube-apiserver's do: a watch on a quiet resource resumes from there after a restart
/// instead of from a version that may be compacted by then. Embedded only: it sends a
/// bookmark every 5 s, kube-apiserver about once a minute, longer than the deadline.
#[tokio::test]
async fn a_bookmark_carries_the_progress_of_writes_to_other_resources() {
    let (c, api, ns) = setup().await;
    if !c.is_embedded() {
        return;
    }
    let rv = list_version(&api).await;
    let mut stream = api
        .watch(&WatchParams::default().timeout(50), &rv)
        .await
        .unwrap()
        .boxed();
    let mut secret = Secret::default();
    secret.metadata.name = Some("elsewhere".into());
    let written: u64 = Api::<Secret>::namespaced(c.client(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    loop {
        let ev = tokio::time::timeout(granary_test_support::DEADLINE, stream.try_next())
            .await
            .expect("a bookmark within the deadline")
            .unwrap()
            .expect("the watch is still open");
        match ev {
            WatchEvent::Bookmark(b) => {
                let at: u64 = b.metadata.resource_version.parse().unwrap();
                if at >= written {
                    break;
                }
            }
            other => panic!("only bookmarks on a quiet resource, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn watch_from_a_too_old_resource_version_is_gone() {
    let (_c, api, _ns) = setup().await;
    api.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    match api.watch(&WatchParams::default().timeout(10), "1").await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 410),
        Ok(stream) => {
            let mut stream = stream.boxed();
            let first = tokio::time::timeout(granary_test_support::DEADLINE, stream.try_next())
                .await
                .unwrap();
            match first {
                Ok(Some(WatchEvent::Error(e))) => {
                    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"))
                }
                other => panic!("expected a 410 ERROR event, got {other:?}"),
            }
        }
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn runtime_watcher_lists_and_follows_with_selector() {
    let (_c, api, _ns) = setup().await;
    api.create(&PostParams::default(), &cm("before", &[("w", "yes")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("ignored", &[("w", "no")]))
        .await
        .unwrap();
    let cfg = watcher::Config::default().labels("w=yes");
    let mut stream = watcher(api.clone(), cfg).applied_objects().boxed();
    let first = tokio::time::timeout(granary_test_support::DEADLINE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("before"));
    api.create(&PostParams::default(), &cm("after", &[("w", "yes")]))
        .await
        .unwrap();
    let next = tokio::time::timeout(granary_test_support::DEADLINE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.metadata.name.as_deref(), Some("after"));
}

#[tokio::test]
async fn patches_merge_json_strategic_and_apply() {
    let (_c, api, _ns) = setup().await;
    api.create(&PostParams::default(), &cm("p", &[("a", "1")]))
        .await
        .unwrap();
    let merged = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.metadata.labels.unwrap(),
        BTreeMap::from([("b".into(), "2".into())])
    );
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "add", "path": "/data/j", "value": "w"}
    ]))
    .unwrap();
    let patched = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["j"], "w");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/k", "value": "nope"}]))
            .unwrap();
    let e = api_error(
        api.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await,
    );
    assert_eq!(e.code, 422);
    let sm = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"s": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(sm.data.unwrap()["s"], "x");
    let e = api_error(
        api.patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
            .await,
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn server_side_apply_creates_then_updates() {
    let (_c, api, _ns) = setup().await;
    let pp = PatchParams::apply("conformance").force();
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1"}});
    let created = api
        .patch("ssa", &pp, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["a"], "1");
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "2"}});
    let updated = api
        .patch("ssa", &pp, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(updated.data.unwrap()["a"], "2");
    assert_eq!(updated.metadata.uid, created.metadata.uid);
}

#[tokio::test]
async fn delete_honours_preconditions_and_collections() {
    let (_c, api, _ns) = setup().await;
    for (n, l) in [("a", "x"), ("b", "x"), ("c", "y")] {
        api.create(&PostParams::default(), &cm(n, &[("set", l)]))
            .await
            .unwrap();
    }
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000009".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let e = api_error(api.delete("a", &dp).await);
    assert_eq!(e.code, 409);
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("set=x"),
    )
    .await
    .unwrap();
    poll_until("collection deleted", || async {
        api.list(&ListParams::default()).await.unwrap().items.len() == 1
    })
    .await;
    assert!(api.get_opt("c").await.unwrap().is_some());
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/none:1"}]}
            }
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn deployment_scale_and_generation() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("deploy").await;
    let api: Api<Deployment> = Api::namespaced(cluster.client(), &ns);
    let d = api
        .create(&PostParams::default(), &deployment("d"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let labelled = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let scale = api.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=d"));
    api.patch_scale(
        "d",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let d = api.get("d").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(3));
    assert_eq!(
        d.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );
}

/// Bodies newer kubectl versions send as protobuf for built-in kinds
/// (`kubectl create namespace|configmap|secret|deployment|job|cronjob|service`, captured
/// from kubectl 1.32 in tests/fixtures/protobuf) are created as if they had been JSON.
#[tokio::test]
async fn protobuf_bodies_of_kubectl_create_are_accepted() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let fixture = |name: &str| {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/protobuf")
                .join(format!("{name}.bin")),
        )
        .expect("fixture")
    };
    let post = |path: &str, body: Vec<u8>| {
        http::Request::post(path)
            .header("Content-Type", "application/vnd.kubernetes.protobuf")
            .header("Accept", "application/json")
            .body(body)
            .expect("request")
    };
    // The fixtures name namespace `pbtest` (deleted at the end: a rerun against a real
    // cluster waits until it is gone) and objects `cm1`, `s1`, `d1`, `j1`, `c1`.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    poll_until("namespace pbtest not terminating", || async {
        namespaces
            .get_opt("pbtest")
            .await
            .unwrap()
            .is_none_or(|ns| ns.metadata.deletion_timestamp.is_none())
    })
    .await;
    match client
        .request_text(post("/api/v1/namespaces", fixture("namespace")))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("namespace from protobuf: {e}"),
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "pbtest");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "pbtest");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "pbtest");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "pbtest");
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "pbtest");
    let services: Api<Service> = Api::namespaced(client.clone(), "pbtest");
    let _ = configmaps.delete("cm1", &DeleteParams::default()).await;
    let _ = secrets.delete("s1", &DeleteParams::default()).await;
    let _ = deployments.delete("d1", &DeleteParams::default()).await;
    let _ = jobs.delete("j1", &DeleteParams::background()).await;
    let _ = cronjobs.delete("c1", &DeleteParams::default()).await;
    let _ = services.delete("s1", &DeleteParams::default()).await;
    poll_until("old fixtures gone", || async {
        configmaps.get_opt("cm1").await.unwrap().is_none()
            && secrets.get_opt("s1").await.unwrap().is_none()
            && deployments.get_opt("d1").await.unwrap().is_none()
            && jobs.get_opt("j1").await.unwrap().is_none()
            && cronjobs.get_opt("c1").await.unwrap().is_none()
            && services.get_opt("s1").await.unwrap().is_none()
    })
    .await;
    for (path, name) in [
        ("/api/v1/namespaces/pbtest/configmaps", "configmap"),
        ("/api/v1/namespaces/pbtest/secrets", "secret"),
        ("/apis/apps/v1/namespaces/pbtest/deployments", "deployment"),
        ("/apis/batch/v1/namespaces/pbtest/jobs", "job"),
        ("/apis/batch/v1/namespaces/pbtest/cronjobs", "cronjob"),
        ("/api/v1/namespaces/pbtest/services", "service_clusterip"),
    ] {
        client
            .request_text(post(path, fixture(name)))
            .await
            .unwrap_or_else(|e| panic!("{name} from protobuf: {e}"));
    }
    let cm = configmaps.get("cm1").await.expect("configmap");
    assert_eq!(
        cm.data,
        Some(BTreeMap::from([
            ("a".to_string(), "b".to_string()),
            ("c".to_string(), "d".to_string())
        ]))
    );
    assert!(cm.metadata.uid.is_some() && cm.metadata.creation_timestamp.is_some());
    let secret = secrets.get("s1").await.expect("secret");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let data = secret.data.expect("data");
    assert_eq!(data["user"].0, b"admin");
    assert_eq!(data["pw"].0, b"s3cr3t");

    // `kubectl create deployment d1 --image=nginx --replicas=0 --port=8080`
    let d = deployments.get("d1").await.expect("deployment");
    assert!(d.metadata.uid.is_some());
    let spec = d.spec.expect("spec");
    // A pointer set to zero stays zero (absent would mean the default, 1).
    assert_eq!(spec.replicas, Some(0));
    assert_eq!(
        spec.selector.match_labels,
        Some(BTreeMap::from([("app".to_string(), "d1".to_string())]))
    );
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].name, "nginx");
    assert_eq!(pod.containers[0].image.as_deref(), Some("nginx"));
    assert_eq!(
        pod.containers[0].ports.as_ref().expect("ports")[0].container_port,
        8080
    );

    // `kubectl create job j1 --image=busybox -- echo hi`
    let j = jobs.get("j1").await.expect("job");
    let pod = j.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("busybox"));
    assert_eq!(
        pod.containers[0].command,
        Some(vec!["echo".to_string(), "hi".to_string()])
    );
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));

    // `kubectl create cronjob c1 --image=busybox --schedule="*/5 * * * *"`
    let c = cronjobs.get("c1").await.expect("cronjob");
    let spec = c.spec.expect("spec");
    assert_eq!(spec.schedule, "*/5 * * * *");
    let template = spec.job_template;
    assert_eq!(
        template.metadata.expect("metadata").name.as_deref(),
        Some("c1")
    );
    let pod = template
        .spec
        .expect("job spec")
        .template
        .spec
        .expect("pod spec");
    assert_eq!(pod.containers[0].image.as_deref(), Some("busybox"));
    assert_eq!(pod.restart_policy.as_deref(), Some("OnFailure"));

    // `kubectl create service clusterip s1 --tcp=80:8080`
    let s = services.get("s1").await.expect("service");
    let spec = s.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(
        spec.selector,
        Some(BTreeMap::from([("app".to_string(), "s1".to_string())]))
    );
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.protocol.as_deref(), port.port),
        (Some("80-8080"), Some("TCP"), 80)
    );
    assert_eq!(port.target_port, Some(IntOrString::Int(8080)));

    let _ = namespaces.delete("pbtest", &DeleteParams::default()).await;
}

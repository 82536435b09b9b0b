//! Events are one store behind two APIs, as kube-apiserver serves them: what is written
//! as `events.k8s.io/v1` is read as core `v1` (what `kubectl get events` and `kubectl
//! describe` read) and the other way round, with kube-apiserver's field mapping, in
//! get, list (with the field selectors kubectl describe uses) and watch.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::{Event as EventsV1, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};

use granary_test_support::TestCluster;
use granary_test_support::api::{api_error, cm, list_version};
use granary_test_support::kubectl::{self, Kubectl};

fn reference(cm: &ConfigMap) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: cm.metadata.name.clone(),
        namespace: cm.metadata.namespace.clone(),
        uid: cm.metadata.uid.clone(),
        ..Default::default()
    }
}

fn time(s: &str) -> k8s_openapi::jiff::Timestamp {
    s.parse().expect("timestamp")
}

/// The next event of a watch, within a deadline.
async fn next<T>(
    events: &mut (impl futures::Stream<Item = Result<WatchEvent<T>, kube::Error>> + Unpin),
) -> WatchEvent<T> {
    tokio::time::timeout(std::time::Duration::from_secs(30), events.next())
        .await
        .expect("an event within the deadline")
        .expect("stream open")
        .expect("event decodes")
}

#[tokio::test]
async fn events_written_as_events_k8s_io_are_core_events_and_back() {
    let cluster = TestCluster::start().await;
    let ns = cluster.namespace("ev").await;
    let client = cluster.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let core: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), &ns);
    let target = cms
        .create(&PostParams::default(), &cm("target", &[]))
        .await
        .expect("configmap");
    let other = cms
        .create(&PostParams::default(), &cm("other", &[]))
        .await
        .expect("configmap");
    let rv = list_version(&core).await;
    let mut core_watch = core
        .watch(
            &WatchParams::default().fields("involvedObject.name=target"),
            &rv,
        )
        .await
        .expect("core watch")
        .boxed();
    let mut v1_watch = v1
        .watch(&WatchParams::default().fields("regarding.name=target"), &rv)
        .await
        .expect("events.k8s.io watch")
        .boxed();

    // events.k8s.io/v1 → core v1.
    let mut written = EventsV1::default();
    written.metadata.name = Some("target.new".into());
    written.regarding = Some(reference(&target));
    written.note = Some("written through events.k8s.io".into());
    written.reason = Some("Tested".into());
    written.type_ = Some("Normal".into());
    written.action = Some("Testing".into());
    written.event_time = Some(MicroTime(time("2026-01-02T03:04:05.123456Z")));
    written.reporting_controller = Some("granary.dev/conformance".into());
    written.reporting_instance = Some("conformance-1".into());
    // (The deprecated* fields must be unset on an events.k8s.io/v1 create; the core
    // write below covers their mapping.)
    let created = v1
        .create(&PostParams::default(), &written)
        .await
        .expect("create");
    let read = core.get("target.new").await.expect("readable as core v1");
    assert_eq!(read.involved_object.name.as_deref(), Some("target"));
    assert_eq!(read.involved_object.uid, target.metadata.uid);
    assert_eq!(
        read.message.as_deref(),
        Some("written through events.k8s.io")
    );
    assert_eq!(read.reason.as_deref(), Some("Tested"));
    assert_eq!(read.action.as_deref(), Some("Testing"));
    assert_eq!(
        read.reporting_component.as_deref(),
        Some("granary.dev/conformance")
    );
    assert_eq!(read.reporting_instance.as_deref(), Some("conformance-1"));
    assert_eq!(read.event_time, written.event_time);
    assert_eq!(read.count, None);
    assert_eq!(read.first_timestamp, None);
    assert_eq!(
        read.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(read.metadata.uid, created.metadata.uid);

    // kubectl describe's list: field selectors on the involved object.
    let selector = format!(
        "involvedObject.kind=ConfigMap,involvedObject.name=target,involvedObject.namespace={ns},involvedObject.uid={}",
        target.metadata.uid.as_deref().unwrap()
    );
    let found = core
        .list(&ListParams::default().fields(&selector))
        .await
        .expect("list by involvedObject");
    let names: Vec<_> = found
        .items
        .iter()
        .filter_map(|e| e.metadata.name.clone())
        .collect();
    assert_eq!(names, ["target.new"]);
    let none = core
        .list(&ListParams::default().fields("involvedObject.name=other"))
        .await
        .unwrap();
    assert!(none.items.is_empty());
    match next(&mut core_watch).await {
        WatchEvent::Added(e) => {
            assert_eq!(e.metadata.name.as_deref(), Some("target.new"));
            assert_eq!(e.message.as_deref(), Some("written through events.k8s.io"));
        }
        other => panic!("{other:?}"),
    }
    match next(&mut v1_watch).await {
        WatchEvent::Added(e) => {
            assert_eq!(e.note.as_deref(), Some("written through events.k8s.io"))
        }
        other => panic!("{other:?}"),
    }

    // core v1 → events.k8s.io/v1.
    let mut old_style = CoreEvent::default();
    old_style.metadata.name = Some("other.old".into());
    old_style.involved_object = reference(&other);
    old_style.message = Some("written through core v1".into());
    old_style.reason = Some("Legacy".into());
    old_style.type_ = Some("Warning".into());
    old_style.count = Some(5);
    old_style.first_timestamp = Some(Time(time("2026-01-02T01:00:00Z")));
    old_style.last_timestamp = Some(Time(time("2026-01-02T02:00:00Z")));
    old_style.source = Some(EventSource {
        component: Some("old-recorder".into()),
        host: None,
    });
    old_style.reporting_component = Some("old-recorder".into());
    core.create(&PostParams::default(), &old_style)
        .await
        .expect("core create");
    let seen = v1
        .get("other.old")
        .await
        .expect("readable as events.k8s.io");
    assert_eq!(
        seen.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("other")
    );
    assert_eq!(seen.note.as_deref(), Some("written through core v1"));
    assert_eq!(seen.type_.as_deref(), Some("Warning"));
    assert_eq!(seen.deprecated_count, Some(5));
    assert_eq!(seen.deprecated_first_timestamp, old_style.first_timestamp);
    assert_eq!(seen.deprecated_last_timestamp, old_style.last_timestamp);
    assert_eq!(
        seen.deprecated_source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("old-recorder")
    );
    assert_eq!(seen.reporting_controller.as_deref(), Some("old-recorder"));
    let by_regarding: Vec<_> = v1
        .list(&ListParams::default().fields("regarding.name=other"))
        .await
        .expect("list by regarding")
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(by_regarding, ["other.old"]);
    let all: Vec<_> = v1
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(all, ["other.old", "target.new"]);

    // An update through events.k8s.io (a series) shows in core and in both watches.
    let mut again = v1.get("target.new").await.unwrap();
    again.series = Some(EventSeries {
        count: 3,
        last_observed_time: MicroTime(time("2026-01-02T03:10:00.000001Z")),
    });
    v1.replace("target.new", &PostParams::default(), &again)
        .await
        .expect("update");
    let read = core.get("target.new").await.unwrap();
    let series = read.series.expect("series");
    assert_eq!(series.count, Some(3));
    match next(&mut core_watch).await {
        WatchEvent::Modified(e) => assert!(e.series.is_some()),
        other => panic!("{other:?}"),
    }
    match next(&mut v1_watch).await {
        WatchEvent::Modified(e) => assert_eq!(e.series.map(|s| s.count), Some(3)),
        other => panic!("{other:?}"),
    }

    // Deleted through core: gone from events.k8s.io, and its watch says so.
    core.delete("target.new", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(api_error(v1.get("target.new").await).code, 404);
    match next(&mut v1_watch).await {
        WatchEvent::Deleted(e) => assert_eq!(e.metadata.name.as_deref(), Some("target.new")),
        other => panic!("{other:?}"),
    }
    let left: Vec<_> = core
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(left, ["other.old"]);
    drop(v1_watch.try_collect::<Vec<_>>());
}

/// `kubectl get events` and `kubectl describe` show an event written as
/// events.k8s.io/v1.
#[tokio::test]
async fn kubectl_shows_events_written_as_events_k8s_io() {
    if !kubectl::available() {
        eprintln!("SKIPPED: kubectl is not installed");
        return;
    }
    let cluster = TestCluster::start().await;
    if !cluster.is_embedded() {
        return;
    }
    let ns = cluster.namespace("evk").await;
    let client = cluster.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let target = cms
        .create(&PostParams::default(), &cm("described", &[]))
        .await
        .unwrap();
    let v1: Api<EventsV1> = Api::namespaced(client.clone(), &ns);
    let mut e = EventsV1::default();
    e.metadata.name = Some("described.1".into());
    e.regarding = Some(reference(&target));
    e.note = Some("noted-by-the-new-api".into());
    e.reason = Some("Checked".into());
    e.type_ = Some("Normal".into());
    e.action = Some("Check".into());
    e.event_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    e.reporting_controller = Some("granary.dev/conformance".into());
    e.reporting_instance = Some("conformance-1".into());
    v1.create(&PostParams::default(), &e).await.expect("create");

    let k = Kubectl::new(&cluster.garden.kubeconfig_path)
        .private_cache()
        .namespace(&ns);
    // kube-apiserver's Event columns: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE.
    let listed = k.ok(&["get", "events"]).await;
    let line = listed
        .lines()
        .find(|l| l.contains("noted-by-the-new-api"))
        .unwrap_or_else(|| panic!("the event is listed: {listed}"));
    for cell in ["Normal", "Checked", "configmap/described"] {
        assert!(line.contains(cell), "{listed}");
    }
    let wide = k.ok(&["get", "events", "-o", "wide"]).await;
    assert!(wide.contains("described.1"), "{wide}");
    let listed = k.ok(&["get", "events.events.k8s.io"]).await;
    assert!(listed.contains("noted-by-the-new-api"), "{listed}");
    let described = k.ok(&["describe", "configmap", "described"]).await;
    assert!(described.contains("noted-by-the-new-api"), "{described}");
}

use super::*;
use crate::backup::catalog::tests::sample;
use proptest::prelude::*;
use serde_json::json;

fn s(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn ie(inc: &[&str], exc: &[&str]) -> IncludesExcludes {
    IncludesExcludes::new(s(inc), s(exc))
}

fn filter(spec: BackupSpec, ns: &IncludesExcludes) -> ResourceFilter {
    ResourceFilter::new(&spec, &sample(), ns)
}

#[test]
fn includes_excludes_follow_velero() {
    let f = ie(&["app-*", "db"], &["app-secret"]);
    assert!(f.should_include("app-1"));
    assert!(f.should_include("db"));
    assert!(!f.should_include("app-secret"));
    assert!(!f.should_include("web"));
    assert!(ie(&[], &[]).include_everything());
    assert!(ie(&["*"], &[]).include_everything());
    assert!(!ie(&["*"], &["x"]).include_everything());
    assert!(ie(&["*"], &["x"]).should_include("y"));
}

#[test]
fn download_requests_are_never_collected_whatever_the_filters_say() {
    use crate::backup::catalog::{Catalog, tests::res};
    let mut all = sample().all().to_vec();
    all.push(res(
        "velero.io",
        "downloadrequests",
        "DownloadRequest",
        true,
    ));
    all.push(res(
        "oadp.openshift.io",
        "nonadmindownloadrequests",
        "NonAdminDownloadRequest",
        true,
    ));
    let catalog = Catalog::new(all);
    let collected = |spec: BackupSpec| -> Vec<String> {
        let ns = ie(&["a"], &[]);
        let f = ResourceFilter::new(&spec, &catalog, &ns);
        catalog
            .collectable()
            .filter(|r| f.should_include(&r.name(), r.namespaced))
            .map(|r| r.name())
            .collect()
    };
    let named = s(&[
        "downloadrequests",
        "downloadrequests.velero.io",
        "nonadmindownloadrequests",
        "NonAdminDownloadRequest",
        "configmaps",
    ]);
    for spec in [
        BackupSpec::default(),
        BackupSpec {
            included_resources: Some(s(&["*"])),
            ..Default::default()
        },
        BackupSpec {
            included_resources: Some(named.clone()),
            ..Default::default()
        },
        BackupSpec {
            included_namespace_scoped_resources: Some(named),
            ..Default::default()
        },
    ] {
        let got = collected(spec.clone());
        assert!(got.contains(&"configmaps".to_string()), "{spec:?}: {got:?}");
        for never in [
            "downloadrequests.velero.io",
            "nonadmindownloadrequests.oadp.openshift.io",
        ] {
            assert!(!got.iter().any(|r| r == never), "{spec:?} collects {never}");
        }
    }
}

#[test]
fn old_style_cluster_resources() {
    let all = ie(&[], &[]);
    let some = ie(&["ns1"], &[]);
    // Unset: cluster-scoped only in an all-namespaces backup (namespaces always pass).
    let unset = filter(BackupSpec::default(), &all);
    assert!(unset.should_include("persistentvolumes", false));
    let unset_some = filter(BackupSpec::default(), &some);
    assert!(!unset_some.should_include("persistentvolumes", false));
    assert!(unset_some.should_include("namespaces", false));
    assert!(unset_some.should_include("configmaps", true));
    // False: never, not even namespaces.
    let off = filter(
        BackupSpec {
            include_cluster_resources: Some(false),
            ..Default::default()
        },
        &all,
    );
    assert!(!off.should_include("persistentvolumes", false));
    assert!(!off.should_include("namespaces", false));
    assert!(off.should_exclude("persistentvolumes", false));
    // True: always.
    let on = filter(
        BackupSpec {
            include_cluster_resources: Some(true),
            ..Default::default()
        },
        &some,
    );
    assert!(on.should_include("persistentvolumes", false));
    assert!(!on.should_exclude("customresourcedefinitions.apiextensions.k8s.io", false));
}

#[test]
fn old_style_resource_lists_resolve_names() {
    let f = filter(
        BackupSpec {
            included_resources: Some(s(&["cm", "deployments"])),
            ..Default::default()
        },
        &ie(&[], &[]),
    );
    assert!(f.should_include("configmaps", true));
    assert!(f.should_include("deployments.apps", true));
    assert!(!f.should_include("secrets", true));
    // Unset includeClusterResources with an include list: a PV pulled in by an action
    // is refused because persistentvolumes is not included.
    assert!(f.should_exclude("persistentvolumes", false));
    let ex = filter(
        BackupSpec {
            excluded_resources: Some(s(&["secrets", "*.apps"])),
            ..Default::default()
        },
        &ie(&[], &[]),
    );
    assert!(!ex.should_include("secrets", true));
    assert!(!ex.should_include("deployments.apps", true));
    assert!(ex.should_include("configmaps", true));
}

#[test]
fn new_style_filters() {
    let all = ie(&[], &[]);
    let f = filter(
        BackupSpec {
            included_cluster_scoped_resources: Some(s(&["persistentvolumes"])),
            excluded_namespace_scoped_resources: Some(s(&["secrets"])),
            ..Default::default()
        },
        &all,
    );
    assert!(f.should_include("persistentvolumes", false));
    assert!(!f.should_include("clusterroles.rbac.authorization.k8s.io", false));
    assert!(f.should_include("namespaces", false));
    assert!(!f.should_include("secrets", true));
    assert!(f.should_include("configmaps", true));
    // Only namespace-scoped filters set on an all-namespaces backup: cluster-scoped
    // resources are not collected (the namespace-scoped filter is not "everything").
    let g = filter(
        BackupSpec {
            included_namespace_scoped_resources: Some(s(&["configmaps"])),
            ..Default::default()
        },
        &all,
    );
    assert!(!g.should_include("persistentvolumes", false));
    let star = filter(
        BackupSpec {
            excluded_namespace_scoped_resources: Some(s(&["*"])),
            included_cluster_scoped_resources: Some(s(&["*"])),
            ..Default::default()
        },
        &all,
    );
    assert!(!star.should_include("configmaps", true));
    assert!(star.should_include("persistentvolumes", false));
}

#[test]
fn item_checks() {
    let ns = ie(&["a"], &[]);
    let res = filter(BackupSpec::default(), &ns);
    let item = |ns: &str, labels: Value| json!({"metadata": {"name": "x", "namespace": ns, "labels": labels}});
    assert_eq!(
        check_item(&item("a", json!({})), "configmaps", true, &ns, &res, false),
        Ok(())
    );
    assert_eq!(
        check_item(&item("b", json!({})), "configmaps", true, &ns, &res, false),
        Err(Skip::NamespaceExcluded)
    );
    assert_eq!(
        check_item(
            &item("a", json!({EXCLUDE_FROM_BACKUP_LABEL: "true"})),
            "configmaps",
            true,
            &ns,
            &res,
            false
        ),
        Err(Skip::ExcludeLabel)
    );
    assert_eq!(
        check_item(&item("b", json!({})), "configmaps", true, &ns, &res, true),
        Ok(()),
        "must-include items skip the filters"
    );
    // A cluster-scoped item pulled in by an action passes when its resource is not
    // excluded outright, even though it would not be collected directly.
    let pv = json!({"metadata": {"name": "pv1"}});
    assert!(!res.should_include("persistentvolumes", false));
    assert_eq!(
        check_item(&pv, "persistentvolumes", false, &ns, &res, false),
        Ok(())
    );
    let deleting = json!({"metadata": {"name": "x", "namespace": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
    assert_eq!(
        check_item(&deleting, "configmaps", true, &ns, &res, false),
        Err(Skip::BeingDeleted)
    );
}

#[test]
fn namespaces_to_list_expands_wildcards() {
    let live = s(&["app-1", "app-2", "db", "kube-system"]);
    assert_eq!(namespaces_to_list(&ie(&[], &["db"]), &live), None);
    assert_eq!(namespaces_to_list(&ie(&["*"], &[]), &live), None);
    assert_eq!(
        namespaces_to_list(&ie(&["app-*", "db", "missing"], &["app-2"]), &live),
        Some(s(&["app-1", "db"]))
    );
}

#[test]
fn namespace_tracking_follows_ns_tracker() {
    let live = |name: &str, app: &str, active: bool| LiveNamespace {
        name: name.into(),
        labels: [("app".to_string(), app.to_string())].into(),
        active,
    };
    let nss = vec![
        live("a", "web", true),
        live("b", "db", true),
        live("c", "web", false),
    ];
    let sel = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
        match_labels: Some([("app".to_string(), "web".to_string())].into()),
        match_expressions: None,
    };
    // All namespaces + a selector: only matching namespaces (items add more later).
    assert_eq!(
        initially_tracked(&nss, &ie(&[], &[]), Some(&sel), &[]),
        s(&["a"])
    );
    // No selector: the namespace filter decides.
    assert_eq!(
        initially_tracked(&nss, &ie(&[], &[]), None, &[]),
        s(&["a", "b"])
    );
    // A specific filter + selector: the union.
    assert_eq!(
        initially_tracked(&nss, &ie(&["b"], &[]), Some(&sel), &[]),
        s(&["a", "b"])
    );
}

proptest! {
    /// An excluded name is never included, whatever the includes say.
    #[test]
    fn excludes_always_win(name in "[a-c]{1,3}", inc in proptest::collection::vec("[a-c*]{1,3}", 0..3)) {
        let f = IncludesExcludes::new(inc, vec![name.clone()]);
        prop_assert!(!f.should_include(&name));
    }

    /// With no resource filters, a namespaced resource is collected by every backup and a
    /// cluster-scoped one exactly when the backup covers every namespace.
    #[test]
    fn default_filter_scope(all in any::<bool>(), namespaced in any::<bool>()) {
        let ns = if all { ie(&[], &[]) } else { ie(&["x"], &[]) };
        let f = filter(BackupSpec::default(), &ns);
        prop_assert_eq!(f.should_include("persistentvolumes", namespaced), namespaced || all);
    }
}

fn resource_names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(
        proptest::sample::select(vec![
            "configmaps",
            "cm",
            "secrets",
            "persistentvolumes",
            "clusterroles",
            "deployments",
            "*",
            "*.apps",
        ]),
        0..3,
    )
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn opt(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

proptest! {
    /// Whatever the filters, a resource refused outright (`should_exclude`) is never
    /// collected either (`should_include`), in both filter styles.
    #[test]
    fn excluded_is_never_included(
        inc in resource_names(),
        exc in resource_names(),
        scoped in any::<bool>(),
        icr in proptest::option::of(any::<bool>()),
        all_ns in any::<bool>(),
    ) {
        let spec = if scoped {
            BackupSpec {
                included_cluster_scoped_resources: opt(inc.clone()),
                excluded_cluster_scoped_resources: opt(exc.clone()),
                included_namespace_scoped_resources: opt(inc),
                excluded_namespace_scoped_resources: opt(exc),
                ..Default::default()
            }
        } else {
            BackupSpec {
                included_resources: opt(inc),
                excluded_resources: opt(exc),
                include_cluster_resources: icr,
                ..Default::default()
            }
        };
        let ns = if all_ns { ie(&[], &[]) } else { ie(&["a"], &[]) };
        let f = filter(spec, &ns);
        for r in sample().collectable() {
            if f.should_exclude(&r.name(), r.namespaced) {
                prop_assert!(!f.should_include(&r.name(), r.namespaced), "{}", r.name());
            }
        }
    }
}

//! Manifest behaviour: keys, duplicates, indexes, set operations, dependency order,
//! storage.

use proptest::prelude::*;

use super::*;

fn item(resource: &str, ns: &str, name: &str, uid: &str, owners: &[&str]) -> ManifestItem {
    ManifestItem {
        group: String::new(),
        version: "v1".into(),
        kind: "K".into(),
        resource: resource.into(),
        namespace: ns.into(),
        name: name.into(),
        uid: uid.into(),
        labels: BTreeMap::from([("app".into(), "web".into())]),
        annotations: BTreeMap::new(),
        owners: owners.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn key(resource: &str, ns: &str, name: &str) -> ItemKey {
    ItemKey {
        group: String::new(),
        resource: resource.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn names(keys: &[&ItemKey]) -> Vec<String> {
    keys.iter().map(|k| k.name.clone()).collect()
}

#[test]
fn add_refuses_duplicates_but_not_same_name_of_other_resource() {
    let mut m = Manifest::new();
    m.add(item("configmaps", "ns", "x", "u1", &[]))
        .expect("first");
    m.add(item("secrets", "ns", "x", "u2", &[]))
        .expect("a Secret does not collide with a ConfigMap");
    let err = m.add(item("configmaps", "ns", "x", "u3", &[])).unwrap_err();
    assert!(
        matches!(&err, ManifestError::ItemAlreadyExists(k) if **k == key("configmaps", "ns", "x"))
    );
    assert_eq!(
        err.to_string(),
        "item already exists in manifest: resources/configmaps/namespaces/ns/x.json"
    );
    assert!(matches!(
        m.add(item("pods", "ns", "y", "u1", &[])),
        Err(ManifestError::DuplicateUid { .. })
    ));
    assert_eq!(m.len(), 2);
    assert!(m.by_uid("u3").is_none(), "a refused add leaves no trace");
    assert_eq!(
        m.by_uid("u2").map(|i| i.key.resource.as_str()),
        Some("secrets")
    );
}

#[test]
fn owners_children_and_missing_owners() {
    let mut m = Manifest::new();
    m.add(item("pods", "ns", "p", "u-p", &["u-rs", "u-gone", "u-rs"]))
        .expect("add");
    m.add(item("replicasets", "ns", "rs", "u-rs", &["u-d"]))
        .expect("add");
    m.add(item("deployments", "ns", "d", "u-d", &[]))
        .expect("add");
    m.add(item("pods", "ns", "q", "u-q", &["u-rs"]))
        .expect("add");
    let owners: Vec<_> = m
        .owners(&key("pods", "ns", "p"))
        .iter()
        .map(|i| i.key.name.clone())
        .collect();
    assert_eq!(owners, ["rs"]);
    assert_eq!(m.missing_owners(&key("pods", "ns", "p")), ["u-gone"]);
    let children: Vec<_> = m
        .children(&key("replicasets", "ns", "rs"))
        .iter()
        .map(|i| i.key.name.clone())
        .collect();
    assert_eq!(children, ["p", "q"]);
    assert!(m.children(&key("pods", "ns", "p")).is_empty());
    assert!(m.owners(&key("pods", "ns", "nope")).is_empty());
}

#[test]
fn set_operations_between_manifests() {
    let mut a = Manifest::new();
    let mut b = Manifest::new();
    for n in ["1", "2", "3"] {
        a.add(item("pods", "ns", n, "", &[])).expect("add");
    }
    for n in ["3", "4"] {
        b.add(item("pods", "ns", n, "", &[])).expect("add");
    }
    assert_eq!(names(&a.intersection(&b)), ["3"]);
    assert_eq!(names(&a.difference(&b)), ["1", "2"]);
    assert_eq!(names(&a.union(&b)), ["1", "2", "3", "4"]);
    assert!(a.overlaps(&b));
    assert!(!a.overlaps(&Manifest::new()));
}

#[test]
fn items_are_ordered_by_group_resource_namespace_name() {
    let mut m = Manifest::new();
    let mut apps = item("deployments", "a", "z", "", &[]);
    apps.group = "apps".into();
    m.add(apps).expect("add");
    m.add(item("pods", "b", "a", "", &[])).expect("add");
    m.add(item("pods", "a", "b", "", &[])).expect("add");
    m.add(item("namespaces", "", "a", "", &[])).expect("add");
    let order: Vec<String> = m.keys().map(ToString::to_string).collect();
    assert_eq!(
        order,
        [
            "resources/namespaces/cluster/a.json",
            "resources/pods/namespaces/a/b.json",
            "resources/pods/namespaces/b/a.json",
            "resources/deployments.apps/namespaces/a/z.json",
        ]
    );
}

#[test]
fn stored_form_matches_the_schema_and_reloads() {
    let mut m = Manifest::new();
    m.add(item("pods", "ns", "p", "u-p", &["u-rs"]))
        .expect("add");
    m.add(item("replicasets", "ns", "rs", "u-rs", &[]))
        .expect("add");
    let json = serde_json::to_string(&m).expect("json");
    assert_eq!(
        json,
        r#"{"version":1,"items":[{"group":"","version":"v1","kind":"K","resource":"pods","namespace":"ns","name":"p","uid":"u-p","labels":{"app":"web"},"annotations":{},"owners":["u-rs"]},{"group":"","version":"v1","kind":"K","resource":"replicasets","namespace":"ns","name":"rs","uid":"u-rs","labels":{"app":"web"},"annotations":{},"owners":[]}]}"#
    );
    let back = Manifest::read_gz(&m.to_gz_bytes()[..], 1 << 20).expect("reloads");
    assert_eq!(back, m);
    // Indexes are rebuilt on load.
    assert_eq!(back.children(&key("replicasets", "ns", "rs")).len(), 1);
    assert!(back.by_uid("u-p").is_some());
    assert!(matches!(
        Manifest::from_json(br#"{"version":2,"items":[]}"#),
        Err(ManifestError::UnsupportedVersion(2))
    ));
    assert!(matches!(
        Manifest::read_gz(&m.to_gz_bytes()[..], 10),
        Err(ManifestError::TooLarge { limit: 10 })
    ));
    let dup = r#"{"version":1,"items":[{"group":"","version":"v1","kind":"K","resource":"pods","name":"p"},{"group":"","version":"v1","kind":"K","resource":"pods","name":"p"}]}"#;
    assert!(matches!(
        Manifest::from_json(dup.as_bytes()),
        Err(ManifestError::ItemAlreadyExists(_))
    ));
}

#[test]
fn dependency_order_puts_owners_first_with_key_order_ties() {
    let mut m = Manifest::new();
    m.add(item("pods", "ns", "a-pod", "u-p", &["u-rs"]))
        .expect("add");
    m.add(item("replicasets", "ns", "rs", "u-rs", &["u-d"]))
        .expect("add");
    m.add(item("deployments", "ns", "d", "u-d", &[]))
        .expect("add");
    m.add(item("configmaps", "ns", "cm", "u-cm", &[]))
        .expect("add");
    let o = m.dependency_order();
    assert_eq!(names(&o.order), ["cm", "d", "rs", "a-pod"]);
    assert!(o.broken_cycles.is_empty());
    // A rank (restore priorities) reorders only what is ready.
    let o = m.dependency_order_by(|k, _| if k.resource == "configmaps" { 1 } else { 0 });
    assert_eq!(names(&o.order), ["d", "rs", "a-pod", "cm"]);
}

#[test]
fn cycles_are_broken_deterministically_and_reported() {
    let mut m = Manifest::new();
    // a → b → c → a (each owned by the next), plus d owned by c, plus a self-owner s.
    m.add(item("x", "ns", "a", "ua", &["ub"])).expect("add");
    m.add(item("x", "ns", "b", "ub", &["uc"])).expect("add");
    m.add(item("x", "ns", "c", "uc", &["ua"])).expect("add");
    m.add(item("x", "ns", "d", "ud", &["uc"])).expect("add");
    m.add(item("x", "ns", "s", "us", &["us"])).expect("add");
    let o = m.dependency_order();
    assert_eq!(names(&o.order), ["a", "c", "b", "d", "s"]);
    assert_eq!(o.broken_cycles.len(), 2);
    assert_eq!(o.broken_cycles[0].released.name, "a");
    assert_eq!(names(&o.broken_cycles[0].cycle), ["a", "b", "c"]);
    assert_eq!(names(&o.broken_cycles[1].cycle), ["s"]);
    assert_eq!(m.dependency_order(), o, "deterministic");
}

fn graph(n: usize, edges: Vec<(usize, usize)>) -> Manifest {
    let mut owners: Vec<Vec<String>> = vec![Vec::new(); n];
    for (child, owner) in edges {
        owners[child].push(format!("u{owner}"));
    }
    let mut m = Manifest::new();
    for (i, own) in owners.into_iter().enumerate() {
        // Names scramble creation order against key order.
        let name = format!("{:03}", (i * 37) % 101);
        let mut it = item(
            ["pods", "configmaps", "secrets"][i % 3],
            "ns",
            &name,
            &format!("u{i}"),
            &[],
        );
        it.owners = own;
        m.add(it).expect("unique key and uid");
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn owners_come_first_in_any_acyclic_graph(
        n in 1usize..60,
        raw in prop::collection::vec((0usize..60, 0usize..60), 0..150),
    ) {
        // Edges only from a later to an earlier index: acyclic by construction.
        let edges: Vec<(usize, usize)> = raw.into_iter()
            .map(|(a, b)| (a % n, b % n))
            .filter(|(a, b)| a > b)
            .collect();
        let m = graph(n, edges);
        let o = m.dependency_order();
        prop_assert!(o.broken_cycles.is_empty());
        prop_assert_eq!(o.order.len(), m.len());
        let pos: HashMap<&ItemKey, usize> = o.order.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        for it in m.iter() {
            for owner in m.owners(it.key) {
                prop_assert!(pos[owner.key] < pos[it.key], "{} before {}", owner.key, it.key);
            }
        }
    }

    #[test]
    fn any_graph_orders_every_item_once(
        n in 1usize..40,
        raw in prop::collection::vec((0usize..40, 0usize..40), 0..120),
    ) {
        let m = graph(n, raw.into_iter().map(|(a, b)| (a % n, b % n)).collect());
        let o = m.dependency_order();
        let mut seen: Vec<&ItemKey> = o.order.clone();
        seen.sort();
        seen.dedup();
        prop_assert_eq!(seen.len(), m.len());
        // Only released items may precede an owner.
        let pos: HashMap<&ItemKey, usize> = o.order.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let released: std::collections::HashSet<&ItemKey> = o.broken_cycles.iter().map(|c| c.released).collect();
        for it in m.iter() {
            if released.contains(it.key) {
                continue;
            }
            for owner in m.owners(it.key) {
                prop_assert!(pos[owner.key] < pos[it.key]);
            }
        }
        prop_assert_eq!(m.dependency_order(), o);
    }
}

#[test]
fn a_bad_gzip_stream_is_a_data_error_not_an_io_error() {
    // Found by the manifest_reader fuzz target: a bad gzip header came back as `Io`.
    let good = Manifest::new().to_gz_bytes();
    for bad in [
        &b"not gzip"[..],
        &good[..good.len() - 3],
        &[0x1f, 0x8b, 8, 0xff][..],
    ] {
        let err = Manifest::read_gz(bad, 1 << 20).expect_err("refused");
        assert!(matches!(err, ManifestError::Corrupt(_)), "{err:?}");
    }
}

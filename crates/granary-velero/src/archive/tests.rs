//! Golden, compatibility, hostile-archive and property tests of the archive format.

use std::io::Read;

use chrono::{TimeZone, Utc};
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::files::ResourceList;
use crate::manifest::Manifest;
use crate::resource::GroupResource;

const MTIME: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn obj(api_version: &str, kind: &str, ns: &str, name: &str, uid: &str, owners: &[&str]) -> Value {
    let mut meta = json!({"name": name, "uid": uid, "labels": {"app": "web"}});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    if !owners.is_empty() {
        meta["ownerReferences"] = owners
            .iter()
            .map(|o| json!({"apiVersion": "v1", "kind": "X", "name": "o", "uid": o}))
            .collect();
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"z": 1, "a": "<&>"}})
}

fn gr(s: &str) -> GroupResource {
    GroupResource::parse(s).expect("valid group resource")
}

/// The sample backup: (group resource, preferred version, object).
fn sample() -> Vec<(GroupResource, &'static str, Value)> {
    vec![
        (
            gr("namespaces"),
            "v1",
            obj("v1", "Namespace", "", "ns1", "u-ns", &[]),
        ),
        (
            gr("pods"),
            "v1",
            obj("v1", "Pod", "ns1", "p", "u-pod", &["u-rs"]),
        ),
        (
            gr("replicasets.apps"),
            "v1",
            obj("apps/v1", "ReplicaSet", "ns1", "rs", "u-rs", &["u-d"]),
        ),
        (
            gr("deployments.apps"),
            "v1",
            obj("apps/v1", "Deployment", "ns1", "d", "u-d", &[]),
        ),
        (
            gr("horizontalpodautoscalers.autoscaling"),
            "v2",
            obj(
                "autoscaling/v1",
                "HorizontalPodAutoscaler",
                "ns1",
                "h",
                "u-h",
                &[],
            ),
        ),
        (
            gr("horizontalpodautoscalers.autoscaling"),
            "v2",
            obj(
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                "ns1",
                "h",
                "u-h",
                &[],
            ),
        ),
    ]
}

fn write_sample() -> (Vec<u8>, Manifest) {
    let mut w =
        ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(MTIME, 0).unwrap()).expect("starts");
    for (g, pv, o) in sample() {
        w.add_item(&g, pv, &o).expect("adds");
    }
    w.finish_with_manifest().expect("finishes")
}

/// (path, entry type, mode, mtime, contents) of every raw tar entry.
fn raw_entries(gz: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, Vec<u8>)> {
    let mut a = tar::Archive::new(MultiGzDecoder::new(gz));
    a.entries()
        .expect("tar")
        .map(|e| {
            let mut e = e.expect("entry");
            let mut data = Vec::new();
            e.read_to_end(&mut data).expect("data");
            let h = e.header();
            (
                e.path().expect("path").to_string_lossy().into_owned(),
                h.entry_type(),
                h.mode().expect("mode"),
                h.mtime().expect("mtime"),
                data,
            )
        })
        .collect()
}

#[test]
fn golden_entries_in_order_with_exact_version_bytes() {
    let (gz, manifest) = write_sample();
    let entries = raw_entries(&gz);
    let paths: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        paths,
        [
            "metadata/version",
            "resources/namespaces/cluster/ns1.json",
            "resources/namespaces/v1-preferredversion/cluster/ns1.json",
            "resources/pods/namespaces/ns1/p.json",
            "resources/pods/v1-preferredversion/namespaces/ns1/p.json",
            "resources/replicasets.apps/namespaces/ns1/rs.json",
            "resources/replicasets.apps/v1-preferredversion/namespaces/ns1/rs.json",
            "resources/deployments.apps/namespaces/ns1/d.json",
            "resources/deployments.apps/v1-preferredversion/namespaces/ns1/d.json",
            "resources/horizontalpodautoscalers.autoscaling/v1/namespaces/ns1/h.json",
            "resources/horizontalpodautoscalers.autoscaling/namespaces/ns1/h.json",
            "resources/horizontalpodautoscalers.autoscaling/v2-preferredversion/namespaces/ns1/h.json",
        ]
    );
    assert_eq!(entries[0].4, b"1.1.0\n");
    for (path, kind, mode, mtime, _) in &entries {
        assert_eq!(*kind, tar::EntryType::Regular, "{path}");
        assert_eq!(*mode, 0o755, "{path}");
        assert_eq!(*mtime, MTIME as u64, "{path}");
    }
    assert_eq!(
        String::from_utf8(entries[3].4.clone()).expect("utf8"),
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"web"},"name":"p","namespace":"ns1","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"u-rs"}],"uid":"u-pod"},"spec":{"a":"\u003c\u0026\u003e","z":1}}"#
    );
    assert_eq!(
        entries[3].4, entries[4].4,
        "preferred copy is byte-identical"
    );
    // One manifest item per object, whatever copies the tarball holds.
    assert_eq!(manifest.len(), 5);
}

#[test]
fn duplicate_items_are_refused_before_writing() {
    let mut w =
        ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(MTIME, 0).unwrap()).expect("starts");
    let o = obj("v1", "Pod", "ns", "p", "u1", &[]);
    w.add_item(&gr("pods"), "v1", &o).expect("first");
    let before = w.entries();
    let err = w
        .add_item(&gr("pods"), "v1", &obj("v1", "Pod", "ns", "p", "u2", &[]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ArchiveError::Manifest(crate::manifest::ManifestError::ItemAlreadyExists(_))
        ),
        "{err}"
    );
    assert_eq!(w.entries(), before);
    // A ConfigMap and a Secret of the same name do not collide.
    w.add_item(
        &gr("configmaps"),
        "v1",
        &obj("v1", "ConfigMap", "ns", "p", "u3", &[]),
    )
    .expect("other resource");
    // Objects that would produce unsafe paths or lie about their group are refused.
    for bad in [
        obj("v1", "Pod", "ns", "../x", "u4", &[]),
        obj("v1", "Pod", "a/b", "x", "u5", &[]),
    ] {
        assert!(w.add_item(&gr("pods"), "v1", &bad).is_err());
    }
    assert!(
        w.add_item(
            &gr("deployments.apps"),
            "v1",
            &obj("v1", "Pod", "ns", "q", "u6", &[])
        )
        .is_err()
    );
}

/// Builds a tarball in Velero's layout by hand, as Go's writer would: regular files,
/// mode 0755, no directories, preferred-version copies.
fn velero_style(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o755);
        h.set_mtime(MTIME as u64);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, path, &data[..]).expect("append");
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

#[test]
fn hand_built_velero_tarball_parses_into_the_same_items() {
    let mut files = vec![("metadata/version".to_owned(), b"1.1.0\n".to_vec())];
    // Velero's collection order differs from ours; item order must not matter.
    for (g, pv, o) in sample().into_iter().rev() {
        let item = crate::manifest::item_from_object(&g, &o).expect("valid");
        let scope = Scope::from_namespace(&item.namespace);
        let bytes = json::to_vec_compact(&o);
        let mk = |vd| {
            ItemPath {
                group_resource: g.clone(),
                version_dir: vd,
                scope: scope.clone(),
                name: item.name.clone(),
            }
            .to_string()
        };
        if item.version == pv {
            files.push((mk(VersionDir::Unversioned), bytes.clone()));
            files.push((mk(VersionDir::Preferred(pv.to_owned())), bytes));
        } else {
            files.push((mk(VersionDir::Version(item.version.clone())), bytes));
        }
    }
    let theirs = velero_style(&files);
    let (ours, written_manifest) = write_sample();

    let a = parse_archive(&theirs[..], &ArchiveLimits::default()).expect("velero tarball parses");
    let b = parse_archive(&ours[..], &ArchiveLimits::default()).expect("our tarball parses");
    assert_eq!(a.items, b.items);
    assert_eq!(a.format_version.as_deref(), Some("1.1.0\n"));
    assert!(a.version_first);
    let hpa = gr("horizontalpodautoscalers.autoscaling");
    let versions = a.group_versions(&hpa);
    assert_eq!(versions.preferred.as_deref(), Some("v2"));
    assert_eq!(
        versions
            .versions
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["v1", "v2"]
    );
    assert_eq!(a.unversioned().count(), 5);
    assert_eq!(
        a.get(&gr("pods"), &Scope::Namespaced("ns1".into()), "p")
            .and_then(|p| p["metadata"]["uid"].as_str()),
        Some("u-pod")
    );
    let rebuilt = Manifest::from_archive(&theirs[..], &ArchiveLimits::default()).expect("manifest");
    assert_eq!(rebuilt, written_manifest);
}

#[test]
fn long_paths_round_trip() {
    let name = format!("n{}", "x".repeat(240));
    let g = gr("widgets.a-very-long-group-name-for-testing.example.com");
    let mut w =
        ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(MTIME, 0).unwrap()).expect("starts");
    w.add_item(
        &g,
        "v1",
        &obj(
            "a-very-long-group-name-for-testing.example.com/v1",
            "Widget",
            "some-namespace",
            &name,
            "u",
            &[],
        ),
    )
    .expect("adds");
    let (gz, _) = w.finish().expect("finishes");
    let parsed = parse_archive(&gz[..], &ArchiveLimits::default()).expect("parses");
    assert_eq!(parsed.items.len(), 2);
    assert!(parsed.items.keys().all(|p| p.name == name));
}

#[test]
fn extraction_of_a_good_archive_mirrors_its_entries() {
    let (gz, _) = write_sample();
    let root = tempfile::tempdir().expect("tempdir");
    let stats = extract_archive(&gz[..], root.path(), &ArchiveLimits::default()).expect("extracts");
    assert_eq!(stats.entries, 12);
    assert_eq!(
        std::fs::read(root.path().join("metadata/version")).expect("read"),
        b"1.1.0\n"
    );
    assert!(
        root.path()
            .join("resources/deployments.apps/v1-preferredversion/namespaces/ns1/d.json")
            .is_file()
    );
    // A non-empty target is refused.
    assert!(extract_archive(&gz[..], root.path(), &ArchiveLimits::default()).is_err());
}

// ---- properties ----

#[derive(Debug, Clone)]
struct Spec {
    resource: usize,
    ns: Option<usize>,
    name: String,
    label: String,
    owner: Option<usize>,
}

const RESOURCES: [(&str, &str, &str, bool); 4] = [
    ("pods", "v1", "Pod", true),
    ("configmaps", "v1", "ConfigMap", true),
    ("deployments.apps", "apps/v1", "Deployment", true),
    ("persistentvolumes", "v1", "PersistentVolume", false),
];

fn specs() -> impl Strategy<Value = Vec<Spec>> {
    prop::collection::vec(
        (
            0..RESOURCES.len(),
            prop::option::of(0..3usize),
            "[a-z][a-z0-9.-]{0,12}",
            "[ -~]{0,8}",
            prop::option::of(0..40usize),
        )
            .prop_map(|(resource, ns, name, label, owner)| Spec {
                resource,
                ns,
                name,
                label,
                owner,
            }),
        0..40,
    )
}

fn objects(specs: &[Spec]) -> Vec<(GroupResource, Value)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let (r, av, kind, namespaced) = RESOURCES[s.resource];
        let ns = if namespaced {
            format!("ns{}", s.ns.unwrap_or(0))
        } else {
            String::new()
        };
        if !seen.insert((r, ns.clone(), s.name.clone())) {
            continue;
        }
        let owner = s.owner.map(|o| format!("uid-{o}"));
        let owners: Vec<&str> = owner.iter().map(String::as_str).collect();
        let mut o = obj(av, kind, &ns, &s.name, &format!("uid-{i}"), &owners);
        o["metadata"]["labels"]["l"] = json!(s.label);
        out.push((gr(r), o));
    }
    out
}

fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    MultiGzDecoder::new(gz).read_to_end(&mut out).expect("gzip");
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn write_then_read_round_trips(specs in specs()) {
        let objs = objects(&specs);
        let mut w = ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(MTIME, 0).unwrap()).expect("starts");
        for (g, o) in &objs {
            w.add_item(g, "v1", o).expect("adds");
        }
        let (gz, mut spool) = w.finish().expect("finishes");
        let written = spool.to_manifest().expect("read back");
        let parsed = parse_archive(&gz[..], &ArchiveLimits::default()).expect("parses");
        prop_assert_eq!(parsed.unversioned().count(), objs.len());
        for (g, o) in &objs {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            let name = o["metadata"]["name"].as_str().expect("name");
            prop_assert_eq!(parsed.get(g, &Scope::from_namespace(ns), name), Some(o));
        }
        let rebuilt = Manifest::from_archive(&gz[..], &ArchiveLimits::default()).expect("manifest");
        prop_assert_eq!(&rebuilt, &written);
        // What the spool stores is byte for byte what the manifest would.
        let spooled = spool.write_gz(Vec::new()).expect("spooled manifest");
        let stored = Manifest::read_gz(&spooled[..], 1 << 30).expect("stored manifest");
        prop_assert_eq!(&stored, &written);
        prop_assert_eq!(gunzip(&spooled), gunzip(&written.to_gz_bytes()));
        let list = spool.write_resource_list_gz(Vec::new()).expect("spooled list");
        prop_assert_eq!(gunzip(&list), gunzip(&ResourceList::from_manifest(&written).to_gz_bytes()));
    }
}

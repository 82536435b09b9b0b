//! Tests of `inspect` and `verify`.

use std::io::Write;

use chrono::{TimeZone, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use super::*;
use crate::archive::ArchiveWriter;

fn pod(ns: &str, name: &str, uid: &str, owner: Option<&str>) -> Value {
    let mut o = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": uid}});
    if let Some(owner) = owner {
        o["metadata"]["ownerReferences"] = json!([{"uid": owner}]);
    }
    o
}

fn backup() -> (Vec<u8>, Manifest) {
    let mut w = ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(0, 0).unwrap()).expect("starts");
    let pods = GroupResource::new("", "pods");
    w.add_item(&pods, "v1", &pod("a", "p1", "u1", None))
        .expect("adds");
    w.add_item(&pods, "v1", &pod("a", "p2", "u2", Some("u1")))
        .expect("adds");
    w.add_item(&pods, "v1", &pod("b", "p3", "u3", Some("u-elsewhere")))
        .expect("adds");
    let ns =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "uid": "u-ns"}});
    w.add_item(&GroupResource::new("", "namespaces"), "v1", &ns)
        .expect("adds");
    w.finish_with_manifest().expect("finishes")
}

#[test]
fn inspect_counts_per_resource_and_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("b1.tar.gz");
    let (gz, manifest) = backup();
    std::fs::write(&path, &gz).expect("write");

    let i = inspect(&path).expect("inspects");
    assert_eq!(i.format_version.as_deref(), Some("1.1.0"));
    assert_eq!(i.items, 4);
    assert_eq!(i.entries, 9);
    let pods = &i.resources["pods"];
    assert_eq!(pods.preferred_version.as_deref(), Some("v1"));
    assert_eq!(
        pods.namespaces,
        BTreeMap::from([("a".into(), 2), ("b".into(), 1)])
    );
    assert_eq!(i.resources["namespaces"].cluster, 1);
    assert_eq!(i.manifest.source, ManifestSource::RebuiltFromTarball);
    assert_eq!(i.manifest.items_with_owners, 2);
    assert_eq!(i.manifest.missing_owner_refs, 1);
    assert_eq!(i.manifest.content, manifest);
    let text = i.to_string();
    assert!(text.contains("pods: 3 (preferred version v1)"), "{text}");
    assert!(
        text.contains("Manifest (rebuilt from the tarball): 4 items"),
        "{text}"
    );
    let json = serde_json::to_value(&i).expect("json");
    assert_eq!(json["manifest"]["content"]["version"], 1);

    // With the stored manifest beside it.
    std::fs::write(dir.path().join(MANIFEST_FILE_NAME), manifest.to_gz_bytes()).expect("write");
    let i = inspect(&path).expect("inspects");
    assert_eq!(
        (i.manifest.source, i.manifest.matches_tarball),
        (ManifestSource::Stored, Some(true))
    );
    assert!(verify(&path).expect("verifies").is_ok());
}

#[test]
fn verify_accepts_ours_and_reports_format_problems() {
    let (gz, manifest) = backup();
    let stored = Some(ItemDigests::of_manifest(&manifest));
    let report = verify_reader(&gz[..], stored, &ArchiveLimits::default()).expect("reads");
    assert!(report.is_ok(), "{report}");
    assert!(
        report
            .to_string()
            .starts_with("Archive is valid: format version 1.1.0, 9 entries, 4 objects")
    );

    // A stale manifest: empty, or one field of one item changed.
    let report = verify_reader(
        &gz[..],
        Some(ItemDigests::default()),
        &ArchiveLimits::default(),
    )
    .expect("reads");
    assert!(!report.is_ok());
    let changed: ItemDigests = manifest
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let mut item = item.to_owned_item();
            if i == 2 {
                item.labels.insert("planted".into(), "yes".into());
            }
            item.digest()
        })
        .collect();
    let report = verify_reader(&gz[..], Some(changed), &ArchiveLimits::default()).expect("reads");
    assert_eq!(
        report.problems,
        ["manifest.json.gz (4 items) does not match the tarball (4 items)"]
    );

    // A missing version file, a preferred copy that differs.

    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, data) in [
        (
            "resources/pods/namespaces/a/p.json",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"}}"#,
        ),
        (
            "resources/pods/v1-preferredversion/namespaces/a/p.json",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a","x":1}}"#,
        ),
        (
            "resources/pods/namespaces/a/q.json",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other","namespace":"a"}}"#,
        ),
        ("metadata/version", "1.0.0\n"),
        ("notes.txt", "hello"),
    ] {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data.as_bytes())
            .expect("append");
    }
    let bad = b.into_inner().expect("tar").finish().expect("gz");
    let report = verify_reader(&bad[..], None, &ArchiveLimits::default()).expect("reads");
    let text = report.to_string();
    assert!(text.starts_with("Archive is INVALID"), "{text}");
    assert!(
        text.contains("metadata/version is not the first entry"),
        "{text}"
    );
    assert!(text.contains("metadata/version is \"1.0.0\\n\""), "{text}");
    assert!(
        text.contains("differs from its preferred-version copy"),
        "{text}"
    );
    assert!(text.contains("not what its path says"), "{text}");
    assert!(
        text.contains("note: \"notes.txt\" is not an item file"),
        "{text}"
    );
}

#[test]
fn verify_refuses_hostile_archives_with_the_reason() {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..9].copy_from_slice(b"../escape");
    h.set_size(1);
    h.set_mode(0o755);
    h.set_cksum();
    gz.write_all(h.as_bytes()).expect("header");
    gz.write_all(&[b'x'; 512]).expect("data");
    gz.write_all(&[0; 1024]).expect("end");
    let bytes = gz.finish().expect("gz");
    let err = verify_reader(&bytes[..], None, &ArchiveLimits::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "entry \"../escape\" escapes the archive root"
    );
}

#[test]
fn an_item_must_be_what_its_path_says() {
    let path = |p: &str| ItemPath::parse(p).expect("an item path");
    let secret = |ns: Option<&str>, name: &str, api_version: &str| {
        let mut o =
            json!({"apiVersion": api_version, "kind": "Secret", "metadata": {"name": name}});
        if let Some(ns) = ns {
            o["metadata"]["namespace"] = json!(ns);
        }
        o
    };
    let here = path("resources/secrets/namespaces/team-a/s.json");
    let ok = check_item_path(&here, &secret(Some("team-a"), "s", "v1")).expect("valid");
    assert_eq!((ok.namespace.as_str(), ok.name.as_str()), ("team-a", "s"));
    // Velero's version directories hold the same object.
    check_item_path(
        &path("resources/secrets/v1-preferredversion/namespaces/team-a/s.json"),
        &secret(Some("team-a"), "s", "v1"),
    )
    .expect("preferred copy");
    check_item_path(
        &path("resources/deployments.apps/v1beta2/namespaces/n/d.json"),
        &json!({"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}),
    )
    .expect("another version");
    check_item_path(
        &path("resources/clusterroles.rbac.authorization.k8s.io/cluster/r.json"),
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
    )
    .expect("cluster-scoped");

    let refused = |p: &ItemPath, o: Value| check_item_path(p, &o).unwrap_err();
    assert_eq!(
        refused(&here, secret(Some("victim"), "s", "v1")),
        "object is \"victim\"/\"s\", not what its path says"
    );
    assert_eq!(
        refused(&here, secret(Some("team-a"), "other", "v1")),
        "object is \"team-a\"/\"other\", not what its path says"
    );
    assert_eq!(
        refused(&here, secret(None, "s", "v1")),
        "object is \"\"/\"s\", not what its path says"
    );
    assert!(
        refused(
            &here,
            secret(Some("team-a"), "s", "rbac.authorization.k8s.io/v1")
        )
        .contains("is not in the group of resource secrets"),
    );
    assert_eq!(
        refused(
            &path("resources/namespaces/cluster/s.json"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "s", "namespace": "x"}})
        ),
        "object is \"x\"/\"s\", not what its path says"
    );
    assert_eq!(
        refused(
            &path("resources/secrets/v2-preferredversion/namespaces/team-a/s.json"),
            secret(Some("team-a"), "s", "v1")
        ),
        "object has version \"v1\", its directory says \"v2\""
    );
}

#[test]
fn verify_reports_copies_that_contradict_their_path() {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let good = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"}}"#;
    let moved = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"b"}}"#;
    for (path, data) in [
        ("metadata/version", "1.1.0\n"),
        ("resources/pods/namespaces/a/p.json", good),
        (
            "resources/pods/v1-preferredversion/namespaces/a/p.json",
            good,
        ),
        ("resources/pods/v2/namespaces/a/p.json", moved),
    ] {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data.as_bytes())
            .expect("append");
    }
    let gz = b.into_inner().expect("tar").finish().expect("gz");
    let mut seen = Vec::new();
    let report = verify_reader_with(&gz[..], None, &ArchiveLimits::default(), |item| {
        seen.push(item.entry_path.to_owned());
        Ok(())
    })
    .expect("reads");
    assert_eq!(seen.len(), 3, "every item file is visited: {seen:?}");
    assert_eq!(
        report.problems,
        vec![
            "resources/pods/v2/namespaces/a/p.json: object is \"b\"/\"p\", not what its path says"
                .to_string()
        ]
    );
}

/// Copies another writer put apart from each other are paired all the same.
#[test]
fn verify_pairs_copies_written_apart() {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let pod = |name: &str, extra: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"a"{extra}}}}}"#
        )
    };
    let entries = [
        ("metadata/version", "1.1.0\n".to_string()),
        ("resources/pods/namespaces/a/a.json", pod("a", "")),
        ("resources/pods/namespaces/a/b.json", pod("b", "")),
        ("resources/pods/namespaces/a/c.json", pod("c", "")),
        (
            "resources/pods/v1-preferredversion/namespaces/a/a.json",
            pod("a", ""),
        ),
        (
            "resources/pods/v1-preferredversion/namespaces/a/b.json",
            pod("b", r#","uid":"x""#),
        ),
        (
            "resources/pods/v1-preferredversion/namespaces/a/d.json",
            pod("d", ""),
        ),
        // Adjacent, preferred first.
        (
            "resources/pods/v1-preferredversion/namespaces/a/e.json",
            pod("e", ""),
        ),
        (
            "resources/pods/namespaces/a/e.json",
            pod("e", r#","uid":"y""#),
        ),
    ];
    for (path, data) in &entries {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data.as_bytes())
            .expect("append");
    }
    let gz = b.into_inner().expect("tar").finish().expect("gz");
    let report = verify_reader(&gz[..], None, &ArchiveLimits::default()).expect("reads");
    assert_eq!(
        report.problems,
        [
            "resources/pods/namespaces/a/b.json differs from its preferred-version copy",
            "resources/pods/namespaces/a/e.json differs from its preferred-version copy",
            "resources/pods/namespaces/a/d.json has a preferred-version copy but no unversioned file",
        ]
    );
    assert_eq!(
        report.notes,
        [
            "resources/pods/namespaces/a/c.json has no preferred-version copy (archives before Velero 1.4 have none)"
        ]
    );
    assert_eq!(report.items, 4);
}

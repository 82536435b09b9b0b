//! Golden, compatibility, hostile-archive and property tests of the archive format.

use std::io::{Read, Write};

use chrono::{TimeZone, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::velero::manifest::Manifest;
use crate::velero::resource::GroupResource;

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
    w.finish().expect("finishes")
}

/// (path, entry type, mode, mtime, contents) of every raw tar entry.
fn raw_entries(gz: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, Vec<u8>)> {
    let mut a = tar::Archive::new(GzDecoder::new(gz));
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
            ArchiveError::Manifest(crate::velero::manifest::ManifestError::ItemAlreadyExists(_))
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
        let item = crate::velero::manifest::item_from_object(&g, &o).expect("valid");
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

// ---- hostile archives ----

enum Raw<'a> {
    File {
        path: &'a [u8],
        data: &'a [u8],
    },
    Typed {
        path: &'a [u8],
        kind: tar::EntryType,
        link: &'a [u8],
        declared: u64,
    },
    Pax {
        records: Vec<(&'a str, &'a [u8])>,
    },
    LongName(&'a [u8]),
}

/// Writes tar headers byte by byte, bypassing the `tar` crate's own path checks.
fn hostile(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let header = |path: &[u8], kind, size: u64, link: &[u8]| {
        let mut h = tar::Header::new_gnu();
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path);
        let l = &mut h.as_old_mut().linkname;
        l[..link.len()].copy_from_slice(link);
        h.set_entry_type(kind);
        h.set_mode(0o755);
        h.set_size(size);
        h.set_cksum();
        h
    };
    for e in entries {
        match e {
            Raw::File { path, data } => b
                .append(
                    &header(path, tar::EntryType::Regular, data.len() as u64, b""),
                    *data,
                )
                .expect("append"),
            Raw::Typed {
                path,
                kind,
                link,
                declared,
            } => b
                .append(&header(path, *kind, *declared, link), &[][..])
                .expect("append"),
            Raw::Pax { records } => b
                .append_pax_extensions(records.iter().map(|(k, v)| (*k, *v)))
                .expect("pax"),
            Raw::LongName(name) => {
                let mut data = name.to_vec();
                data.push(0);
                b.append(
                    &header(
                        b"././@LongLink",
                        tar::EntryType::GNULongName,
                        data.len() as u64,
                        b"",
                    ),
                    &data[..],
                )
                .expect("append")
            }
        }
    }
    b.into_inner().expect("tar").finish().expect("gzip")
}

fn read_err(gz: &[u8], limits: &ArchiveLimits) -> ArchiveError {
    read_archive(gz, limits, |_| Ok(())).expect_err("hostile archive must be refused")
}

const OK: Raw<'static> = Raw::File {
    path: b"metadata/version",
    data: b"1.1.0\n",
};

#[test]
fn path_traversal_is_refused() {
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/../../evil.json",
            data: b"{}",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
    let gz = hostile(&[
        Raw::Pax {
            records: vec![("path", b"../evil")],
        },
        Raw::File {
            path: b"innocent",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
    let long = format!("{}/../../../evil", "a".repeat(150));
    let gz = hostile(&[
        Raw::LongName(long.as_bytes()),
        Raw::File {
            path: b"innocent",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::PathTraversal { .. }
    ));
}

#[test]
fn absolute_paths_are_refused() {
    let gz = hostile(&[Raw::File {
        path: b"/etc/evil",
        data: b"x",
    }]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::AbsolutePath { .. }
    ));
}

#[test]
fn links_and_devices_are_refused() {
    for (kind, name) in [
        (tar::EntryType::Symlink, "symlink"),
        (tar::EntryType::Link, "hard link"),
        (tar::EntryType::Char, "character device"),
        (tar::EntryType::Block, "block device"),
        (tar::EntryType::Fifo, "FIFO"),
    ] {
        let gz = hostile(&[
            OK,
            Raw::Typed {
                path: b"resources/pods/cluster/x.json",
                kind,
                link: b"/etc/passwd",
                declared: 0,
            },
        ]);
        match read_err(&gz, &ArchiveLimits::default()) {
            ArchiveError::UnsupportedEntryType { kind, .. } => assert_eq!(kind, name),
            other => panic!("{name}: {other}"),
        }
    }
}

#[test]
fn an_entry_claiming_10_gib_is_refused_without_reading() {
    let gz = hostile(&[
        OK,
        Raw::Typed {
            path: b"resources/pods/cluster/x.json",
            kind: tar::EntryType::Regular,
            link: b"",
            declared: 10 << 30,
        },
    ]);
    assert!(gz.len() < 4096);
    match read_err(&gz, &ArchiveLimits::default()) {
        ArchiveError::EntryTooLarge { size, limit, .. } => {
            assert_eq!(size, 10 << 30);
            assert_eq!(limit, ArchiveLimits::default().max_entry_bytes);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_gzip_bomb_stops_at_the_total_limit() {
    // 8 MiB of zeros in 2 MiB entries compresses to a few KiB.
    let zeros = vec![0u8; 2 << 20];
    let files: Vec<Raw<'_>> = (0..4)
        .map(|i| Raw::File {
            path: [b"bomb-".as_slice(), &[b'0' + i]].concat().leak(),
            data: &zeros,
        })
        .collect();
    let gz = hostile(&files);
    assert!(gz.len() < 64 << 10, "bomb is {} bytes on disk", gz.len());
    let limits = ArchiveLimits {
        max_total_bytes: 4 << 20,
        ..ArchiveLimits::default()
    };
    assert!(
        matches!(read_err(&gz, &limits), ArchiveError::TotalSizeExceeded { limit } if limit == 4 << 20)
    );
    // Within the limit the same archive reads fine.
    let roomy = ArchiveLimits {
        max_total_bytes: 16 << 20,
        ..ArchiveLimits::default()
    };
    assert!(read_archive(&gz[..], &roomy, |_| Ok(())).is_ok());
}

#[test]
fn too_many_entries_and_duplicates_are_refused() {
    let files: Vec<Raw<'_>> = (0..5)
        .map(|i| Raw::File {
            path: format!("f{i}").leak().as_bytes(),
            data: b"x",
        })
        .collect();
    let limits = ArchiveLimits {
        max_entries: 3,
        ..ArchiveLimits::default()
    };
    assert!(matches!(
        read_err(&hostile(&files), &limits),
        ArchiveError::TooManyEntries { limit: 3 }
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"./metadata/version",
            data: b"1.1.0\n",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::DuplicateEntry { .. }
    ));
}

#[test]
fn garbage_and_bad_items_are_refused() {
    assert!(matches!(
        read_err(b"not gzip at all", &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&[0x55; 1024]).expect("write");
    assert!(matches!(
        read_err(&gz.finish().expect("gz"), &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/pods/cluster/x.json",
            data: b"[1]",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::InvalidItem { .. }
    ));
    let gz = hostile(&[
        OK,
        Raw::File {
            path: b"resources/pods/cluster/x.json",
            data: b"{",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::InvalidItem { .. }
    ));
    let gz = hostile(&[
        Raw::Pax {
            records: vec![("size", b"99")],
        },
        Raw::File {
            path: b"a",
            data: b"x",
        },
    ]);
    assert!(matches!(
        read_err(&gz, &ArchiveLimits::default()),
        ArchiveError::Corrupt(_)
    ));
}

#[test]
fn extraction_never_writes_outside_the_target() {
    let cases: Vec<Vec<u8>> = vec![
        hostile(&[
            OK,
            Raw::File {
                path: b"../evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::File {
                path: b"a/../../evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::File {
                path: b"/tmp/evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::Typed {
                path: b"link",
                kind: tar::EntryType::Symlink,
                link: b"..",
                declared: 0,
            },
            Raw::File {
                path: b"link/evil",
                data: b"x",
            },
        ]),
        hostile(&[
            OK,
            Raw::Typed {
                path: b"hard",
                kind: tar::EntryType::Link,
                link: b"../evil",
                declared: 0,
            },
        ]),
    ];
    for gz in cases {
        let root = tempfile::tempdir().expect("tempdir");
        let dest = root.path().join("dest");
        std::fs::create_dir(&dest).expect("mkdir");
        assert!(extract_archive(&gz[..], &dest, &ArchiveLimits::default()).is_err());
        let outside: Vec<_> = std::fs::read_dir(root.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            outside,
            ["dest"],
            "nothing besides the target in its parent"
        );
        let inside: Vec<_> = std::fs::read_dir(&dest)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(
            inside,
            ["metadata"],
            "only the safe entry before the hostile one"
        );
    }
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn write_then_read_round_trips(specs in specs()) {
        let objs = objects(&specs);
        let mut w = ArchiveWriter::new(Vec::new(), Utc.timestamp_opt(MTIME, 0).unwrap()).expect("starts");
        for (g, o) in &objs {
            w.add_item(g, "v1", o).expect("adds");
        }
        let (gz, written) = w.finish().expect("finishes");
        let parsed = parse_archive(&gz[..], &ArchiveLimits::default()).expect("parses");
        prop_assert_eq!(parsed.unversioned().count(), objs.len());
        for (g, o) in &objs {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            let name = o["metadata"]["name"].as_str().expect("name");
            prop_assert_eq!(parsed.get(g, &Scope::from_namespace(ns), name), Some(o));
        }
        let rebuilt = Manifest::from_archive(&gz[..], &ArchiveLimits::default()).expect("manifest");
        prop_assert_eq!(&rebuilt, &written);
        let stored = Manifest::read_gz(&written.to_gz_bytes()[..], 1 << 30).expect("stored manifest");
        prop_assert_eq!(&stored, &written);
    }
}

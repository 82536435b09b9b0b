//! Seed corpus of the fuzz targets in `fuzz/`, written at run time by our own writers so
//! no binary blobs live in the repository. `scripts/fuzz.sh` runs the ignored test below
//! with `GRANARY_FUZZ_CORPUS` set; the seeds are small valid inputs (and a few refused
//! ones reaching the PAX, long-name and link branches) for the mutator to start from.
//!
//! Framing (see `fuzz/src/lib.rs`): the first byte is even for a gzip stream fed as is,
//! odd for plain contents the target compresses itself. Every seed is written both ways.

use std::io::{Read, Write};
use std::path::Path;

use chrono::{TimeZone, Utc};
use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use super::archive::ArchiveWriter;
use super::files::{ResourceList, Results};
use super::manifest::Manifest;
use super::resource::GroupResource;

fn object(api_version: &str, kind: &str, ns: &str, name: &str, uid: &str, owner: &str) -> Value {
    let mut meta = json!({"name": name, "uid": uid, "labels": {"app": "web"}});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    if !owner.is_empty() {
        meta["ownerReferences"] =
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": owner}]);
    }
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"n": 1.5, "s": "<&>"}})
}

fn gr(s: &str) -> GroupResource {
    GroupResource::parse(s).expect("valid group resource")
}

/// A small backup in our writer's format, with its manifest.
fn written_backup(long_names: bool) -> (Vec<u8>, Manifest) {
    let now = Utc
        .timestamp_opt(1_767_225_600, 0)
        .single()
        .expect("valid time");
    let mut w = ArchiveWriter::new(Vec::new(), now).expect("starts");
    let pod = if long_names { &"p".repeat(120) } else { "p" };
    for (g, preferred, o) in [
        (
            "namespaces",
            "v1",
            object("v1", "Namespace", "", "ns1", "u1", ""),
        ),
        ("pods", "v1", object("v1", "Pod", "ns1", pod, "u2", "u3")),
        (
            "replicasets.apps",
            "v1",
            object("apps/v1", "ReplicaSet", "ns1", "rs", "u3", ""),
        ),
        (
            "horizontalpodautoscalers.autoscaling",
            "v2",
            object(
                "autoscaling/v1",
                "HorizontalPodAutoscaler",
                "ns1",
                "h",
                "u4",
                "",
            ),
        ),
    ] {
        w.add_item(&gr(g), preferred, &o).expect("adds");
    }
    w.finish_with_manifest().expect("finishes")
}

/// A tarball with tar features our writer never emits: a PAX path, a directory, and a
/// symlink (refused), so the mutator starts next to those branches.
fn tar_with_extensions() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o755);
    h.set_size(6);
    b.append_data(&mut h, "metadata/version", &b"1.1.0\n"[..])
        .expect("append");
    let mut d = tar::Header::new_ustar();
    d.set_entry_type(tar::EntryType::Directory);
    d.set_mode(0o755);
    d.set_size(0);
    b.append_data(&mut d, "resources/", &[][..])
        .expect("append");
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n"}}"#;
    b.append_pax_extensions([("path", &b"resources/configmaps/namespaces/n/c.json"[..])])
        .expect("pax");
    let mut f = tar::Header::new_ustar();
    f.set_entry_type(tar::EntryType::Regular);
    f.set_mode(0o755);
    f.set_size(body.len() as u64);
    b.append_data(&mut f, "placeholder", &body[..])
        .expect("append");
    let mut l = tar::Header::new_gnu();
    l.set_entry_type(tar::EntryType::Symlink);
    l.set_size(0);
    b.append_link(&mut l, "resources/link", "../../etc")
        .expect("link");
    b.into_inner().expect("tar")
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(data).expect("writing into a Vec cannot fail");
    gz.finish().expect("finishing into a Vec cannot fail")
}

fn gunzip(gz: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    MultiGzDecoder::new(gz)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

/// Writes `name` twice under `dir`: gzip framing (even first byte) and plain (odd).
fn write_seed(dir: &Path, name: &str, gz: &[u8], plain: &[u8]) {
    for (suffix, mode, body) in [("gz", 0u8, gz), ("plain", 1u8, plain)] {
        let mut bytes = vec![mode];
        bytes.extend_from_slice(body);
        std::fs::write(dir.join(format!("{name}.{suffix}")), bytes).expect("write seed");
    }
}

#[test]
#[ignore = "maintenance: writes the fuzz seed corpus into $GRANARY_FUZZ_CORPUS (scripts/fuzz.sh)"]
fn write_fuzz_seed_corpus() {
    let root = std::env::var_os("GRANARY_FUZZ_CORPUS").expect("GRANARY_FUZZ_CORPUS is set");
    let root = Path::new(&root);
    let archives = root.join("archive_reader");
    let small = root.join("manifest_reader");
    std::fs::create_dir_all(&archives).expect("mkdir");
    std::fs::create_dir_all(&small).expect("mkdir");

    let (gz, manifest) = written_backup(false);
    write_seed(&archives, "backup", &gz, &gunzip(&gz));
    let (gz_long, _) = written_backup(true);
    write_seed(&archives, "long-names", &gz_long, &gunzip(&gz_long));
    let tar = tar_with_extensions();
    write_seed(&archives, "extensions", &gzip(&tar), &tar);

    let m = manifest.to_gz_bytes();
    write_seed(&small, "manifest", &m, &gunzip(&m));
    let list = ResourceList::from_manifest(&manifest).to_gz_bytes();
    write_seed(&small, "resource-list", &list, &gunzip(&list));
    let mut results = Results::default();
    results.errors.add_velero("bucket unreachable");
    results.warnings.add("ns1", "pod skipped");
    results.warnings.add("", "pv skipped");
    let r = results.to_gz_bytes();
    write_seed(&small, "results", &r, &gunzip(&r));
}

//! The `granary` binary's offline commands, run as a user runs them.

use granary_velero::archive::ArchiveWriter;
use granary_velero::resource::GroupResource;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::process::{Command, Output};

fn granary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_granary"))
        .args(args)
        .output()
        .expect("the granary binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn crds_prints_every_crd_and_splits_by_side() {
    let all = granary(&["crds"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let crds: Vec<CustomResourceDefinition> =
        serde_saphyr::from_multiple(&stdout(&all)).expect("valid CRD YAML");
    assert_eq!(crds.len(), granary_api::crds::crds(None).len());
    let names: Vec<String> = crds
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    for expected in [
        "backupbuckets.core.gardener.cloud",
        "backupentries.extensions.gardener.cloud",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }

    let garden = granary(&["crds", "--side", "garden"]);
    let garden: Vec<CustomResourceDefinition> =
        serde_saphyr::from_multiple(&stdout(&garden)).expect("valid CRD YAML");
    assert!(!garden.is_empty() && garden.iter().all(|c| c.spec.group == "core.gardener.cloud"));

    let bad = granary(&["crds", "--side", "moon"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--side"), "{}", stderr(&bad));
}

#[test]
fn crds_write_produces_the_checked_in_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = granary(&["crds", "--write", dir.path().to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    for side in ["garden", "seed"] {
        for entry in std::fs::read_dir(dir.path().join(side).join("crds")).expect("written") {
            let path = entry.expect("entry").path();
            let name = path.file_name().expect("named");
            let checked_in = std::fs::read_to_string(repo.join(side).join("crds").join(name))
                .expect("checked in");
            assert_eq!(
                std::fs::read_to_string(&path).expect("readable"),
                checked_in
            );
        }
    }
}

fn write_backup(path: &std::path::Path) -> granary_velero::manifest::Manifest {
    let file = std::fs::File::create(path).expect("create tarball");
    let mut writer = ArchiveWriter::new(file, chrono::Utc::now()).expect("writer");
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team-a", "uid": "u1"},
        "data": {"k": "v"}
    });
    let deploy = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "u2"}
    });
    writer
        .add_item(&GroupResource::new("", "configmaps"), "v1", &cm)
        .expect("add configmap");
    writer
        .add_item(&GroupResource::new("apps", "deployments"), "v1", &deploy)
        .expect("add deployment");
    writer.finish_with_manifest().expect("finish").1
}

/// A tarball read straight from a `local` bucket (`b.tar.gz%f`) is compared with the
/// `manifest.json.gz%f` beside it, not rebuilt.
#[test]
fn archive_inspect_finds_the_manifest_of_a_local_store_tarball() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("b1.tar.gz%f");
    let manifest = write_backup(&path);
    let p = path.to_str().expect("utf-8 path");
    let source = || {
        let out = granary(&["archive", "inspect", p, "-o", "json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
        json["manifest"]["source"].clone()
    };
    assert_eq!(source(), "rebuiltFromTarball");
    std::fs::write(
        dir.path().join("manifest.json.gz%f"),
        manifest.to_gz_bytes(),
    )
    .expect("manifest");
    assert_eq!(source(), "stored");
}

#[test]
fn archive_inspect_and_verify_a_good_backup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("b1.tar.gz");
    write_backup(&path);
    let p = path.to_str().expect("utf-8 path");

    let verify = granary(&["archive", "verify", p]);
    assert!(
        verify.status.success(),
        "{}{}",
        stdout(&verify),
        stderr(&verify)
    );

    let inspect = granary(&["archive", "inspect", p, "-o", "json"]);
    assert!(inspect.status.success(), "{}", stderr(&inspect));
    let json: serde_json::Value = serde_json::from_str(&stdout(&inspect)).expect("JSON output");
    assert_eq!(json["items"], 2);
    assert_eq!(
        json["format_version"]
            .as_str()
            .or(json["formatVersion"].as_str()),
        Some("1.1.0")
    );

    let text = granary(&["archive", "inspect", p]);
    assert!(text.status.success());
    assert!(
        stdout(&text).contains("deployments.apps"),
        "{}",
        stdout(&text)
    );
}

#[test]
fn archive_verify_refuses_a_hostile_archive_with_the_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("evil.tar.gz");
    {
        let file = std::fs::File::create(&path).expect("create");
        let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        let body = b"1.1.0\n";
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Regular);
        // Write the escaping name straight into the header: tar's set_path refuses `..`.
        let name = b"../../etc/evil.json";
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        tar.append(&header, &body[..]).expect("append");
        tar.into_inner().expect("tar").finish().expect("gzip");
    }
    let out = granary(&["archive", "verify", path.to_str().expect("utf-8 path")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("escapes"), "{}", stderr(&out));

    let missing = granary(&["archive", "inspect", "/nonexistent/b.tar.gz"]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("/nonexistent/b.tar.gz"));
}

#[test]
fn archive_verify_refuses_an_archive_past_max_memory_and_names_the_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("many.tar.gz");
    {
        let file = std::fs::File::create(&path).expect("create");
        let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        let tail = "p".repeat(2000);
        for i in 0..500 {
            let mut header = tar::Header::new_gnu();
            header.set_size(1);
            header.set_mode(0o755);
            tar.append_data(&mut header, format!("junk/{i}/{tail}"), &b"x"[..])
                .expect("append");
        }
        tar.into_inner().expect("tar").finish().expect("gzip");
    }
    let p = path.to_str().expect("utf-8 path");
    let out = granary(&["archive", "verify", p, "--max-memory", "16384"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("more than 16384 bytes in memory") && err.contains("--max-memory"),
        "{err}"
    );
    let roomy = granary(&["archive", "inspect", p, "--max-memory", "16777216"]);
    assert!(roomy.status.success(), "{}", stderr(&roomy));
}

#[test]
fn bad_global_flags_are_named() {
    let out = granary(&["--log-level", "granary=loud", "crds"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--log-level"), "{}", stderr(&out));
}

/// `granary crds | head -1`: the reader goes away after one line; granary ends quietly
/// (exit 0, no panic), as any Unix tool does.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_granary"))
        .arg("crds")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the granary binary runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("one line");
    // The reader (and with it the pipe) is dropped here.
    let out = child.wait_with_output().expect("granary ends");
    assert!(!first.is_empty());
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

/// Errors are said once, in words: a missing configuration file is not reported as
/// "…: No such file or directory: No such file or directory" (#20).
#[test]
fn an_error_and_its_cause_are_said_once() {
    let out = granary(&[
        "server",
        "--config",
        "/nope-granary.yaml",
        "--kubeconfig",
        "/nope-kubeconfig",
    ]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert_eq!(
        said.matches("No such file or directory").count(),
        1,
        "{said}"
    );
    assert!(said.contains("/nope-granary.yaml"), "{said}");
}

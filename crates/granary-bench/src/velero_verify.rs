//! Benchmark of proving a backup (docs/formats.md#integrity-record): a backup of N items
//! of ~3 KiB of hard-to-compress data (`--size`, default 50,000) written to the local store as the backup runner
//! writes it (tarball, manifest, resource list, results, `velero-backup.json`, the
//! signed record), then
//! - signing (hashing every file, the HMAC) and verifying (every stored object hashed
//!   against the record), each against writing the tarball, the bulk of a backup's own
//!   work (goal: at most 10% of it);
//! - `granary backup verify --deep`: every object hashed against the record, then the
//!   tarball read item by item against the manifest and resource list, in MB/s of
//!   tarball (goal: at least 100), side by side with `sha256sum` of the same files.

use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use chrono::{TimeZone, Utc};
use granary_api::velero::{Backup, BackupSpec};
use granary_velero::archive::ArchiveWriter;
use granary_velero::files::encode_backup_json;
use granary_velero::integrity::{IntegrityRecord, Keyring, ObjectDigest, RecordKind};
use granary_velero::resource::GroupResource;
use serde_json::{Value, json};

use super::support::{Scratch, local_bench_store};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

/// The goal on signing's share of the time the tarball takes to write.
const GOAL_SIGN_SHARE: f64 = 0.10;
/// The goal on `backup verify --deep`, MB/s of tarball.
const GOAL_VERIFY_MBPS: f64 = 100.0;

/// Bytes of payload per item, as hex of pseudo-random bytes: Secrets' and ConfigMaps'
/// data mostly compresses little, and MB/s of tarball should mean real bytes.
const PAYLOAD_BYTES: usize = 3072;

fn object(i: usize) -> Value {
    // xorshift64*, seeded per item: the same tarball on every run.
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut payload = String::with_capacity(PAYLOAD_BYTES);
    while payload.len() < PAYLOAD_BYTES {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        payload.push_str(&format!("{:016x}", x.wrapping_mul(0x2545_f491_4f6c_dd1d)));
    }
    payload.truncate(PAYLOAD_BYTES);
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i:07}"),
            "namespace": format!("ns-{:03}", i % 100),
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
        },
        "data": {"payload": payload},
    })
}

/// Every regular file under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub(crate) async fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let items = opts.size.unwrap_or(50_000);
    let dir = Scratch::new("velero-verify").context("scratch directory")?;
    let tar_path = dir.path().join("bench.tar.gz");
    let cms = GroupResource::new("", "configmaps");

    // The tarball, timed as the part of a backup signing is compared with.
    let start = Instant::now();
    let file = BufWriter::new(std::fs::File::create(&tar_path).context("create tarball")?);
    let mut w = ArchiveWriter::new(file, Utc.timestamp_opt(0, 0).single().context("epoch")?)
        .context("start archive")?;
    for i in 0..items {
        w.add_item(&cms, "v1", &object(i)).context("add item")?;
    }
    let (_, mut manifest) = w.finish().context("finish archive")?;
    let write_secs = start.elapsed().as_secs_f64();
    let tarball = std::fs::read(&tar_path).context("read tarball")?;

    let mut backup = Backup::new("bench", BackupSpec::default());
    backup.metadata.namespace = Some("velero".into());
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("bench.tar.gz", tarball.clone()),
        ("manifest.json.gz", manifest.write_gz(Vec::new())?),
        (
            "bench-resource-list.json.gz",
            manifest.write_resource_list_gz(Vec::new())?,
        ),
        (
            "bench-results.gz",
            granary_velero::files::Results::default().to_gz_bytes(),
        ),
        ("velero-backup.json", encode_backup_json(&backup)),
    ];
    let keyring = Keyring::default()
        .with_new_key(vec![7; 32])
        .context("a key")?
        .0;

    // Signing: every file hashed, the record signed.
    let start = Instant::now();
    let digests: BTreeMap<String, ObjectDigest> = files
        .iter()
        .map(|(n, d)| ((*n).to_owned(), ObjectDigest::of(d)))
        .collect();
    let record = IntegrityRecord::sign(RecordKind::Backup, "bench", None, digests, &keyring)
        .context("sign")?;
    let sign_secs = start.elapsed().as_secs_f64();

    let store_root = dir.path().join("store");
    let (store, layout) = local_bench_store(&store_root).await?;
    let keys = layout.backup("bench").context("keys")?;
    for (name, data) in &files {
        store
            .put(
                layout.bucket(),
                &format!("{}{name}", keys.dir()),
                Bytes::from(data.clone()),
            )
            .await
            .context("put")?;
    }
    store
        .put(
            layout.bucket(),
            &keys.integrity(),
            Bytes::from(record.to_bytes()),
        )
        .await
        .context("put record")?;

    // `backup verify`: the record and every object hashed.
    let start = Instant::now();
    let checked = granary_velero_server::integrity::check_backup(
        store.as_ref(),
        &layout,
        "bench",
        &keyring,
        None,
        granary_velero_server::integrity::Hash::AllBut(&[]),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    anyhow::ensure!(checked.verdict.is_verified(), "{}", checked.verdict);
    let check_secs = start.elapsed().as_secs_f64();

    // `backup verify --deep`: the same, reading the tarball once for both checks.
    let start = Instant::now();
    let deep = granary_velero_server::integrity::deep_check_backup(
        store.as_ref(),
        &layout,
        "bench",
        &keyring,
        None,
    )
    .await
    .map_err(anyhow::Error::msg)?;
    anyhow::ensure!(deep.verdict.is_verified(), "{}", deep.verdict);
    anyhow::ensure!(deep.problems.is_empty(), "deep check: {:?}", deep.problems);
    let verify_secs = start.elapsed().as_secs_f64();
    let mb = tarball.len() as f64 / 1e6;
    let verify_mbps = mb / verify_secs;

    // The peer: sha256sum of the same files, as stored.
    let stored = files_under(&store_root);
    let start = Instant::now();
    let peer = Command::new("sha256sum").args(&stored).output();
    let peer_secs = start.elapsed().as_secs_f64();
    let (peer_row, peer_json) = match peer {
        Ok(o) if o.status.success() => (
            Peer::Measured(peer_secs),
            json!({"seconds": peer_secs, "files": stored.len()}),
        ),
        Ok(o) => {
            let e = String::from_utf8_lossy(&o.stderr).into_owned();
            (Peer::Failed(e.clone()), json!({"failed": e}))
        }
        Err(e) => (Peer::NotInstalled, json!({"skipped": e.to_string()})),
    };
    let rows = vec![
        Row::versus(
            format!("signing a backup of {items} items: time"),
            Unit::Seconds,
            sign_secs,
            "writing its tarball",
            Peer::Measured(write_secs),
        )
        .goal(GOAL_SIGN_SHARE),
        Row::versus(
            "verifying it (every object hashed): time",
            Unit::Seconds,
            check_secs,
            "writing its tarball",
            Peer::Measured(write_secs),
        )
        .goal(GOAL_SIGN_SHARE),
        Row::versus(
            format!("backup verify --deep, {mb:.0} MB tarball: time"),
            Unit::Seconds,
            verify_secs,
            "sha256sum of its files",
            peer_row,
        ),
        Row::alone(
            format!("backup verify --deep: MB/s of tarball (goal ≥ {GOAL_VERIFY_MBPS:.0})"),
            Unit::PerSecond,
            verify_mbps,
        ),
    ];
    Ok(Outcome {
        title: format!(
            "signing and verifying a backup of {items} items on the local store, side by side with sha256sum"
        ),
        sizes: json!({"items": items}),
        rows,
        details: json!({
            "tarball_bytes": tarball.len(),
            "write_seconds": write_secs,
            "sign_seconds": sign_secs,
            "sign_share_of_write": sign_secs / write_secs,
            "verify_seconds": check_secs,
            "verify_share_of_write": check_secs / write_secs,
            "verify_deep_seconds": verify_secs,
            "verify_deep_mb_per_second": verify_mbps,
            "sha256sum": peer_json,
            "goal": {"sign_share_max": GOAL_SIGN_SHARE, "verify_mb_per_second_min": GOAL_VERIFY_MBPS,
                     "sign_met": sign_secs / write_secs <= GOAL_SIGN_SHARE,
                     "verify_met": verify_mbps >= GOAL_VERIFY_MBPS},
        }),
    })
}

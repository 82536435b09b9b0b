//! The object-store benchmarks on the S3 emulator (moto, from scripts/emulators.sh),
//! every client behind one [`CountingProxy`]:
//!
//! - `delete`: deleting an N-object prefix with Granary's provider (`delete_prefix`, what
//!   the seed does when an entry goes), `rclone purge` and `aws s3 rm --recursive`, the
//!   prefix seeded identically before each; the requests each sent, against the minimal
//!   count (list pages of 1,000 keys + DeleteObjects of 1,000 keys).
//! - `copy`: copying N objects bucket → bucket the way a migration copies them (list the
//!   source, a manifest, server-side copies with the migration's default parallelism of
//!   16, the manifest saved as it goes), against `rclone copy` (server-side, the same
//!   parallelism) and `aws s3 cp --recursive`; object bytes through each client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary_providers::{ListEntry, ObjectStore, SecretData, StoreOptions};
use serde_json::{Value, json};

use super::peers;
use super::proxy::CountingProxy;
use super::s3ops::{S3Op, Tally, minimal_delete_requests};
use super::support::Scratch;
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};
use granary_migrate::copy::Endpoints;
use granary_migrate::manifest::{Location, MANIFEST_VERSION, Manifest};
use granary_migrate::plan::{CopyMode, StoreIdentity, copy_mode, source_objects};
use granary_migrate::{CopyCounters, Output};

/// Bytes of each seeded object.
const OBJECT_BYTES: usize = 1024;
/// Writes in flight while seeding (not measured).
const SEED_PARALLELISM: usize = 32;
/// The migration's default `--parallelism`.
const COPY_PARALLELISM: usize = 16;
const PREFIX: &str = "data/";

/// The emulator's endpoint: the option, else `GRANARY_TEST_S3_ENDPOINT`.
pub(super) fn endpoint(name: &str, opts: &BenchOptions) -> anyhow::Result<String> {
    opts.s3_endpoint
        .clone()
        .or_else(|| std::env::var("GRANARY_TEST_S3_ENDPOINT").ok())
        .filter(|e| !e.is_empty())
        .with_context(|| {
            format!(
                "{name}: no S3 emulator: set GRANARY_TEST_S3_ENDPOINT to a moto server \
                 (scripts/bench.sh starts one)"
            )
        })
}

pub(super) fn credentials(endpoint: &str) -> SecretData {
    [
        ("accessKeyID", "test"),
        ("secretAccessKey", "test"),
        ("endpoint", endpoint),
        ("s3ForcePathStyle", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect()
}

async fn open(endpoint: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let store = granary_providers::open(
        "aws",
        Some("us-east-1"),
        &credentials(endpoint),
        &StoreOptions::default(),
    )
    .await
    .context("S3 store for the emulator")?;
    Ok(store)
}

/// The stores and the proxy of one benchmark run.
struct Setup {
    proxy: CountingProxy,
    /// Straight to the emulator: seeding and checking, not measured.
    direct: Arc<dyn ObjectStore>,
    /// Through the proxy: what is measured.
    counted: Arc<dyn ObjectStore>,
    scratch: Scratch,
}

impl Setup {
    async fn new(name: &str, opts: &BenchOptions) -> anyhow::Result<Setup> {
        let endpoint = endpoint(name, opts)?;
        let proxy = CountingProxy::start(&endpoint).await?;
        let direct = open(&endpoint).await?;
        let counted = open(&proxy.url).await?;
        let scratch = Scratch::new(name).context("scratch directory")?;
        Ok(Setup {
            proxy,
            direct,
            counted,
            scratch,
        })
    }

    async fn bucket(&self, what: &str) -> anyhow::Result<String> {
        let name = format!(
            "bench-{what}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        self.direct
            .ensure_bucket(&name, &Default::default())
            .await
            .with_context(|| format!("bucket {name}"))?;
        Ok(name)
    }

    /// Writes objects `0..n` under `prefix`, the same keys and bytes every time.
    async fn seed(&self, bucket: &str, prefix: &str, n: usize) -> anyhow::Result<()> {
        let store = self.direct.as_ref();
        futures::stream::iter(0..n)
            .map(|i| async move {
                let body = Bytes::from(vec![(i % 251) as u8; OBJECT_BYTES]);
                store
                    .put(bucket, &format!("{prefix}obj-{i:06}"), body)
                    .await
            })
            .buffer_unordered(SEED_PARALLELISM)
            .try_collect::<Vec<_>>()
            .await
            .with_context(|| format!("seeding {n} objects in {bucket}/{prefix}"))?;
        Ok(())
    }

    /// Objects under `prefix`, Granary's `.granary/` bookkeeping left out.
    async fn count(&self, bucket: &str, prefix: &str) -> anyhow::Result<usize> {
        let listing: Vec<ListEntry> = self
            .direct
            .list(bucket, prefix, None)
            .try_collect()
            .await
            .with_context(|| format!("listing {bucket}/{prefix}"))?;
        Ok(listing
            .iter()
            .filter(|e| matches!(e, ListEntry::Object(m) if !m.key.contains(".granary/")))
            .count())
    }

    async fn drop_bucket(&self, bucket: &str) {
        if let Err(e) = self.direct.delete_bucket(bucket, true).await {
            tracing::warn!("benchmark bucket {bucket} left behind: {e}");
        }
    }
}

/// One client's run: its time (or why none) and what went through the proxy.
struct Run {
    peer: Peer,
    tally: Tally,
}

impl Run {
    fn json(&self) -> Value {
        json!({
            "status": match &self.peer { Peer::Measured(_) => "measured", Peer::NotInstalled => "not installed", _ => "failed" },
            "seconds": self.peer.figure(),
            "error": match &self.peer { Peer::Failed(e) => Some(e.clone()), _ => None },
            "requests": self.tally.requests,
            "by_operation": self.tally.by_operation,
            "object_data_bytes": self.tally.object_data_bytes,
            "bookkeeping_bytes": self.tally.bookkeeping_bytes,
        })
    }

    /// The request count as a peer figure (only for a measured run).
    fn requests(&self) -> Peer {
        match &self.peer {
            Peer::Measured(_) => Peer::Measured(self.tally.requests as f64),
            other => other.clone(),
        }
    }

    fn bytes(&self) -> Peer {
        match &self.peer {
            Peer::Measured(_) => Peer::Measured(self.tally.object_data_bytes as f64),
            other => other.clone(),
        }
    }
}

/// Checks a peer's work: a run that left the wrong count is a failure, not a figure.
async fn verified(
    setup: &Setup,
    mut run: Run,
    bucket: &str,
    prefix: &str,
    expect: usize,
) -> anyhow::Result<Run> {
    if let Peer::Measured(_) = run.peer {
        let found = setup.count(bucket, prefix).await?;
        if found != expect {
            run.peer = Peer::Failed(format!(
                "{found} objects under {bucket}/{prefix} afterwards, expected {expect}"
            ));
        }
    }
    Ok(run)
}

/// The faster of measured peers: (name, seconds).
fn fastest<'a>(peers: &[(&'a str, &Run)]) -> Option<(&'a str, f64)> {
    peers
        .iter()
        .filter_map(|(n, r)| Some((*n, r.peer.figure()?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

pub(crate) async fn delete(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let n = opts.size.unwrap_or(10_000);
    let setup = Setup::new("delete", opts).await?;
    let bucket = setup.bucket("delete").await?;

    // Granary: the provider's prefix delete, as the seed runs it.
    setup.seed(&bucket, PREFIX, n).await?;
    setup.proxy.take();
    let start = Instant::now();
    let report = setup
        .counted
        .delete_prefix(&bucket, PREFIX)
        .await
        .context("Granary's delete_prefix")?;
    let secs = start.elapsed().as_secs_f64();
    let granary = Run {
        peer: Peer::Measured(secs),
        tally: setup.proxy.take(),
    };
    let left = setup.count(&bucket, PREFIX).await?;
    if left != 0 {
        bail!("Granary's delete_prefix left {left} of {n} objects");
    }

    let rclone = match peers::rclone() {
        None => Run {
            peer: Peer::NotInstalled,
            tally: Tally::default(),
        },
        Some(bin) => {
            setup.seed(&bucket, PREFIX, n).await?;
            setup.proxy.take();
            let target = format!("bench:{bucket}/{}", PREFIX.trim_end_matches('/'));
            let peer = peers::timed(peers::rclone_command(
                &bin,
                &setup.proxy.url,
                &["purge", &target],
            ));
            let run = Run {
                peer,
                tally: setup.proxy.take(),
            };
            verified(&setup, run, &bucket, PREFIX, 0).await?
        }
    };
    let aws = match peers::aws() {
        None => Run {
            peer: Peer::NotInstalled,
            tally: Tally::default(),
        },
        Some(bin) => {
            setup.seed(&bucket, PREFIX, n).await?;
            setup.proxy.take();
            let target = format!("s3://{bucket}/{PREFIX}");
            let peer = peers::timed(peers::aws_command(
                &bin,
                &setup.proxy.url,
                setup.scratch.path(),
                &["s3", "rm", &target, "--recursive"],
            ));
            let run = Run {
                peer,
                tally: setup.proxy.take(),
            };
            verified(&setup, run, &bucket, PREFIX, 0).await?
        }
    };

    // The emulator alone: one full list page and one full DeleteObjects, straight to it
    // (no proxy), times the pages a minimal delete needs, done one after the other.
    let page = n.clamp(1, 1000);
    setup.seed(&bucket, PREFIX, page).await?;
    let start = Instant::now();
    let keys: Vec<String> = setup
        .direct
        .list(&bucket, PREFIX, None)
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Object(m) => Some(m.key),
                ListEntry::Prefix(_) => None,
            })
        })
        .try_collect()
        .await
        .context("emulator alone: list")?;
    let list_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    setup
        .direct
        .delete_many(&bucket, &keys)
        .await
        .context("emulator alone: delete")?;
    let delete_secs = start.elapsed().as_secs_f64();
    setup.drop_bucket(&bucket).await;
    let pages = n.div_ceil(1000).max(1) as f64;
    let emulator_floor = pages * (list_secs + delete_secs);

    let minimal = minimal_delete_requests(n as u64);
    let requests = granary.tally.requests as f64;
    let mut rows = vec![
        Row::versus(
            format!("delete {n} objects: time"),
            Unit::Seconds,
            secs,
            "rclone purge",
            rclone.peer.clone(),
        ),
        Row::versus(
            format!("delete {n} objects: time"),
            Unit::Seconds,
            secs,
            "aws s3 rm --recursive",
            aws.peer.clone(),
        ),
    ];
    let faster = fastest(&[("rclone purge", &rclone), ("aws s3 rm --recursive", &aws)]);
    rows.push(
        Row::versus(
            format!("delete {n} objects: time / faster peer"),
            Unit::Seconds,
            secs,
            faster.map(|(name, _)| name).unwrap_or("faster peer"),
            faster.map_or(Peer::NotInstalled, |(_, s)| Peer::Measured(s)),
        )
        .goal(1.0),
    );
    rows.push(
        Row::versus(
            format!("delete {n} objects: requests"),
            Unit::Requests,
            requests,
            "minimal (lists + batches)",
            Peer::Reference(minimal as f64),
        )
        .goal(1.05),
    );
    rows.push(Row::versus(
        format!("delete {n} objects: requests"),
        Unit::Requests,
        requests,
        "rclone purge",
        rclone.requests(),
    ));
    rows.push(Row::versus(
        format!("delete {n} objects: requests"),
        Unit::Requests,
        requests,
        "aws s3 rm --recursive",
        aws.requests(),
    ));
    rows.push(Row::versus(
        format!("delete {n} objects: time / emulator floor"),
        Unit::Seconds,
        secs,
        "moto alone, sequential",
        Peer::Reference(emulator_floor),
    ));
    let details = json!({
        "workload": {"objects": n, "object_bytes": OBJECT_BYTES, "prefix": PREFIX,
                     "emulator": "moto", "through": "counting proxy on 127.0.0.1"},
        "granary": {"deleted": report.deleted, "delete_requests_reported": report.requests},
        "runs": {"granary": granary.json(), "rclone_purge": rclone.json(),
                 "aws_s3_rm_recursive": aws.json()},
        "minimal_requests": minimal,
        "emulator_alone": {"list_page_keys": page, "list_page_seconds": list_secs,
                           "delete_objects_seconds": delete_secs,
                           "sequential_floor_seconds": emulator_floor},
    });
    Ok(Outcome {
        title: format!(
            "delete a {n}-object prefix on moto, every client through one counting proxy"
        ),
        sizes: json!({"objects": n, "object_bytes": OBJECT_BYTES}),
        rows,
        details,
    })
}

/// The migration's copy path: list the source, a manifest, copy pending objects.
async fn granary_copy(
    store: &Arc<dyn ObjectStore>,
    from: &str,
    to: &str,
    to_prefix: &str,
) -> anyhow::Result<CopyCounters> {
    let listing = store
        .list(from, PREFIX, None)
        .try_filter_map(|e| async move {
            Ok(match e {
                ListEntry::Object(m) => Some(m),
                ListEntry::Prefix(_) => None,
            })
        })
        .try_collect()
        .await
        .context("listing the source")?;
    let mut manifest = Manifest {
        version: MANIFEST_VERSION,
        entry: "bench/copy".into(),
        source: Location {
            bucket: from.into(),
            provider: "aws".into(),
            key_prefix: PREFIX.into(),
        },
        destination: Location {
            bucket: to.into(),
            provider: "aws".into(),
            key_prefix: to_prefix.into(),
        },
        created: chrono::Utc::now(),
        copy_passes: 0,
        objects: source_objects(PREFIX, listing),
    };
    // One store and one set of credentials on both sides: server-side, as a migration
    // between two buckets of one provider account decides.
    let identity = StoreIdentity {
        provider: "aws".into(),
        credentials: BTreeMap::new(),
    };
    let mode = copy_mode(&identity, &identity);
    debug_assert_eq!(mode, CopyMode::ServerSide);
    let ends = Endpoints {
        source: store.clone(),
        destination: store.clone(),
        mode,
        compare_etags: true,
    };
    let mut counters = CopyCounters::default();
    ends.copy_pending(
        &mut manifest,
        COPY_PARALLELISM,
        &Output::Silent,
        &mut counters,
    )
    .await
    .context("Granary's copy")?;
    Ok(counters)
}

pub(crate) async fn copy(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let n = opts.size.unwrap_or(10_000);
    let setup = Setup::new("copy", opts).await?;
    let from = setup.bucket("src").await?;
    let to = setup.bucket("dst").await?;
    setup.seed(&from, PREFIX, n).await?;

    setup.proxy.take();
    let start = Instant::now();
    let counters = granary_copy(&setup.counted, &from, &to, "granary/").await?;
    let secs = start.elapsed().as_secs_f64();
    let granary = Run {
        peer: Peer::Measured(secs),
        tally: setup.proxy.take(),
    };
    let copied = setup.count(&to, "granary/").await?;
    if copied != n {
        bail!("Granary's copy left {copied} of {n} objects in the destination");
    }

    let rclone = match peers::rclone() {
        None => Run {
            peer: Peer::NotInstalled,
            tally: Tally::default(),
        },
        Some(bin) => {
            setup.proxy.take();
            let src = format!("bench:{from}/{}", PREFIX.trim_end_matches('/'));
            let dst = format!("bench:{to}/rclone");
            let peer = peers::timed(peers::rclone_copy(
                &bin,
                &setup.proxy.url,
                &src,
                &dst,
                COPY_PARALLELISM,
            ));
            let run = Run {
                peer,
                tally: setup.proxy.take(),
            };
            verified(&setup, run, &to, "rclone/", n).await?
        }
    };
    let aws = match peers::aws() {
        None => Run {
            peer: Peer::NotInstalled,
            tally: Tally::default(),
        },
        Some(bin) => {
            setup.proxy.take();
            let src = format!("s3://{from}/{PREFIX}");
            let dst = format!("s3://{to}/aws/");
            let peer = peers::timed(peers::aws_command(
                &bin,
                &setup.proxy.url,
                setup.scratch.path(),
                &["s3", "cp", &src, &dst, "--recursive"],
            ));
            let run = Run {
                peer,
                tally: setup.proxy.take(),
            };
            verified(&setup, run, &to, "aws/", n).await?
        }
    };
    setup.drop_bucket(&from).await;
    setup.drop_bucket(&to).await;

    let bytes = granary.tally.object_data_bytes;
    let requests = granary.tally.requests as f64;
    let rows = vec![
        Row::versus(
            format!("copy {n} objects: time"),
            Unit::Seconds,
            secs,
            "rclone copy (server-side)",
            rclone.peer.clone(),
        )
        .goal(1.0),
        Row::versus(
            format!("copy {n} objects: time"),
            Unit::Seconds,
            secs,
            "aws s3 cp --recursive",
            aws.peer.clone(),
        ),
        Row::versus(
            format!("copy {n} objects: object bytes via client"),
            Unit::Bytes,
            bytes as f64,
            "rclone copy (server-side)",
            rclone.bytes(),
        ),
        Row::versus(
            format!("copy {n} objects: requests"),
            Unit::Requests,
            requests,
            "rclone copy (server-side)",
            rclone.requests(),
        ),
        Row::versus(
            format!("copy {n} objects: requests"),
            Unit::Requests,
            requests,
            "aws s3 cp --recursive",
            aws.requests(),
        ),
    ];
    let details = json!({
        "workload": {"objects": n, "object_bytes": OBJECT_BYTES, "parallelism": COPY_PARALLELISM,
                     "rclone_transfers_and_checkers": COPY_PARALLELISM,
                     "emulator": "moto", "through": "counting proxy on 127.0.0.1"},
        "granary": {"server_side_copies": counters.server_side_copies,
                    "streamed_copies": counters.streamed_copies,
                    "bytes_through_process_reported": counters.bytes_through_process,
                    "object_bytes_through_proxy": bytes,
                    "manifest_bytes_through_proxy": granary.tally.bookkeeping_bytes,
                    "manifest_writes": granary.tally.count(S3Op::PutObject)},
        "runs": {"granary": granary.json(), "rclone_copy": rclone.json(),
                 "aws_s3_cp_recursive": aws.json()},
        "goal": {"object_bytes_through_granary_max": 0, "bytes_met": bytes == 0},
    });
    Ok(Outcome {
        title: format!(
            "copy {n} objects bucket -> bucket on moto (the migration's copy path), every client through one counting proxy"
        ),
        sizes: json!({"objects": n, "object_bytes": OBJECT_BYTES}),
        rows,
        details,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_faster_peer_is_the_measured_one_with_the_least_time() {
        let a = Run {
            peer: Peer::Measured(2.0),
            tally: Tally::default(),
        };
        let b = Run {
            peer: Peer::Measured(1.0),
            tally: Tally::default(),
        };
        let c = Run {
            peer: Peer::NotInstalled,
            tally: Tally::default(),
        };
        assert_eq!(
            fastest(&[("a", &a), ("b", &b), ("c", &c)]),
            Some(("b", 1.0))
        );
        assert_eq!(fastest(&[("c", &c)]), None);
        assert_eq!(c.requests(), Peer::NotInstalled);
    }
}

//! Benchmark of `granary garden` placement (issues 6, 19), side by side with a bare client
//! in the same run, each side on an embedded API server of its own prepared the same way
//! (the same N shoots; see [`prepared`]):
//!
//! - cold start: N shoots (`--size N`, default 10,000; or `GRANARY_BENCH_SHOOTS`) exist
//!   with quota 100 before the garden starts; Granary's time until all N BackupEntries
//!   exist, against a bare client creating the same N BackupEntries (as the garden makes
//!   them, owned by shoots; 32 at a time) on the same server. Goal: ≤ 1.5×. Also
//!   against a minimal controller (list the shoots, watch the entries, create them),
//!   which tells Granary's own overhead apart from the cost of being a controller.
//! - API writes per entry: every create/update/patch/delete the server recorded during
//!   the cold start (events included), divided by N. Goal: ≤ 1.1.
//! - restart with N placed entries: a new garden's time until ready and until the entry
//!   of one new shoot exists, against a new process that lists the same objects (the N
//!   shoots and their N entries, at once): its start, its client and connections, the
//!   list ([`bare_list_process`]). Goal: ≤ 2×. The same list from this warm process is
//!   in the JSON too (the peer of earlier runs).
//! - steady state: with the N placed and the restarted garden idle, a burst of N new
//!   shoots made 32 at a time; the time from the first shoot create until all their
//!   entries exist, against a bare client making the same shoots and, after each, its
//!   entry, 32 shoots at a time, on a server holding the same N shoots and entries.
//!   Goal: ≤ 1.5×.
//! - the garden's peak RSS during the cold start, with the API server in a process of
//!   its own ([`super::apiserver`]): the benchmark's process holds the garden and the
//!   bare client only. Goal: ≤ 150 MiB up to 10,000 shoots, ≤ 600 MiB beyond.
//! - CPU seconds of each side (the client process and the API server process) for the
//!   bare creates and for the cold start, so a ratio can be told apart into the
//!   client's work and the server's.
//!
//! Each peer measures with a client of its own, made before its clock starts and with
//! no connection yet: it opens its connections within its measured time, as the
//! garden's new process does (the shoots are made through another client).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use granary_api::bucket_name::shard_bucket_name;
use granary_api::core::{
    BackupEntry, BackupSpec, CloudProfile, CloudProfileReference, CloudProfileSpec, Seed,
    SeedProvider, SeedSpec, Shoot, ShootSpec,
};
use granary_api::crds::{self, Side};
use granary_garden::config::{GardenConfiguration, ProviderQuota};
use granary_garden::entries::new_entry;
use granary_runtime::selector::ObjectSelector;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::apiserver::ApiServerProcess;
use super::support::{Scratch, cpu_seconds, create, garden_secret, mib, status_kib};
use super::table::{Peer, Row, Unit};
use super::{BenchOptions, Outcome};

const CONCURRENCY: usize = 32;
/// The namespace of the shoots and their entries.
const BENCH_NAMESPACE: &str = "garden-bench";
/// Rounds by default (`--rounds`): the figures are each measure's median round.
const DEFAULT_ROUNDS: usize = 3;
const GOAL_PLACEMENT_RATIO: f64 = 1.5;
const GOAL_WRITES_PER_ENTRY: f64 = 1.1;
const GOAL_RESTART_RATIO: f64 = 2.0;
/// The garden's peak RSS: up to 10,000 shoots, and (the second) beyond.
const GOAL_RSS_MIB: f64 = 150.0;
const GOAL_RSS_MIB_LARGE: f64 = 600.0;

fn goal_rss_mib(shoots: usize) -> f64 {
    if shoots > 10_000 {
        GOAL_RSS_MIB_LARGE
    } else {
        GOAL_RSS_MIB
    }
}
const DEADLINE: Duration = Duration::from_secs(1800);
/// How often a wait looks whether it is done.
#[derive(Clone, Copy, Debug)]
enum Poll {
    /// A measured phase: every 5 ms (a 20 ms poll was a quarter of a 1,000-shoot
    /// restart), or every thousandth of the time so far once that is longer, which keeps
    /// the figure within 0.1% of the event. Each look is cheap (one item and a count,
    /// or /readyz), but it is work on the machine the measured side runs on, and the
    /// peers are never polled: at 100,000 shoots a 5 ms poll made 2,000 requests during
    /// the garden's cold start of 13 to 20 s.
    Measure,
    /// Waits outside the measured phases (the kinds served after their CRDs): every 50 ms.
    Settle,
}

impl Poll {
    fn every(self, elapsed: Duration) -> Duration {
        match self {
            Poll::Measure => (elapsed / 1000).max(Duration::from_millis(5)),
            Poll::Settle => Duration::from_millis(50),
        }
    }
}

fn shoot(name: &str, namespace: &str) -> Shoot {
    let mut s = Shoot::new(
        name,
        ShootSpec {
            cloud_profile: Some(CloudProfileReference {
                kind: "CloudProfile".into(),
                name: "aws".into(),
                ..CloudProfileReference::default()
            }),
            seed_name: Some("seed-1".into()),
            ..ShootSpec::default()
        },
    );
    s.metadata.namespace = Some(namespace.into());
    s
}

/// Creates the benchmark's shoot `name` and returns it as the server made it.
async fn create_shoot(shoots: &Api<Shoot>, name: &str) -> anyhow::Result<Shoot> {
    shoots
        .create(&PostParams::default(), &shoot(name, BENCH_NAMESPACE))
        .await
        .with_context(|| format!("shoot {name}: create"))
}

/// The number of BackupEntries in all namespaces, from a one-item page and its
/// `remainingItemCount`: polling it costs the server no serialisation of the entries, so
/// it takes nothing from the run it watches. (The whole collection's count is its map's
/// length; a namespace's would walk the namespace's keys: 20,000 of them on every 5 ms
/// poll of the steady state, server CPU that the bare client is never charged.) Every
/// entry of the benchmark is in [`BENCH_NAMESPACE`].
async fn entry_count(client: &kube::Client) -> usize {
    let api: Api<BackupEntry> = Api::all(client.clone());
    // A failed list counts nothing: the callers poll again until their deadline.
    api.list_metadata(&ListParams::default().limit(1))
        .await
        .map(|l| {
            l.items.len()
                + l.metadata
                    .remaining_item_count
                    .and_then(|r| usize::try_from(r).ok())
                    .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Polls `check` as `poll` says until it holds; an error after [`DEADLINE`].
async fn until<F, Fut>(what: &str, poll: Poll, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        if start.elapsed() >= DEADLINE {
            bail!("{what} did not happen within {DEADLINE:?}");
        }
        tokio::time::sleep(poll.every(start.elapsed())).await;
    }
    Ok(())
}

/// `granary garden` in a process of its own against the benchmark's API server, with
/// /readyz and /metrics on a loopback port.
struct GardenProcess {
    child: tokio::process::Child,
    /// `http://127.0.0.1:<port>`
    base: String,
    http: reqwest::Client,
}

impl GardenProcess {
    async fn start(exe: &Path, kubeconfig: &Path, config: &Path) -> anyhow::Result<Self> {
        // A free port: the garden binds it again at once.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("a free loopback port")?
            .port();
        let child = tokio::process::Command::new(exe)
            .arg("garden")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--config")
            .arg(config)
            .args(["--metrics-bind-address", &format!("127.0.0.1:{port}")])
            .arg("--leader-elect=false")
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting granary garden")?;
        Ok(GardenProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        })
    }

    fn pid(&self) -> String {
        self.child.id().map(|p| p.to_string()).unwrap_or_default()
    }

    /// Whether /readyz answers 200.
    async fn ready(&self) -> bool {
        self.http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
    }

    /// The /metrics text (empty when it cannot be read).
    async fn metrics(&self) -> String {
        match self.http.get(format!("{}/metrics", self.base)).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!("granary garden ended early with {status}");
        }
        self.child.kill().await.context("stopping granary garden")
    }
}

/// The CPU seconds some processes (pids, or "self") spent since it was made.
struct CpuSince<const N: usize> {
    pids: [String; N],
    start: [f64; N],
}

impl<const N: usize> CpuSince<N> {
    fn now(pids: [&str; N]) -> Self {
        let pids = pids.map(String::from);
        let start = Self::read(&pids);
        CpuSince { pids, start }
    }

    fn read(pids: &[String; N]) -> [f64; N] {
        std::array::from_fn(|i| cpu_seconds(&pids[i]).unwrap_or(0.0))
    }

    /// Each process' CPU seconds since [`CpuSince::now`], in its order.
    fn spent(&self) -> [f64; N] {
        let end = Self::read(&self.pids);
        std::array::from_fn(|i| end[i] - self.start[i])
    }
}

/// The reconciles run so far, per controller, from the garden's /metrics text.
fn reconciles_of(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("granary_reconcile_total{controller=\""))
        .filter_map(|l| {
            let (controller, rest) = l.split_once('"')?;
            let count = rest.rsplit(' ').next()?.parse::<f64>().ok()?;
            Some((controller.to_string(), count))
        })
        .collect()
}

fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The figures of one round: every side measured once, in turn, on a fresh API server.
struct Round {
    cold: f64,
    bare_create: f64,
    minimal: f64,
    /// CPU seconds of the garden and of the minimal controller during their runs.
    cold_cpu_garden: f64,
    minimal_cpu_client: f64,
    bare_cpu_client: f64,
    cold_cpu_server: f64,
    bare_cpu_server: f64,
    writes_per_entry: f64,
    restart_ready: f64,
    restart_place: f64,
    bare_list: f64,
    steady: f64,
    bare_steady: f64,
    peak_kib: u64,
    /// Everything the round measured, as JSON.
    details: serde_json::Value,
}

/// The round whose `ratio` is the median (the lower middle one of an even count).
fn median_round(rounds: &[Round], ratio: impl Fn(&Round) -> f64) -> &Round {
    let mut order: Vec<&Round> = rounds.iter().collect();
    order.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    order[(order.len() - 1) / 2]
}

pub(crate) async fn run(opts: &BenchOptions, name: &str) -> anyhow::Result<Outcome> {
    let default = std::env::var("GRANARY_BENCH_SHOOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let n = opts.size.unwrap_or(default);
    let limit = 100;
    let exe = match &opts.granary_exe {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("the benchmark's own executable")?,
    };
    let count = opts.rounds.unwrap_or(DEFAULT_ROUNDS);
    let mut rounds = Vec::with_capacity(count);
    for _ in 0..count {
        rounds.push(round(opts, name, &exe, n, limit).await?);
    }
    // Each measure's figures come from its median round: the machine is shared, and a
    // neighbour's burst can slow one phase of one round by half (seen: 1.30 and 2.07 in
    // two runs of the same build). Every round's figures are in the details.
    let cold_ratio = |r: &Round| r.cold / r.bare_create;
    let restart_ratio = |r: &Round| r.restart_place / r.bare_list;
    let steady_ratio = |r: &Round| r.steady / r.bare_steady;
    let c = median_round(&rounds, cold_ratio);
    let m = median_round(&rounds, |r| r.cold / r.minimal);
    let cpu = median_round(&rounds, |r| r.cold_cpu_garden / r.minimal_cpu_client);
    let cpu_bare = median_round(&rounds, |r| r.cold_cpu_garden / r.bare_cpu_client);
    let cpu_server = median_round(&rounds, |r| r.cold_cpu_server / r.bare_cpu_server);
    let rs = median_round(&rounds, restart_ratio);
    let ready = median_round(&rounds, |r| r.restart_ready / r.bare_list);
    let st = median_round(&rounds, steady_ratio);
    let writes_per_entry = rounds
        .iter()
        .map(|r| r.writes_per_entry)
        .fold(0.0, f64::max);
    let peak_kib = rounds.iter().map(|r| r.peak_kib).max().unwrap_or(0);
    let spread = |f: &dyn Fn(&Round) -> f64| {
        let v: Vec<f64> = rounds.iter().map(f).collect();
        json!({"min": v.iter().copied().fold(f64::INFINITY, f64::min),
               "max": v.iter().copied().fold(0.0, f64::max), "each": v})
    };
    let mut result = c.details.clone();
    result["restart"] = rs.details["restart"].clone();
    result["steady_state"] = st.details["steady_state"].clone();
    result["goal"] = json!({
        "placement_ratio_max": GOAL_PLACEMENT_RATIO, "placement_met": cold_ratio(c) <= GOAL_PLACEMENT_RATIO,
        "writes_per_entry_max": GOAL_WRITES_PER_ENTRY, "writes_met": writes_per_entry <= GOAL_WRITES_PER_ENTRY,
        "restart_ratio_max": GOAL_RESTART_RATIO, "restart_met": restart_ratio(rs) <= GOAL_RESTART_RATIO,
        "steady_ratio_max": GOAL_PLACEMENT_RATIO, "steady_met": steady_ratio(st) <= GOAL_PLACEMENT_RATIO,
        "garden_rss_mib_max": goal_rss_mib(n), "rss_met": mib(peak_kib) <= goal_rss_mib(n)});
    result["rounds"] = json!({
        "count": count,
        "figures": "each measure from its median round; cold_start and cpu_seconds are the median cold-start round's, restart the median restart round's, steady_state the median steady-state round's",
        "cold_start_ratio": spread(&cold_ratio),
        "restart_ratio": spread(&restart_ratio),
        "steady_state_ratio": spread(&steady_ratio),
        "each": rounds.iter().map(|r| r.details.clone()).collect::<Vec<_>>(),
    });
    result["memory"]["garden_peak_rss_mib"] = json!(mib(peak_kib));
    let rows = vec![
        Row::versus(
            format!("cold start: {n} entries placed / created"),
            Unit::Seconds,
            c.cold,
            "bare client creates",
            Peer::Measured(c.bare_create),
        )
        .goal(GOAL_PLACEMENT_RATIO),
        Row::versus(
            format!("cold start: {n} entries placed / minimal controller"),
            Unit::Seconds,
            m.cold,
            "list + watch + create",
            Peer::Measured(m.minimal),
        ),
        Row::versus(
            "cold start CPU: garden / minimal controller",
            Unit::Seconds,
            cpu.cold_cpu_garden,
            "minimal controller",
            Peer::Measured(cpu.minimal_cpu_client),
        ),
        Row::versus(
            "API writes per entry (events included)",
            Unit::PerObject,
            writes_per_entry,
            "one create per entry",
            Peer::Reference(1.0),
        )
        .goal(GOAL_WRITES_PER_ENTRY),
        Row::versus(
            format!("restart: ready / list {n} shoots + entries"),
            Unit::Seconds,
            ready.restart_ready,
            "bare client list",
            Peer::Measured(ready.bare_list),
        ),
        Row::versus(
            "restart: first new placement / list",
            Unit::Seconds,
            rs.restart_place,
            "bare client list",
            Peer::Measured(rs.bare_list),
        )
        .goal(GOAL_RESTART_RATIO),
        Row::versus(
            format!("steady state: {n} new shoots' entries placed / shoot + entry creates"),
            Unit::Seconds,
            st.steady,
            "bare client creates",
            Peer::Measured(st.bare_steady),
        )
        .goal(GOAL_PLACEMENT_RATIO),
        Row::versus(
            "cold start CPU: garden / bare client",
            Unit::Seconds,
            cpu_bare.cold_cpu_garden,
            "bare client",
            Peer::Measured(cpu_bare.bare_cpu_client),
        ),
        Row::versus(
            "cold start CPU: API server for garden / for bare",
            Unit::Seconds,
            cpu_server.cold_cpu_server,
            "API server, bare creates",
            Peer::Measured(cpu_server.bare_cpu_server),
        ),
        Row::versus(
            "garden peak RSS (API server in its own process)",
            Unit::MiB,
            mib(peak_kib),
            "the issue's budget",
            Peer::Reference(goal_rss_mib(n)),
        )
        .goal(1.0),
    ];
    Ok(Outcome {
        title: format!(
            "garden placement, {n} shoots, quota {limit}, embedded API server in its own process, median of {count} rounds"
        ),
        sizes: json!({"shoots": n, "quota": limit, "rounds": count}),
        rows,
        details: result,
    })
}

/// A fresh API server in its own process, prepared for one measured phase: the
/// garden's kinds, a cloud profile with backups, a ready seed, and `n` shoots on it
/// (made 32 at a time). Every phase of a round starts from such a server, so each side
/// meets the same objects on a server that has done the same work before. (On one
/// server for all phases, the garden came after the peers' 30,000 creates and 20,000
/// deletes, and the server spent 1.7× the CPU per create it had spent for the bare
/// client: glibc's allocator, fragmented by the churn, was a sixth of its time.)
struct Prepared {
    server: ApiServerProcess,
    config: GardenConfiguration,
    /// The shoots' uids, in the order of their names (`s000000`, …).
    uids: Vec<String>,
    /// How long the `n` shoot creates took.
    shoot_create: f64,
}

async fn prepared(
    opts: &BenchOptions,
    name: &str,
    n: usize,
    limit: u32,
) -> anyhow::Result<Prepared> {
    let server = ApiServerProcess::start(opts.granary_exe.as_deref(), name).await?;
    let client = server.client.clone();
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::crds(Some(Side::Garden)) {
        create(&crd_api, &crd).await?;
    }
    // A CRD is served a moment after its create: every kind the benchmark writes must
    // answer before the first write (the creates of the measured phases do not retry).
    let (shoots_all, entries_all) = (
        Api::<Shoot>::all(client.clone()),
        Api::<BackupEntry>::all(client.clone()),
    );
    let (profiles_all, seeds_all) = (
        Api::<CloudProfile>::all(client.clone()),
        Api::<Seed>::all(client.clone()),
    );
    until("the garden's kinds served", Poll::Settle, || async {
        let one = ListParams::default().limit(1);
        let served = futures::join!(
            shoots_all.list_metadata(&one),
            entries_all.list_metadata(&one),
            profiles_all.list_metadata(&one),
            seeds_all.list_metadata(&one),
        );
        served.0.is_ok() && served.1.is_ok() && served.2.is_ok() && served.3.is_ok()
    })
    .await?;
    for name in ["garden", BENCH_NAMESPACE] {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.into());
        create(&Api::<Namespace>::all(client.clone()), &ns).await?;
    }
    let profile = CloudProfile::new(
        "aws",
        CloudProfileSpec {
            type_: "aws".into(),
            backup: Some(BackupSpec {
                provider: "aws".into(),
                credentials_ref: Some(garden_secret("backup")),
                ..BackupSpec::default()
            }),
            ..CloudProfileSpec::default()
        },
    );
    create(&Api::<CloudProfile>::all(client.clone()), &profile).await?;
    let seed = Seed::new(
        "seed-1",
        SeedSpec {
            provider: SeedProvider {
                type_: "aws".into(),
                region: "eu-1".into(),
                ..SeedProvider::default()
            },
            ..SeedSpec::default()
        },
    );
    create(&Api::<Seed>::all(client.clone()), &seed).await?;
    let mut lease = Lease::default();
    lease.metadata.name = Some("seed-seed-1".into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("seed-1".into()),
        renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        lease_duration_seconds: Some(40),
        ..LeaseSpec::default()
    });
    create(&Api::<Lease>::namespaced(client.clone(), "garden"), &lease).await?;

    let mut config = GardenConfiguration::default();
    config.leader_election.enabled = false;
    config.seed_liveness.ready_within =
        granary_runtime::config::ConfigDuration(Duration::from_secs(3600));
    // The same parallelism as the peers (32 creates in flight), as an admin sizing the
    // garden for a burst would set it; the default is 20.
    config.controllers.backup_entry.concurrent_syncs = CONCURRENCY as u32;
    config.controllers.backup_bucket.quota = vec![ProviderQuota {
        provider: "aws".into(),
        limit,
    }];

    let shoots: Api<Shoot> = Api::namespaced(client.clone(), BENCH_NAMESPACE);
    let start = Instant::now();
    let uids: Vec<String> = futures::stream::iter(0..n)
        .map(|i| {
            let shoots = shoots.clone();
            async move {
                let made = create_shoot(&shoots, &format!("s{i:06}")).await?;
                made.metadata.uid.context("a shoot without uid")
            }
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let shoot_create = start.elapsed().as_secs_f64();
    Ok(Prepared {
        server,
        config,
        uids,
        shoot_create,
    })
}

/// One round: the bare client's creates (and its list), the minimal controller, the
/// garden's cold start and its restart, in that order, each phase on a server of its
/// own prepared the same way ([`prepared`]).
async fn round(
    opts: &BenchOptions,
    name: &str,
    exe: &Path,
    n: usize,
    limit: u32,
) -> anyhow::Result<Round> {
    // Peer: a bare client creating the N BackupEntries the garden makes (`new_entry`:
    // labels, owner reference, bucket name of a shard) for the N shoots, then listing
    // the shoots and the entries.
    let Prepared {
        server: mut bare_server,
        uids,
        ..
    } = prepared(opts, name, n, limit).await?;
    // Connections are part of the work: the garden's process opens its own.
    let client = bare_server.fresh_client().await?;
    let server_pid = bare_server.pid();
    let bucket = shard_bucket_name("aws", "eu-1", "bare", 1);
    let bare_entry = |i: usize, uid: &str| {
        let mut s = shoot(&format!("s{i:06}"), BENCH_NAMESPACE);
        s.metadata.uid = Some(uid.to_string());
        new_entry(&s, bucket.as_str(), &ObjectSelector::default())
            .map_err(|e| anyhow::anyhow!("bare entry: {e}"))
    };
    let bare: Api<BackupEntry> = Api::namespaced(client, BENCH_NAMESPACE);
    // The server records requests in every measured phase, so recording costs the same
    // on each side.
    bare_server.record().await?;
    // CPU seconds of [this process, the API server process].
    let cpu = CpuSince::now(["self", &server_pid]);
    let start = Instant::now();
    futures::stream::iter(uids.iter().enumerate())
        .for_each_concurrent(CONCURRENCY, |(i, uid)| {
            let bare = bare.clone();
            let entry = bare_entry(i, uid);
            async move {
                let made = match entry {
                    Ok(e) => create(&bare, &e).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = made {
                    tracing::warn!("bare create: {e}");
                }
            }
        })
        .await;
    let bare_create = start.elapsed().as_secs_f64();
    let bare_cpu = cpu.spent();
    // The objects a restarted garden must know before it places: the shoots and their
    // entries, listed at once and decoded whole, as the garden's caches list them.
    let all = ListParams::default();
    let lister = bare_server.fresh_client().await?;
    let (list_shoots, list_entries) = (
        Api::<Shoot>::namespaced(lister.clone(), BENCH_NAMESPACE),
        Api::<BackupEntry>::namespaced(lister, BENCH_NAMESPACE),
    );
    let start = Instant::now();
    let (listed_shoots, listed_entries) =
        futures::try_join!(list_shoots.list(&all), list_entries.list(&all)).context("bare list")?;
    let warm_list = start.elapsed().as_secs_f64();
    let listed = (listed_shoots.items.len(), listed_entries.items.len());
    drop((listed_shoots, listed_entries));
    if listed != (n, n) {
        bail!(
            "the bare client listed {} shoots and {} entries, expected {n} of each",
            listed.0,
            listed.1
        );
    }
    // The restart's peer: the same list made by a new process, as the restarted garden
    // is one (process start, a client, its connections, then the list).
    let (bare_list, listed) = list_in_new_process(exe, &bare_server.kubeconfig_path()).await?;
    if listed != (n, n) {
        bail!(
            "the bare list process listed {} shoots and {} entries, expected {n} of each",
            listed.0,
            listed.1
        );
    }
    // The steady state's peer: the burst's shoots, each followed by its entry, on the
    // server holding the N shoots and entries, through the client that made them.
    let cpu = CpuSince::now(["self", &server_pid]);
    let start = Instant::now();
    burst(
        &Api::namespaced(bare.clone().into_client(), BENCH_NAMESPACE),
        Some((&bare, bucket.as_str())),
        n,
    )
    .await?;
    let bare_steady = start.elapsed().as_secs_f64();
    let bare_steady_cpu = cpu.spent();
    bare_server.stop().await?;

    // Second peer: the least any controller does for the same result. It lists the
    // shoots (decoded whole, in one request), watches the entries from the list's
    // resourceVersion (decoding each event) and creates one entry per shoot, 32 at a
    // time, until its watch has seen them all. What Granary does beyond this is its
    // own overhead; what this does beyond the bare creates is the price of being a
    // controller on this server.
    let Prepared {
        server: mut minimal_server,
        ..
    } = prepared(opts, name, n, limit).await?;
    let server_pid = minimal_server.pid();
    let minimal_client = minimal_server.fresh_client().await?;
    minimal_server.record().await?;
    let cpu = CpuSince::now(["self", &server_pid]);
    let start = Instant::now();
    minimal_controller(
        &Api::namespaced(minimal_client.clone(), BENCH_NAMESPACE),
        &Api::namespaced(minimal_client, BENCH_NAMESPACE),
        bucket.as_str(),
        n,
    )
    .await?;
    let minimal = start.elapsed().as_secs_f64();
    let minimal_cpu = cpu.spent();
    minimal_server.stop().await?;

    // Granary: `granary garden` from a cold start until every entry exists.
    let Prepared {
        mut server,
        config,
        shoot_create,
        ..
    } = prepared(opts, name, n, limit).await?;
    let client = server.client.clone();
    let server_pid = server.pid();
    let shoots: Api<Shoot> = Api::namespaced(client.clone(), BENCH_NAMESPACE);
    let profile_name = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let scratch = Scratch::new("garden").context("a scratch directory")?;
    let config_path = scratch.path().join("garden.json");
    let mut document = serde_json::to_value(&config)?;
    document["apiVersion"] = json!("granary.gardener.cloud/v1alpha1");
    document["kind"] = json!("GardenConfiguration");
    std::fs::write(&config_path, serde_json::to_vec(&document)?).context("the garden config")?;
    let kubeconfig = server.kubeconfig_path();
    server.record().await?;
    let server_cpu = CpuSince::now([&server_pid]);
    let start = Instant::now();
    let garden = GardenProcess::start(exe, &kubeconfig, &config_path).await?;
    let garden_pid = garden.pid();
    let mut peak_kib = 0;
    // When the count first passed each tenth of `n` (the first: the first entry), which
    // tells the garden's start (process, caches, recount) apart from its placing.
    let mut timeline: Vec<(usize, f64)> = Vec::new();
    let mut next_mark = 1;
    loop {
        peak_kib = peak_kib.max(status_kib(&garden_pid, "VmHWM:").unwrap_or(0));
        let count = entry_count(&client).await;
        let at = start.elapsed();
        while count >= next_mark && next_mark <= n {
            timeline.push((count, at.as_secs_f64()));
            next_mark = (timeline.len() * n / 10).max(next_mark + 1);
        }
        if count >= n {
            break;
        }
        if at >= DEADLINE {
            bail!("placement did not happen within {DEADLINE:?}");
        }
        tokio::time::sleep(Poll::Measure.every(at)).await;
    }
    let cold = start.elapsed().as_secs_f64();
    // The garden's process started within the measured time: all its CPU counts.
    let cold_cpu = (
        cpu_seconds(&garden_pid).unwrap_or(0.0),
        server_cpu.spent()[0],
    );
    let peak_kib = peak_kib.max(status_kib(&garden_pid, "VmHWM:").unwrap_or(0));
    let server_peak_kib = status_kib(&server_pid, "VmHWM:").unwrap_or(0);
    let requests = server.requests().await?;
    let writes_by_resource: BTreeMap<&String, usize> = requests
        .iter()
        .filter(|(call, _)| {
            let verb = call.split(' ').next().unwrap_or_default();
            matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .map(|(call, n)| (call, *n))
        .collect();
    let writes: usize = writes_by_resource.values().sum();
    let text = garden.metrics().await;
    let shards = metric(
        &text,
        "granary_garden_placements_total{outcome=\"new_shard\"}",
    );
    let conflicts = metric(&text, "granary_garden_placement_conflicts_total");
    // Reconciles run during the cold start, per controller.
    let reconciles = reconciles_of(&text);
    // Let the controllers settle (bucket recounts, labels) before the restart.
    tokio::time::sleep(Duration::from_secs(2)).await;
    garden.stop().await?;

    // Restart with N placed entries: ready, and the first new shoot's entry placed.
    let start = Instant::now();
    let garden = GardenProcess::start(exe, &kubeconfig, &config_path).await?;
    create(&shoots, &shoot("s-new", BENCH_NAMESPACE)).await?;
    until("ready after restart", Poll::Measure, || garden.ready()).await?;
    let restart_ready = start.elapsed().as_secs_f64();
    let entries: Api<BackupEntry> = Api::namespaced(client.clone(), BENCH_NAMESPACE);
    until("first placement after restart", Poll::Measure, || {
        entry_count_of_new(&shoots, &entries)
    })
    .await?;
    let restart_place = start.elapsed().as_secs_f64();

    // Steady state: the restarted garden, idle, meets a burst of N new shoots.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let target = entry_count(&client).await + n;
    let reconciles_before = reconciles_of(&garden.metrics().await);
    // CPU seconds of [the garden, this process (the shoot creates), the API server].
    let cpu = CpuSince::now([&garden.pid(), "self", &server_pid]);
    let start = Instant::now();
    futures::try_join!(
        burst(&shoots, None, n),
        until("steady-state placement", Poll::Measure, || async {
            entry_count(&client).await >= target
        })
    )?;
    let steady = start.elapsed().as_secs_f64();
    let steady_cpu = cpu.spent();
    // Reconciles the burst caused, per controller.
    let steady_reconciles: BTreeMap<String, f64> = reconciles_of(&garden.metrics().await)
        .into_iter()
        .map(|(c, after)| {
            let before = reconciles_before.get(&c).copied().unwrap_or(0.0);
            (c, after - before)
        })
        .collect();
    garden.stop().await?;

    let ratio = cold / bare_create;
    let minimal_ratio = cold / minimal;
    let writes_per_entry = writes as f64 / n as f64;
    let restart_ratio = restart_place / bare_list;
    let steady_ratio = steady / bare_steady;
    let result = json!({
        "workload": {"shoots": n, "quota": limit, "concurrency": CONCURRENCY,
                     "profile": profile_name, "nproc": std::thread::available_parallelism().map(|p| p.get()).unwrap_or(0)},
        "cold_start": {"granary_seconds": cold, "bare_create_seconds": bare_create,
                       "ratio": ratio, "entries_per_second": n as f64 / cold,
                       "bare_creates_per_second": n as f64 / bare_create,
                       "shards": shards, "placement_conflicts": conflicts, "reconciles": reconciles,
                       "api_writes": writes, "api_writes_per_entry": writes_per_entry,
                       "api_writes_by_kind": writes_by_resource,
                       // Reads too (the benchmark's own progress polls are the `list
                       // backupentries` across all namespaces).
                       "api_requests_by_kind": requests,
                       "shoot_create_seconds": shoot_create,
                       // [entries seen, seconds since the garden's start]: the first entry,
                       // then each tenth.
                       "timeline": timeline,
                       "minimal_controller_seconds": minimal,
                       "ratio_to_minimal_controller": minimal_ratio,
                       "minimal_controller_to_bare_creates": minimal / bare_create},
        "restart": {"ready_seconds": restart_ready, "first_placement_seconds": restart_place,
                    "bare_list_seconds": bare_list,
                    "bare_list": "a new process: its start, a client, the list of the shoots and the entries",
                    "warm_list_seconds": warm_list,
                    "warm_list": "the same list from this (warm) process",
                    "ratio": restart_ratio},
        "steady_state": {"new_shoots": n, "granary_seconds": steady, "bare_seconds": bare_steady,
                         "ratio": steady_ratio, "reconciles": steady_reconciles,
                         "cpu_seconds": {"garden": steady_cpu[0], "shoot_creates": steady_cpu[1],
                                         "api_server": steady_cpu[2],
                                         "bare_client": bare_steady_cpu[0],
                                         "bare_api_server": bare_steady_cpu[1]}},
        "memory": {"garden_peak_rss_mib": mib(peak_kib), "api_server_peak_rss_mib": mib(server_peak_kib),
                   "garden_process": "granary garden, alone in its process"},
        "cpu_seconds": {"bare_create": {"client": bare_cpu[0], "api_server": bare_cpu[1]},
                        "minimal_controller": {"client": minimal_cpu[0], "api_server": minimal_cpu[1]},
                        "cold_start": {"garden": cold_cpu.0, "api_server": cold_cpu.1}},
    });
    server.stop().await?;
    Ok(Round {
        cold,
        bare_create,
        minimal,
        cold_cpu_garden: cold_cpu.0,
        minimal_cpu_client: minimal_cpu[0],
        bare_cpu_client: bare_cpu[0],
        cold_cpu_server: cold_cpu.1,
        bare_cpu_server: bare_cpu[1],
        writes_per_entry,
        restart_ready,
        restart_place,
        bare_list,
        steady,
        bare_steady,
        peak_kib,
        details: result,
    })
}

/// Set (to a kubeconfig) in the environment of the restart peer's process: it lists the
/// benchmark's shoots and entries, prints their counts and exits
/// ([`super::main_blocking`] turns the environment into [`bare_list_process`]).
pub(crate) const BARE_LIST_ENV: &str = "GRANARY_BENCH_BARE_LIST";

/// The restart peer's process: a client of the server of `kubeconfig`, the shoots and
/// entries listed at once and decoded whole, and "<shoots> <entries>" on stdout.
pub(crate) fn bare_list_process(kubeconfig: &Path) -> anyhow::Result<()> {
    let runtime = super::support::runtime()?;
    runtime.block_on(async {
        let client = super::apiserver::new_client(kubeconfig).await?;
        let all = ListParams::default();
        let shoots = Api::<Shoot>::namespaced(client.clone(), BENCH_NAMESPACE);
        let entries = Api::<BackupEntry>::namespaced(client, BENCH_NAMESPACE);
        let (shoots, entries) =
            futures::try_join!(shoots.list(&all), entries.list(&all)).context("bare list")?;
        println!("{} {}", shoots.items.len(), entries.items.len());
        Ok(())
    })
}

/// Runs [`bare_list_process`] as `exe bench garden`; its wall time from spawn to exit
/// and the counts it listed.
async fn list_in_new_process(
    exe: &Path,
    kubeconfig: &Path,
) -> anyhow::Result<(f64, (usize, usize))> {
    let start = Instant::now();
    let out = tokio::process::Command::new(exe)
        .args(["bench", "garden"])
        .env(BARE_LIST_ENV, kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("the bare list process")?;
    let seconds = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "the bare list process failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = text.split_whitespace().map(str::parse::<usize>);
    match (counts.next(), counts.next()) {
        (Some(Ok(shoots)), Some(Ok(entries))) => Ok((seconds, (shoots, entries))),
        _ => bail!("the bare list process said {text:?}"),
    }
}

/// The benchmark's second peer: lists the `n` shoots, watches their namespace's entries
/// from the list's resourceVersion and creates one entry per shoot (as the garden makes
/// them, all in `bucket`), [`CONCURRENCY`] at a time, until the watch has seen `n`.
async fn minimal_controller(
    shoots: &Api<Shoot>,
    entries: &Api<BackupEntry>,
    bucket: &str,
    n: usize,
) -> anyhow::Result<()> {
    let listed = shoots
        .list(&ListParams::default())
        .await
        .context("minimal controller: list shoots")?;
    let rv = listed.metadata.resource_version.clone().unwrap_or_default();
    let mut events = entries
        .watch(&kube::api::WatchParams::default(), &rv)
        .await
        .context("minimal controller: watch entries")?
        .boxed();
    let seen = async {
        let mut seen = 0;
        while seen < n {
            match events.next().await {
                Some(Ok(kube::api::WatchEvent::Added(_))) => seen += 1,
                Some(Ok(_)) => {}
                Some(Err(e)) => bail!("minimal controller: watch: {e}"),
                None => bail!("minimal controller: the watch ended after {seen} of {n} entries"),
            }
        }
        Ok(())
    };
    let made = async {
        futures::stream::iter(listed.items)
            .map(|s| async move {
                let entry = new_entry(&s, bucket, &ObjectSelector::default())
                    .map_err(|e| anyhow::anyhow!("minimal controller entry: {e}"))?;
                create(entries, &entry).await
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<()>>()
    };
    // A failed create ends the run at once instead of leaving the watch waiting.
    futures::try_join!(seen, made).map(drop)
}

/// The steady state's burst: `m` new shoots (`b000000`, …), [`CONCURRENCY`] at a time;
/// with `entries`, each shoot's entry (as the garden makes it, in the given bucket) is
/// created right after its shoot, as a bare client doing the garden's work would.
async fn burst(
    shoots: &Api<Shoot>,
    entries: Option<(&Api<BackupEntry>, &str)>,
    m: usize,
) -> anyhow::Result<()> {
    futures::stream::iter(0..m)
        .map(|i| async move {
            let made = create_shoot(shoots, &format!("b{i:06}")).await?;
            if let Some((entries, bucket)) = entries {
                let entry = new_entry(&made, bucket, &ObjectSelector::default())
                    .map_err(|e| anyhow::anyhow!("burst entry: {e}"))?;
                create(entries, &entry).await?;
            }
            Ok(())
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<anyhow::Result<()>>>()
        .await
        .into_iter()
        .collect()
}

/// Whether the entry of shoot `s-new` exists.
async fn entry_count_of_new(shoots: &Api<Shoot>, entries: &Api<BackupEntry>) -> bool {
    let Ok(Some(s)) = shoots.get_opt("s-new").await else {
        return false;
    };
    let Some(name) = s.backup_entry_name() else {
        return false;
    };
    matches!(entries.get_opt(&name).await, Ok(Some(_)))
}

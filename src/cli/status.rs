//! `granary status`: the landscape's backup health in one answer. Which shoots have no
//! Succeeded BackupEntry and why, which buckets fail and which pools are near their
//! quota, which seeds' backup locations are Unavailable, which schedules are overdue,
//! and the newest failed backups and restores. Text for people, `-o json` for scripts;
//! the exit code is non-zero when something needs attention.
//!
//! What it reads: the garden (`--kubeconfig`) and each seed (`--seed-kubeconfig
//! NAME=PATH`), or all of them from `granary dev`'s data directory (`--data-dir`). The
//! judgement ([`assess`]) is pure; reading ([`gather`]) is the edge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;

use granary_api::core::{BackupBucket, BackupEntry, Shoot};
use granary_api::velero::{
    Backup, BackupPhase, BackupStorageLocation, BackupStorageLocationPhase, Restore, RestorePhase,
    Schedule,
};
use granary_garden::health::{Protection, Why, protection};
use granary_runtime::clock::from_k8s;

use super::output::OutputFormat;

/// A pool is near its quota when its shards hold at least this share of their limit.
const NEAR_QUOTA: f64 = 0.9;
/// A schedule is overdue this long after its backup was due.
const OVERDUE_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(15);
/// Failures older than this are history, not news.
const RECENT: chrono::TimeDelta = chrono::TimeDelta::hours(24);
/// How many failures per seed are shown.
const FAILURES_SHOWN: usize = 5;

/// `granary status`'s flags; the `///` lines are their help.
#[derive(Clone, Debug, clap::Args)]
pub struct StatusOptions {
    /// The garden's kubeconfig (default: KUBECONFIG, ~/.kube/config).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// A seed's kubeconfig, NAME=PATH; repeat for each seed whose Velero side to look at.
    #[arg(long = "seed-kubeconfig", value_name = "NAME=PATH")]
    pub seed_kubeconfigs: Vec<String>,
    /// `granary dev`'s data directory: the garden and every seed from its kubeconfigs.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["kubeconfig", "seed_kubeconfigs"])]
    pub data_dir: Option<PathBuf>,
    /// The Velero namespace on the seeds.
    #[arg(short = 'n', long, default_value = super::DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Output format: text (the default), or json for scripts.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
}

/// What the garden holds.
#[derive(Default)]
pub struct GardenView {
    pub shoots: Vec<Shoot>,
    pub entries: Vec<BackupEntry>,
    pub buckets: Vec<BackupBucket>,
    /// The newest Warning about each shoot (`<namespace>/<name>` → `reason: note`).
    pub shoot_warnings: BTreeMap<String, String>,
}

/// What one seed's Velero namespace holds.
#[derive(Default)]
pub struct SeedView {
    pub name: String,
    pub locations: Vec<BackupStorageLocation>,
    pub schedules: Vec<Schedule>,
    pub backups: Vec<Backup>,
    pub restores: Vec<Restore>,
}

/// One thing that needs attention.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// `shoot`, `bucket`, `pool`, `location`, `schedule`, `backup` or `restore`.
    pub kind: &'static str,
    /// The object (`<namespace>/<name>`, or `<seed>/<name>` on a seed).
    pub name: String,
    pub problem: String,
}

/// The landscape's backup health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub shoots: usize,
    pub protected_shoots: usize,
    pub seeds_looked_at: Vec<String>,
    pub problems: Vec<Problem>,
}

fn full_name(namespace: Option<String>, name: String) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

/// Judges the landscape at `now`.
pub fn assess(garden: &GardenView, seeds: &[SeedView], now: DateTime<Utc>) -> Health {
    let mut problems = Vec::new();
    let entries: BTreeMap<String, &BackupEntry> = garden
        .entries
        .iter()
        .map(|e| (full_name(e.namespace(), e.name_any()), e))
        .collect();
    let mut shoots = 0;
    let mut protected = 0;
    for shoot in &garden.shoots {
        let name = full_name(shoot.namespace(), shoot.name_any());
        let entry = shoot
            .backup_entry_name()
            .and_then(|e| entries.get(&full_name(shoot.namespace(), e)).copied());
        let problem = match protection(shoot, entry) {
            Protection::NotApplicable => continue,
            Protection::Protected => {
                shoots += 1;
                protected += 1;
                continue;
            }
            Protection::Unprotected(why) => match why {
                Why::NoEntry => match garden.shoot_warnings.get(&name) {
                    Some(why) => format!("no BackupEntry: {why}"),
                    None => "no BackupEntry yet".to_string(),
                },
                Why::NoStatus => "its BackupEntry has no status yet".to_string(),
                Why::State { state, description } => {
                    format!("its BackupEntry is {state:?}: {description}")
                }
            },
        };
        shoots += 1;
        problems.push(Problem {
            kind: "shoot",
            name,
            problem,
        });
    }
    // Buckets that fail, and pools whose every shard is near its limit.
    let mut pools: BTreeMap<String, (u32, u32, usize)> = BTreeMap::new();
    for b in &garden.buckets {
        let status = b.status.as_ref();
        if let Some(e) = status.and_then(|s| s.last_error.as_ref()) {
            problems.push(Problem {
                kind: "bucket",
                name: b.name_any(),
                problem: e.description.clone(),
            });
        }
        let (Some(pool), Some(limit)) = (
            granary_garden::buckets::pool_of(b),
            status.and_then(|s| s.entry_limit),
        ) else {
            continue;
        };
        if b.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let key = format!("{} {} in {}", pool.kind, pool.owner, pool.region);
        // The entries there (the bucket's own count also holds places the garden
        // reserved ahead for entries not created yet).
        let count = garden
            .entries
            .iter()
            .filter(|e| e.spec.bucket_name == b.name_any())
            .count() as u32;
        let p = pools.entry(key).or_default();
        p.0 += count;
        p.1 += limit;
        p.2 += 1;
    }
    for (pool, (count, limit, shards)) in pools {
        if limit > 0 && f64::from(count) >= NEAR_QUOTA * f64::from(limit) {
            problems.push(Problem {
                kind: "pool",
                name: pool,
                problem: format!(
                    "near its quota: {count} of {limit} places in {shards} shard(s) taken; \
                     new shoots need a new shard (check the provider account's bucket quota)"
                ),
            });
        }
    }
    for seed in seeds {
        let on = |name: String| format!("{}/{name}", seed.name);
        for l in &seed.locations {
            let status = l.status.clone().unwrap_or_default();
            if status.phase == Some(BackupStorageLocationPhase::Unavailable) {
                problems.push(Problem {
                    kind: "location",
                    name: on(l.name_any()),
                    problem: format!(
                        "Unavailable: {}",
                        status.message.unwrap_or_else(|| "no reason given".into())
                    ),
                });
            }
        }
        for s in &seed.schedules {
            if s.spec.paused == Some(true) {
                continue;
            }
            let Ok(cadence) = granary_velero_server::schedules::Cadence::parse(&s.spec.schedule)
            else {
                problems.push(Problem {
                    kind: "schedule",
                    name: on(s.name_any()),
                    problem: format!("its schedule {:?} does not parse", s.spec.schedule),
                });
                continue;
            };
            let since = s.status.as_ref().and_then(|st| st.last_backup).or_else(|| {
                s.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| from_k8s(t.0))
            });
            if let Some(due) = since.and_then(|t| cadence.next_after(t))
                && now > due + OVERDUE_AFTER
            {
                problems.push(Problem {
                    kind: "schedule",
                    name: on(s.name_any()),
                    problem: format!(
                        "overdue: a backup was due at {}, none has been taken since",
                        due.to_rfc3339()
                    ),
                });
            }
        }
        let recent = |t: Option<DateTime<Utc>>| t.is_some_and(|t| now - t < RECENT);
        let mut failed: Vec<(DateTime<Utc>, Problem)> = Vec::new();
        for b in &seed.backups {
            let status = b.status.clone().unwrap_or_default();
            let phase = status.phase.unwrap_or(BackupPhase::New);
            let when = status.completion_timestamp.or_else(|| {
                b.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| from_k8s(t.0))
            });
            if matches!(
                phase,
                BackupPhase::Failed | BackupPhase::PartiallyFailed | BackupPhase::FailedValidation
            ) && recent(when)
            {
                let why = status
                    .failure_reason
                    .or_else(|| status.validation_errors.map(|v| v.join("; ")))
                    .unwrap_or_else(|| format!("{} error(s)", status.errors.unwrap_or(0)));
                failed.push((
                    when.unwrap_or(now),
                    Problem {
                        kind: "backup",
                        name: on(b.name_any()),
                        problem: format!("{phase}: {why}"),
                    },
                ));
            }
        }
        for r in &seed.restores {
            let status = r.status.clone().unwrap_or_default();
            let phase = status.phase.unwrap_or(RestorePhase::New);
            let when = status.completion_timestamp.or_else(|| {
                r.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| from_k8s(t.0))
            });
            if matches!(
                phase,
                RestorePhase::Failed
                    | RestorePhase::PartiallyFailed
                    | RestorePhase::FailedValidation
            ) && recent(when)
            {
                let mut why: Vec<String> = status.failure_reason.into_iter().collect();
                why.extend(status.validation_errors.unwrap_or_default());
                failed.push((
                    when.unwrap_or(now),
                    Problem {
                        kind: "restore",
                        name: on(r.name_any()),
                        problem: format!("{phase}: {}", why.join("; ")),
                    },
                ));
            }
        }
        failed.sort_by_key(|f| std::cmp::Reverse(f.0));
        problems.extend(failed.into_iter().take(FAILURES_SHOWN).map(|(_, p)| p));
    }
    Health {
        shoots,
        protected_shoots: protected,
        seeds_looked_at: seeds.iter().map(|s| s.name.clone()).collect(),
        problems,
    }
}

/// The report's first line: how many shoots are protected, and how many problems.
pub fn summary(h: &Health) -> String {
    format!(
        "{} of {} shoot(s) have a Succeeded BackupEntry; {} seed(s) looked at; {}",
        h.protected_shoots,
        h.shoots,
        h.seeds_looked_at.len(),
        match h.problems.len() {
            0 => "nothing needs attention".to_string(),
            1 => "1 problem".to_string(),
            n => format!("{n} problems"),
        }
    )
}

/// The report for people.
pub fn text(h: &Health) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "{}", summary(h));
    for (kind, title) in [
        ("shoot", "SHOOTS WITHOUT A SUCCEEDED ENTRY"),
        ("bucket", "BUCKETS FAILING"),
        ("pool", "POOLS NEAR QUOTA"),
        ("location", "BACKUP LOCATIONS UNAVAILABLE"),
        ("schedule", "SCHEDULES OVERDUE"),
        ("backup", "RECENT FAILED BACKUPS"),
        ("restore", "RECENT FAILED RESTORES"),
    ] {
        let of_kind: Vec<&Problem> = h.problems.iter().filter(|p| p.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let _ = writeln!(o, "\n{title}");
        for p in of_kind {
            let _ = writeln!(o, "  {}: {}", p.name, p.problem);
        }
    }
    o
}

/// A client from a kubeconfig (the CLI's one way: [`super::Target::client`]).
async fn client(path: Option<&Path>) -> anyhow::Result<Client> {
    super::Target {
        kubeconfig: path.map(Path::to_path_buf),
        namespace: super::DEFAULT_NAMESPACE.to_string(),
        data_dir: None,
    }
    .client()
    .await
}

/// When an event last happened: its series' last time, else its own time (`at` when it
/// says none).
pub(crate) fn event_time(
    e: &k8s_openapi::api::events::v1::Event,
    at: DateTime<Utc>,
) -> DateTime<Utc> {
    e.series
        .as_ref()
        .map(|s| from_k8s(s.last_observed_time.0))
        .or_else(|| e.event_time.as_ref().map(|t| from_k8s(t.0)))
        .or_else(|| e.deprecated_last_timestamp.as_ref().map(|t| from_k8s(t.0)))
        .or_else(|| {
            e.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| from_k8s(t.0))
        })
        .unwrap_or(at)
}

/// The seeds' kubeconfigs: from the flags, or `seed-<name>.kubeconfig` in the data dir.
fn seed_kubeconfigs(o: &StatusOptions) -> anyhow::Result<Vec<(String, PathBuf)>> {
    if let Some(dir) = &o.data_dir {
        let mut out = Vec::new();
        for entry in
            std::fs::read_dir(dir).with_context(|| format!("--data-dir {}", dir.display()))?
        {
            let path = entry?.path();
            let file = path
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default();
            if let Some(seed) = file
                .strip_prefix("seed-")
                .and_then(|f| f.strip_suffix(".kubeconfig"))
            {
                out.push((seed.to_string(), path.clone()));
            }
        }
        out.sort();
        return Ok(out);
    }
    o.seed_kubeconfigs
        .iter()
        .map(|s| match s.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => {
                Ok((name.to_string(), PathBuf::from(path)))
            }
            _ => bail!("--seed-kubeconfig {s:?}: give NAME=PATH"),
        })
        .collect()
}

/// Reads what [`assess`] judges.
async fn gather(o: &StatusOptions) -> anyhow::Result<(GardenView, Vec<SeedView>)> {
    let garden_path = o
        .data_dir
        .as_ref()
        .map(|d| d.join("garden.kubeconfig"))
        .or_else(|| o.kubeconfig.clone());
    let garden = client(garden_path.as_deref()).await?;
    let lp = ListParams::default();
    let shoots = Api::<Shoot>::all(garden.clone())
        .list(&lp)
        .await
        .context("listing shoots")?
        .items;
    let entries = Api::<BackupEntry>::all(garden.clone())
        .list(&lp)
        .await
        .context("listing BackupEntries")?
        .items;
    let buckets = Api::<BackupBucket>::all(garden.clone())
        .list(&lp)
        .await
        .context("listing BackupBuckets")?
        .items;
    let mut shoot_warnings: BTreeMap<String, (DateTime<Utc>, String)> = BTreeMap::new();
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(garden.clone())
        .list(&lp)
        .await
        .context("listing events")?
        .items;
    for e in events {
        let Some(r) = e
            .regarding
            .as_ref()
            .filter(|r| r.kind.as_deref() == Some("Shoot"))
        else {
            continue;
        };
        if e.type_.as_deref() != Some("Warning") {
            continue;
        }
        let key = format!(
            "{}/{}",
            r.namespace.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default()
        );
        let when = event_time(&e, DateTime::default());
        let said = format!(
            "{}: {}",
            e.reason.as_deref().unwrap_or("-"),
            e.note.as_deref().unwrap_or_default()
        );
        if shoot_warnings.get(&key).is_none_or(|(t, _)| *t <= when) {
            shoot_warnings.insert(key, (when, said));
        }
    }
    let view = GardenView {
        shoots,
        entries,
        buckets,
        shoot_warnings: shoot_warnings
            .into_iter()
            .map(|(k, (_, v))| (k, v))
            .collect(),
    };
    let mut seeds = Vec::new();
    for (name, path) in seed_kubeconfigs(o)? {
        let c = client(Some(&path)).await?;
        let ns = o.namespace.as_str();
        let seed = |what: &str| format!("seed {name}: listing {what}");
        seeds.push(SeedView {
            locations: Api::namespaced(c.clone(), ns)
                .list(&lp)
                .await
                .with_context(|| seed("locations"))?
                .items,
            schedules: Api::namespaced(c.clone(), ns)
                .list(&lp)
                .await
                .with_context(|| seed("schedules"))?
                .items,
            backups: Api::namespaced(c.clone(), ns)
                .list(&lp)
                .await
                .with_context(|| seed("backups"))?
                .items,
            restores: Api::namespaced(c.clone(), ns)
                .list(&lp)
                .await
                .with_context(|| seed("restores"))?
                .items,
            name,
        });
    }
    Ok((view, seeds))
}

/// Runs `granary status`.
pub async fn run(o: StatusOptions) -> anyhow::Result<()> {
    let (garden, seeds) = gather(&o).await?;
    let health = assess(&garden, &seeds, Utc::now());
    match o.output {
        Some(OutputFormat::Json) => println!("{}", serde_json::to_string_pretty(&health)?),
        Some(OutputFormat::Yaml) => print!("{}", serde_saphyr::to_string(&health)?),
        _ => print!("{}", text(&health)),
    }
    if !health.problems.is_empty() {
        bail!("{} problem(s) need attention", health.problems.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("object")
    }

    #[test]
    fn a_healthy_landscape_needs_nothing_and_each_problem_is_named() {
        let now = DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z")
            .unwrap()
            .to_utc();
        let shoot = |name: &str| -> Shoot {
            obj(
                json!({"apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
                "metadata": {"name": name, "namespace": "garden-dev", "uid": format!("u-{name}")},
                "spec": {"seedName": "s1", "cloudProfileName": "p"}}),
            )
        };
        let web = shoot("web");
        let entry_name = web.backup_entry_name().unwrap();
        let entry: BackupEntry = obj(
            json!({"apiVersion": "core.gardener.cloud/v1beta1", "kind": "BackupEntry",
            "metadata": {"name": entry_name, "namespace": "garden-dev"},
            "spec": {"bucketName": "b-0", "seedName": "s1"},
            "status": {"lastOperation": {"type": "Create", "state": "Succeeded", "progress": 100,
                "description": "", "lastUpdateTime": "2026-06-01T11:00:00Z"}}}),
        );
        let mut garden = GardenView {
            shoots: vec![web],
            entries: vec![entry],
            ..GardenView::default()
        };
        let healthy = assess(&garden, &[], now);
        assert_eq!((healthy.shoots, healthy.protected_shoots), (1, 1));
        assert!(healthy.problems.is_empty(), "{healthy:?}");
        assert!(text(&healthy).contains("nothing needs attention"));

        garden.shoots.push(shoot("api"));
        garden.shoot_warnings.insert(
            "garden-dev/api".into(),
            "BackupEntryPending: the profile is invalid".into(),
        );
        let seed = SeedView {
            name: "s1".into(),
            locations: vec![obj(
                json!({"apiVersion": "velero.io/v1", "kind": "BackupStorageLocation",
                "metadata": {"name": "default"}, "spec": {"provider": "aws", "objectStorage": {"bucket": "b"}},
                "status": {"phase": "Unavailable", "message": "no credentials"}}),
            )],
            schedules: vec![obj(
                json!({"apiVersion": "velero.io/v1", "kind": "Schedule",
                "metadata": {"name": "hourly", "creationTimestamp": "2026-06-01T08:00:00Z"},
                "spec": {"schedule": "0 * * * *", "template": {}},
                "status": {"lastBackup": "2026-06-01T09:00:00Z"}}),
            )],
            backups: vec![obj(json!({"apiVersion": "velero.io/v1", "kind": "Backup",
                "metadata": {"name": "b1", "creationTimestamp": "2026-06-01T11:00:00Z"}, "spec": {},
                "status": {"phase": "FailedValidation", "validationErrors": ["no location"]}}))],
            restores: Vec::new(),
        };
        let h = assess(&garden, &[seed], now);
        let named: Vec<(&str, &str)> = h
            .problems
            .iter()
            .map(|p| (p.kind, p.name.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("shoot", "garden-dev/api"),
                ("location", "s1/default"),
                ("schedule", "s1/hourly"),
                ("backup", "s1/b1"),
            ]
        );
        assert!(h.problems[0].problem.contains("the profile is invalid"));
        let t = text(&h);
        assert!(
            t.starts_with(
                "1 of 2 shoot(s) have a Succeeded BackupEntry; 1 seed(s) looked at; 4 problems"
            ),
            "{t}"
        );
        assert!(t.contains("SCHEDULES OVERDUE\n  s1/hourly: overdue"), "{t}");
    }
}

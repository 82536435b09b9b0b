//! Benchmark of the backup queue's decision (method: docs/benchmarks.md#method): one
//! `velero_server::queue::plan` pass over N queued backups (`--size`, default 10,000)
//! with `concurrentBackups` 2 and two running. Goal: ≤ 10 ms per pass. No peer.
//!
//! Two workloads, both recorded: `mixed` (each backup includes 1–3 of 100 namespaces,
//! one in fifty all namespaces: conflicts are found early) and `disjoint` (every backup
//! its own namespace: no conflicts, every backup waits for a slot, so each one is
//! compared with every backup ahead of it — the worst case for the overlap scan).

use std::collections::BTreeSet;
use std::time::Instant;

use chrono::{TimeDelta, TimeZone, Utc};
use granary_velero_server::namespaces::NamespaceScope;
use granary_velero_server::queue::{QueueDecision, QueueItem, QueuePhase, plan};
use serde_json::json;

use super::table::{Row, Unit};
use super::{BenchOptions, Outcome};

const GOAL_MS: f64 = 10.0;
const CONCURRENT: usize = 2;

fn listed(names: impl IntoIterator<Item = String>) -> NamespaceScope {
    NamespaceScope::Listed(names.into_iter().collect::<BTreeSet<_>>())
}

/// `queued` Queued backups (positions 1..n) and two running ones, scopes from `scope`.
fn items(queued: usize, scope: impl Fn(usize) -> NamespaceScope) -> Vec<QueueItem> {
    let t0 = Utc
        .timestamp_opt(1_700_000_000, 0)
        .single()
        .expect("a time");
    let mut out: Vec<QueueItem> = (0..2)
        .map(|r| QueueItem {
            name: format!("running-{r}"),
            created: t0,
            phase: QueuePhase::Running,
            scope: listed([format!("running-ns-{r}")]),
        })
        .collect();
    out.extend((0..queued).map(|i| QueueItem {
        name: format!("backup-{i:05}"),
        created: t0 + TimeDelta::seconds(i as i64),
        phase: QueuePhase::Queued(u32::try_from(i + 1).unwrap_or(u32::MAX)),
        scope: scope(i),
    }));
    out
}

fn mixed(i: usize) -> NamespaceScope {
    if i % 50 == 49 {
        return NamespaceScope::All { except: vec![] };
    }
    let n = 1 + i % 3;
    listed((0..n).map(|k| format!("ns-{:03}", (i * 7 + k * 13) % 100)))
}

fn disjoint(i: usize) -> NamespaceScope {
    listed([format!("ns-{i:05}")])
}

/// Times `passes` passes; (min, median, max) milliseconds and the decisions' summary.
fn measure(items: &[QueueItem], passes: usize) -> serde_json::Value {
    let mut ms = Vec::with_capacity(passes);
    let mut started = 0;
    let mut waiting = 0;
    for _ in 0..passes.max(1) {
        let start = Instant::now();
        let decisions = plan(items, CONCURRENT);
        ms.push(start.elapsed().as_secs_f64() * 1000.0);
        started = decisions
            .iter()
            .filter(|(_, d)| *d == QueueDecision::Start)
            .count();
        waiting = decisions.len() - started;
        std::hint::black_box(decisions);
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    json!({"passes": ms.len(), "min_ms": ms[0], "median_ms": median, "max_ms": ms[ms.len() - 1],
           "started": started, "waiting": waiting, "goal_met": median <= GOAL_MS})
}

pub(crate) fn run(opts: &BenchOptions) -> anyhow::Result<Outcome> {
    let queued = opts.size.unwrap_or(10_000);
    let passes = 10;
    let mut result = json!({
        "workload": {"queued": queued, "running": 2, "concurrent_backups": CONCURRENT,
                     "passes": passes},
        "goal_ms_per_pass": GOAL_MS,
    });
    let mut rows = Vec::new();
    for (name, scope) in [
        ("mixed", mixed as fn(usize) -> NamespaceScope),
        ("disjoint", disjoint),
    ] {
        let items = items(queued, scope);
        let m = measure(&items, passes);
        rows.push(Row::alone(
            format!("plan over {queued} queued ({name}), median pass"),
            Unit::Milliseconds,
            m["median_ms"].as_f64().unwrap_or_default(),
        ));
        result[name] = m;
    }
    Ok(Outcome {
        title: format!(
            "backup queue plan over {queued} queued backups, 2 running (no peer: goal <= {GOAL_MS} ms a pass)"
        ),
        sizes: json!({"queued": queued, "running": 2}),
        rows,
        details: result,
    })
}

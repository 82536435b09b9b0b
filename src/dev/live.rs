//! The live view of `granary dev`: watches the garden's BackupBuckets, BackupEntries and
//! Warning events and every seed's Velero Backups and BackupStorageLocations and, on every
//! change, either redraws the compact screen, cut to the terminal's size (stdout is a
//! terminal), or prints the changes as log lines (anything else: a pipe, a file, a test).

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::dev::backups_view::SeedBackups;
use crate::dev::view::{
    Snapshot, changes, forget_events_before, forget_events_of_gone_objects, new_warnings,
    render_fitted,
};
use granary_api::core::{BackupBucket, BackupEntry, Shoot};
use granary_api::velero::{Backup, BackupStorageLocation};
use granary_runtime::backoff::WatchBackoff;
use granary_runtime::clock::Clock;

/// How many recent events the screen keeps.
const RECENT: usize = 12;
/// Changes arriving within this window are drawn together.
const SETTLE: Duration = Duration::from_millis(150);

/// Where and how the view is shown.
pub struct LiveView {
    /// Redraw a screen (terminal) or print change lines.
    pub terminal: bool,
    /// The lines above the view on a terminal (kubeconfigs, what to try).
    pub header: String,
    /// Entries per bucket, for the fill bars.
    pub limit: Option<u32>,
    pub clock: Clock,
    /// When this run started: events from before are not shown.
    pub started: chrono::DateTime<chrono::Utc>,
    /// Every seed, by name, with a client of its API server.
    pub seeds: Vec<(String, Client)>,
    /// Where the seeds keep their Velero objects and the name of their default location.
    pub velero_namespace: String,
    pub default_location: String,
}

/// One seed's Velero objects as the view caches them.
struct SeedCaches {
    name: String,
    locations: Store<BackupStorageLocation>,
    backups: Store<Backup>,
}

fn cache<K>(api: Api<K>, changed: Arc<Notify>) -> (Store<K>, impl std::future::Future<Output = ()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let fill = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .backoff(WatchBackoff::default())
        .for_each(move |event| {
            if let Err(e) = event {
                tracing::debug!(error = %e, "live view watch error; retrying");
            } else {
                changed.notify_one();
            }
            std::future::ready(())
        });
    (store, fill)
}

/// The objects of a store, for the pure view functions.
fn owned<K: kube::Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> Vec<K> {
    store.state().iter().map(|o| (**o).clone()).collect()
}

/// The terminal's size changes (SIGWINCH), when the screen is drawn on one.
#[cfg(unix)]
fn window_changes(terminal: bool) -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    terminal
        .then(|| signal(SignalKind::window_change()).ok())
        .flatten()
}

#[cfg(not(unix))]
fn window_changes(_terminal: bool) -> Option<()> {
    None
}

/// The next size change; never, without a terminal.
#[cfg(unix)]
async fn resized(changes: &mut Option<tokio::signal::unix::Signal>) {
    match changes {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(not(unix))]
async fn resized(_changes: &mut Option<()>) {
    std::future::pending().await
}

impl LiveView {
    /// Shows the garden's state until `stop` is cancelled.
    pub async fn run(self, garden: Client, stop: CancellationToken) {
        let changed = Arc::new(Notify::new());
        let (buckets, fill_buckets) =
            cache(Api::<BackupBucket>::all(garden.clone()), changed.clone());
        let (entries, fill_entries) =
            cache(Api::<BackupEntry>::all(garden.clone()), changed.clone());
        let (shoots, fill_shoots) = cache(Api::<Shoot>::all(garden.clone()), changed.clone());
        let (events, fill_events) = cache(Api::<Event>::all(garden), changed.clone());
        let mut seeds = Vec::new();
        let mut fill_seeds = Vec::new();
        for (name, client) in &self.seeds {
            let ns = self.velero_namespace.as_str();
            let (locations, fill_l) = cache(Api::namespaced(client.clone(), ns), changed.clone());
            let (backups, fill_b) = cache(Api::namespaced(client.clone(), ns), changed.clone());
            fill_seeds.push(async move { tokio::join!(fill_l, fill_b) });
            seeds.push(SeedCaches {
                name: name.clone(),
                locations,
                backups,
            });
        }
        let draw = async {
            let _ = tokio::join!(
                buckets.wait_until_ready(),
                entries.wait_until_ready(),
                shoots.wait_until_ready(),
                events.wait_until_ready()
            );
            let mut last = Snapshot::default();
            let mut recent: Vec<String> = Vec::new();
            let mut seen = HashSet::new();
            // What the garden still holds of objects deleted before this start is not news.
            let uids = |objects: Vec<Option<String>>| -> HashSet<String> {
                objects.into_iter().flatten().collect()
            };
            let live = std::collections::HashMap::from([
                (
                    "BackupBucket",
                    uids(
                        buckets
                            .state()
                            .iter()
                            .map(|o| o.metadata.uid.clone())
                            .collect(),
                    ),
                ),
                (
                    "BackupEntry",
                    uids(
                        entries
                            .state()
                            .iter()
                            .map(|o| o.metadata.uid.clone())
                            .collect(),
                    ),
                ),
                (
                    "Shoot",
                    uids(
                        shoots
                            .state()
                            .iter()
                            .map(|o| o.metadata.uid.clone())
                            .collect(),
                    ),
                ),
            ]);
            forget_events_of_gone_objects(&owned(&events), &live, &mut seen);
            forget_events_before(&owned(&events), self.started, &mut seen);
            let mut resizes = window_changes(self.terminal);
            let mut first = true;
            let mut last_summary = String::new();
            loop {
                // One copy of each cache's objects, for the screen and the summary.
                let (all_buckets, all_entries) = (owned(&buckets), owned(&entries));
                let seed_objects: Vec<(Vec<BackupStorageLocation>, Vec<Backup>)> = seeds
                    .iter()
                    .map(|s| (owned(&s.locations), owned(&s.backups)))
                    .collect();
                let mut next = Snapshot::from_objects(&all_buckets, &all_entries);
                next.backups = seeds
                    .iter()
                    .zip(&seed_objects)
                    .map(|(s, (locations, backups))| {
                        SeedBackups::from_objects(
                            &s.name,
                            &self.default_location,
                            locations,
                            backups,
                        )
                    })
                    .collect();
                let now = self.clock.now();
                let warnings = new_warnings(&owned(&events), &mut seen, now);
                // `granary status`'s summary, from what the view already watches.
                let health = crate::cli::status::assess(
                    &crate::cli::status::GardenView {
                        shoots: owned(&shoots),
                        entries: all_entries,
                        buckets: all_buckets,
                        shoot_warnings: Default::default(),
                    },
                    &seeds
                        .iter()
                        .zip(seed_objects)
                        .map(|(s, (locations, backups))| crate::cli::status::SeedView {
                            name: s.name.clone(),
                            locations,
                            backups,
                            ..Default::default()
                        })
                        .collect::<Vec<_>>(),
                    now,
                );
                let summary = format!("health: {}", crate::cli::status::summary(&health));
                if next != last || first || !warnings.is_empty() || summary != last_summary {
                    let mut lines = changes(&last, &next, now);
                    lines.extend(warnings);
                    if summary != last_summary {
                        lines.push(format!("{} {summary}", now.format("%H:%M:%S")));
                    }
                    self.show(&next, &lines, &mut recent, &summary);
                    last = next;
                    last_summary = summary;
                    first = false;
                }
                // A change of the landscape, or of the terminal's size: the screen is
                // drawn again for it.
                tokio::select! {
                    _ = changed.notified() => tokio::time::sleep(SETTLE).await,
                    _ = resized(&mut resizes) => first = true,
                }
            }
        };
        tokio::select! {
            _ = async {
                tokio::join!(
                    fill_buckets,
                    fill_entries,
                    fill_shoots,
                    fill_events,
                    futures::future::join_all(fill_seeds),
                    draw
                )
            } => {}
            _ = stop.cancelled() => {}
        }
    }

    fn show(&self, snapshot: &Snapshot, lines: &[String], recent: &mut Vec<String>, summary: &str) {
        let mut out = std::io::stdout().lock();
        if self.terminal {
            recent.extend(lines.iter().cloned());
            let skip = recent.len().saturating_sub(RECENT);
            recent.drain(..skip);
            // Rows and columns; a terminal that does not say gets the smallest usual one.
            let (rows, columns) = console::Term::stdout().size_checked().unwrap_or((24, 80));
            // The header, and `granary status`'s summary under it.
            let header = format!("{}{summary}\n", self.header);
            let screen = render_fitted(
                &header,
                snapshot,
                self.limit,
                recent,
                columns as usize,
                // The cursor stays on the line after the last.
                (rows as usize).saturating_sub(1),
            );
            // Home, draw, clear what is left of an earlier, longer screen.
            let _ = write!(out, "\x1b[H\x1b[2J{screen}");
        } else {
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
        }
        let _ = out.flush();
    }
}

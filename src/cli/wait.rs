//! `--wait` of `backup create` and `restore create`: one follower for both. It polls the
//! object until its phase is terminal and tells each new state, in one of two forms:
//! - text (the default): velero's sentences on stdout, and the progress on stderr, a
//!   live line on a terminal or one line per change otherwise;
//! - `-o json`: only JSON on stdout, one object per state change (the last one is the
//!   terminal state), for programs; the sentences go to stderr.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};
use kube::{Api, Resource};
use serde_json::json;

use super::output::OutputFormat;
use granary_api::velero::{Backup, BackupPhase, Restore};

/// How `--wait` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutput {
    Text,
    Json,
}

impl WaitOutput {
    /// From `-o` given with `--wait`: `json` for JSON lines, nothing (or `table`) for
    /// text; `yaml` has no line form.
    pub fn of(format: Option<OutputFormat>) -> anyhow::Result<WaitOutput> {
        match format {
            None | Some(OutputFormat::Table) => Ok(WaitOutput::Text),
            Some(OutputFormat::Json) => Ok(WaitOutput::Json),
            Some(OutputFormat::Yaml) => {
                bail!("--output yaml: with --wait, use -o json (one JSON object per state change)")
            }
        }
    }

    /// Prints a sentence for people: stdout in text mode, stderr beside JSON lines.
    pub fn say(self, text: &str) {
        match self {
            WaitOutput::Text => println!("{text}"),
            WaitOutput::Json => eprintln!("{text}"),
        }
    }
}

/// What a person or a program sees of one state of a backup or restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitState {
    pub phase: String,
    pub queue_position: Option<i64>,
    pub waiting_for: Option<String>,
    pub items_done: Option<i64>,
    pub total_items: Option<i64>,
}

impl WaitState {
    /// The state's words: `Queued, position 2 in the queue`, `New: waiting for …`,
    /// `InProgress`.
    pub fn message(&self) -> String {
        let mut m = match self.queue_position {
            Some(p) if p > 0 => format!("{}, position {p} in the queue", self.phase),
            _ => self.phase.clone(),
        };
        if let Some(why) = &self.waiting_for {
            m.push_str(": waiting for ");
            m.push_str(why);
        }
        m
    }

    /// The line printed for a change: `<name>: <message>[, <done>/<total> items]`.
    pub fn line(&self, name: &str) -> String {
        let items = match (self.items_done, self.total_items) {
            (Some(done), Some(total)) => format!(", {done}/{total} items"),
            _ => String::new(),
        };
        format!("{name}: {}{items}", self.message())
    }
}

/// A kind `--wait` follows.
pub trait Followed:
    Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    /// `backup` or `restore`: the JSON key naming the object, and the word in errors.
    const WORD: &'static str;
    /// The progress field of the kind's status (`itemsBackedUp`, `itemsRestored`).
    const DONE_FIELD: &'static str;
    fn state(&self) -> WaitState;
    fn terminal(&self) -> bool;
}

impl Followed for Backup {
    const WORD: &'static str = "backup";
    const DONE_FIELD: &'static str = "itemsBackedUp";

    fn state(&self) -> WaitState {
        let s = self.status.clone().unwrap_or_default();
        let progress = s.progress.unwrap_or_default();
        WaitState {
            phase: super::describe::shown_phase(self),
            queue_position: s.queue_position.filter(|p| *p > 0),
            waiting_for: None,
            items_done: progress.items_backed_up,
            total_items: progress.total_items,
        }
    }

    fn terminal(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(BackupPhase::is_terminal)
    }
}

impl Followed for Restore {
    const WORD: &'static str = "restore";
    const DONE_FIELD: &'static str = "itemsRestored";

    fn state(&self) -> WaitState {
        let progress = self.status.as_ref().and_then(|s| s.progress.clone());
        WaitState {
            phase: super::restore_describe::phase(self).to_string(),
            queue_position: None,
            waiting_for: super::restore_describe::restore_waiting_for(self),
            items_done: progress.as_ref().and_then(|p| p.items_restored),
            total_items: progress.and_then(|p| p.total_items),
        }
    }

    fn terminal(&self) -> bool {
        super::restore_describe::phase(self).is_terminal()
    }
}

/// One JSON line of a state.
pub fn json_line<K: Followed>(name: &str, state: &WaitState) -> serde_json::Value {
    json!({
        K::WORD: name,
        "phase": state.phase,
        "queuePosition": state.queue_position,
        "waitingFor": state.waiting_for,
        K::DONE_FIELD: state.items_done,
        "totalItems": state.total_items,
    })
}

enum Display {
    Bar(ProgressBar),
    Lines,
    Json,
}

impl Display {
    fn show<K: Followed>(&self, name: &str, state: &WaitState) {
        match self {
            Display::Json => println!("{}", json_line::<K>(name, state)),
            Display::Lines => eprintln!("{}", state.line(name)),
            Display::Bar(bar) => {
                bar.set_message(state.message());
                match state.total_items {
                    Some(total) if total > 0 => {
                        bar.set_style(
                            ProgressStyle::with_template(
                                "{spinner} {prefix}: {msg} [{bar:30}] {pos}/{len} items ({elapsed})",
                            )
                            .expect("the template is valid")
                            .progress_chars("=> "),
                        );
                        bar.set_length(u64::try_from(total).unwrap_or(0));
                        bar.set_position(u64::try_from(state.items_done.unwrap_or(0)).unwrap_or(0));
                    }
                    _ => bar.set_style(
                        ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})")
                            .expect("the template is valid"),
                    ),
                }
            }
        }
    }
}

/// How long the API server may stay unreachable before `--wait` gives up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// Polls `name` every `every` until its phase is terminal; returns it then.
pub async fn wait<K: Followed>(
    api: &Api<K>,
    name: &str,
    every: Duration,
    output: WaitOutput,
) -> anyhow::Result<K> {
    let display = match output {
        WaitOutput::Json => Display::Json,
        WaitOutput::Text if std::io::stderr().is_terminal() => {
            let bar = ProgressBar::new_spinner().with_prefix(name.to_string());
            bar.enable_steady_tick(Duration::from_millis(120));
            Display::Bar(bar)
        }
        WaitOutput::Text => Display::Lines,
    };
    let mut last: Option<WaitState> = None;
    let mut failing_since: Option<std::time::Instant> = None;
    let result = loop {
        let object = match api.get_opt(name).await {
            Ok(Some(o)) => o,
            Ok(None) => {
                break Err(anyhow::anyhow!(
                    "{} {name} was deleted while waiting for it",
                    K::WORD
                ));
            }
            // A dropped connection or a restarting API server is waited out for a while.
            Err(e) if failing_since.is_some_and(|t| t.elapsed() > GIVE_UP_AFTER) => {
                break Err(anyhow::anyhow!("watching {} {name}: {e}", K::WORD));
            }
            Err(_) => {
                failing_since.get_or_insert_with(std::time::Instant::now);
                tokio::time::sleep(every).await;
                continue;
            }
        };
        failing_since = None;
        let state = object.state();
        if last.as_ref() != Some(&state) {
            display.show::<K>(name, &state);
            last = Some(state);
        }
        if object.terminal() {
            break Ok(object);
        }
        tokio::time::sleep(every).await;
    };
    if let Display::Bar(bar) = display {
        // The bar's last frame is replaced by a plain line: no half-drawn frame is left
        // between it and what is printed next.
        bar.finish_and_clear();
        if let Some(state) = &last {
            eprintln!("{}", state.line(name));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{
        BackupProgress, BackupSpec, BackupStatus, RestorePhase, RestoreProgress, RestoreSpec,
        RestoreStatus,
    };

    #[test]
    fn backups_and_restores_read_alike() {
        let mut b = Backup::new("b", BackupSpec::default());
        assert_eq!(b.state().message(), "New");
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::Queued),
            queue_position: Some(3),
            ..BackupStatus::default()
        });
        assert_eq!(b.state().line("b"), "b: Queued, position 3 in the queue");
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::InProgress),
            progress: Some(BackupProgress {
                total_items: Some(10),
                items_backed_up: Some(4),
            }),
            ..BackupStatus::default()
        });
        assert_eq!(b.state().line("b"), "b: InProgress, 4/10 items");
        assert_eq!(
            json_line::<Backup>("b", &b.state()),
            json!({"backup": "b", "phase": "InProgress", "queuePosition": null,
                   "waitingFor": null, "itemsBackedUp": 4, "totalItems": 10})
        );
        let mut r = Restore::new("r", RestoreSpec::default());
        r.status = Some(RestoreStatus {
            phase: Some(RestorePhase::InProgress),
            progress: Some(RestoreProgress {
                total_items: Some(5),
                items_restored: Some(5),
            }),
            ..RestoreStatus::default()
        });
        assert_eq!(r.state().line("r"), "r: InProgress, 5/5 items");
        assert_eq!(
            json_line::<Restore>("r", &r.state()),
            json!({"restore": "r", "phase": "InProgress", "queuePosition": null,
                   "waitingFor": null, "itemsRestored": 5, "totalItems": 5})
        );
    }

    #[test]
    fn json_lines_are_asked_for_with_o_json() {
        assert_eq!(WaitOutput::of(None).unwrap(), WaitOutput::Text);
        assert_eq!(
            WaitOutput::of(Some(OutputFormat::Json)).unwrap(),
            WaitOutput::Json
        );
        assert!(WaitOutput::of(Some(OutputFormat::Yaml)).is_err());
    }
}

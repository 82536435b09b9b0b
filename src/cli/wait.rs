//! `granary backup create --wait`: follows the Backup until it reaches a terminal phase.
//! On a terminal a live line (indicatif) shows the phase, the queue position and the
//! items backed up; otherwise one JSON object per change goes to stdout, so a pipeline
//! can follow the same states.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use kube::Api;
use serde_json::json;

use granary_api::velero::{Backup, BackupPhase};

/// What a person or a pipeline sees of one state of the backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitState {
    pub phase: String,
    pub queue_position: Option<i64>,
    pub items_backed_up: Option<i64>,
    pub total_items: Option<i64>,
}

impl WaitState {
    pub fn of(b: &Backup) -> Self {
        let s = b.status.clone().unwrap_or_default();
        let progress = s.progress.unwrap_or_default();
        WaitState {
            phase: super::describe::shown_phase(b),
            queue_position: s.queue_position.filter(|p| *p > 0),
            items_backed_up: progress.items_backed_up,
            total_items: progress.total_items,
        }
    }

    /// The live line's message: `Queued, position 2 in the queue`, `InProgress`.
    pub fn message(&self) -> String {
        match self.queue_position {
            Some(p) if self.phase == "Queued" => format!("Queued, position {p} in the queue"),
            _ => self.phase.clone(),
        }
    }

    /// One JSON line.
    pub fn json(&self, name: &str) -> serde_json::Value {
        json!({
            "backup": name,
            "phase": self.phase,
            "queuePosition": self.queue_position,
            "itemsBackedUp": self.items_backed_up,
            "totalItems": self.total_items,
        })
    }
}

enum Display {
    Bar(ProgressBar),
    JsonLines,
}

impl Display {
    fn show(&self, name: &str, state: &WaitState) {
        match self {
            Display::JsonLines => println!("{}", state.json(name)),
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
                        bar.set_position(
                            u64::try_from(state.items_backed_up.unwrap_or(0)).unwrap_or(0),
                        );
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

/// Whether the live line is drawn (stderr is a terminal) or JSON lines are written.
pub fn interactive() -> bool {
    std::io::stderr().is_terminal()
}

/// Polls backup `name` every `every` until its phase is terminal; returns it then.
pub async fn wait(api: &Api<Backup>, name: &str, every: Duration) -> anyhow::Result<Backup> {
    let display = if interactive() {
        let bar = ProgressBar::new_spinner().with_prefix(name.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Display::Bar(bar)
    } else {
        Display::JsonLines
    };
    let mut last: Option<WaitState> = None;
    let mut failing_since: Option<std::time::Instant> = None;
    let result = loop {
        let backup = match api.get_opt(name).await {
            Ok(Some(b)) => b,
            Ok(None) => {
                break Err(anyhow::anyhow!(
                    "backup {name} was deleted while waiting for it"
                ));
            }
            // A dropped connection or a restarting API server is waited out for a while.
            Err(e) if failing_since.is_some_and(|t| t.elapsed() > GIVE_UP_AFTER) => {
                break Err(anyhow::anyhow!("watching backup {name}: {e}"));
            }
            Err(_) => {
                failing_since.get_or_insert_with(std::time::Instant::now);
                tokio::time::sleep(every).await;
                continue;
            }
        };
        failing_since = None;
        let state = WaitState::of(&backup);
        if last.as_ref() != Some(&state) {
            display.show(name, &state);
            last = Some(state);
        }
        let phase = backup.status.as_ref().and_then(|s| s.phase);
        if phase.is_some_and(BackupPhase::is_terminal) {
            break Ok(backup);
        }
        tokio::time::sleep(every).await;
    };
    if let Display::Bar(bar) = display {
        // The bar's last frame is replaced by a plain line: no half-drawn frame is left
        // between it and what is printed next.
        bar.finish_and_clear();
        if let Some(state) = &last {
            let items = match (state.items_backed_up, state.total_items) {
                (Some(done), Some(total)) => format!(", {done}/{total} items"),
                _ => String::new(),
            };
            eprintln!("{name}: {}{items}", state.message());
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::velero::{BackupProgress, BackupSpec, BackupStatus};

    #[test]
    fn states_and_lines() {
        let mut b = Backup::new("b", BackupSpec::default());
        assert_eq!(WaitState::of(&b).message(), "New");
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::Queued),
            queue_position: Some(3),
            ..BackupStatus::default()
        });
        assert_eq!(
            WaitState::of(&b).message(),
            "Queued, position 3 in the queue"
        );
        b.status = Some(BackupStatus {
            phase: Some(BackupPhase::InProgress),
            progress: Some(BackupProgress {
                total_items: Some(10),
                items_backed_up: Some(4),
            }),
            ..BackupStatus::default()
        });
        let s = WaitState::of(&b);
        assert_eq!(
            s.json("b"),
            json!({"backup": "b", "phase": "InProgress", "queuePosition": null,
                   "itemsBackedUp": 4, "totalItems": 10})
        );
    }
}

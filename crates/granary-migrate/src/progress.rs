//! What a migration tells the person or the pipeline running it: a progress line
//! (objects, bytes, rate, ETA) redrawn in place on a terminal, JSON lines otherwise, and
//! the final [`MigrationReport`].

use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::phase::Phase;
use super::plan::CopyMode;

/// Where progress goes.
pub enum Output {
    /// A progress line on stderr, redrawn in place.
    Terminal,
    /// One JSON object per line on this writer.
    JsonLines(Mutex<Box<dyn Write + Send>>),
    /// Nothing (library callers, tests).
    Silent,
}

impl Output {
    /// A terminal line when stderr is a terminal, JSON lines on stdout otherwise.
    pub fn detect() -> Output {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            Output::Terminal
        } else {
            Output::JsonLines(Mutex::new(Box::new(std::io::stdout())))
        }
    }

    /// Writes one event (JSON lines) or a line of text (terminal).
    pub fn event(&self, value: serde_json::Value, text: impl FnOnce() -> String) {
        match self {
            Output::Terminal => eprintln!("\r\x1b[2K{}", text()),
            Output::JsonLines(w) => {
                let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                let _ = writeln!(w, "{value}");
                let _ = w.flush();
            }
            Output::Silent => {}
        }
    }

    pub fn phase(&self, entry: &str, phase: Phase) {
        self.event(
            json!({"event": "phase", "entry": entry, "phase": phase.to_string()}),
            || format!("{entry}: phase {phase}"),
        );
    }
}

/// Progress of one copy pass.
pub struct CopyProgress<'a> {
    output: &'a Output,
    total_objects: u64,
    total_bytes: u64,
    done_objects: u64,
    done_bytes: u64,
    started: Instant,
    last_shown: Option<Instant>,
}

/// How often progress is shown at most.
const SHOW_EVERY: Duration = Duration::from_millis(500);

impl<'a> CopyProgress<'a> {
    pub fn new(output: &'a Output, total_objects: u64, total_bytes: u64) -> Self {
        CopyProgress {
            output,
            total_objects,
            total_bytes,
            done_objects: 0,
            done_bytes: 0,
            started: Instant::now(),
            last_shown: None,
        }
    }

    pub fn advance(&mut self, bytes: u64) {
        self.done_objects += 1;
        self.done_bytes += bytes;
        let due = self.last_shown.is_none_or(|t| t.elapsed() >= SHOW_EVERY);
        if due || self.done_objects == self.total_objects {
            self.show();
        }
    }

    fn show(&mut self) {
        self.last_shown = Some(Instant::now());
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done_objects as f64 / secs;
        let byte_rate = self.done_bytes as f64 / secs;
        let left = self.total_objects.saturating_sub(self.done_objects);
        let eta = if rate > 0.0 { left as f64 / rate } else { 0.0 };
        match self.output {
            Output::Terminal => {
                let width = 30usize;
                let filled = if self.total_objects == 0 {
                    width
                } else {
                    (self.done_objects as usize * width) / self.total_objects as usize
                };
                eprint!(
                    "\r\x1b[2K[{}{}] {}/{} objects, {}/{}, {:.0} obj/s, {}/s, ETA {:.0}s",
                    "#".repeat(filled),
                    "-".repeat(width - filled),
                    self.done_objects,
                    self.total_objects,
                    human_bytes(self.done_bytes),
                    human_bytes(self.total_bytes),
                    rate,
                    human_bytes(byte_rate as u64),
                    eta
                );
            }
            other => other.event(
                json!({
                    "event": "progress",
                    "objects": self.done_objects,
                    "totalObjects": self.total_objects,
                    "bytes": self.done_bytes,
                    "totalBytes": self.total_bytes,
                    "objectsPerSecond": (rate * 10.0).round() / 10.0,
                    "etaSeconds": eta.round(),
                }),
                String::new,
            ),
        }
    }

    pub fn finish(&self) {
        if matches!(self.output, Output::Terminal) && self.total_objects > 0 {
            eprintln!();
        }
    }
}

/// `1.5 MiB`-style sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Counts of what a run did against the object stores. Summed over runs, the copy
/// requests of one migration equal the objects it copied: nothing is copied twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyCounters {
    /// Server-side copy requests sent.
    pub server_side_copies: u64,
    /// Objects streamed through this process.
    pub streamed_copies: u64,
    /// Bytes that passed through this process (0 for server-side copies).
    pub bytes_through_process: u64,
    /// Pending objects found already in the destination by a HEAD (a crash's copies).
    pub skipped_present: u64,
    /// Source objects that were gone when copied.
    pub not_found: u64,
    /// Bytes copied (either way).
    pub bytes_copied: u64,
}

impl CopyCounters {
    pub fn copy_requests(&self) -> u64 {
        self.server_side_copies + self.streamed_copies
    }

    pub fn subtract(&mut self, o: &CopyCounters) {
        self.server_side_copies -= o.server_side_copies;
        self.streamed_copies -= o.streamed_copies;
        self.bytes_through_process -= o.bytes_through_process;
        self.skipped_present -= o.skipped_present;
        self.not_found -= o.not_found;
        self.bytes_copied -= o.bytes_copied;
    }

    pub fn add(&mut self, o: &CopyCounters) {
        self.server_side_copies += o.server_side_copies;
        self.streamed_copies += o.streamed_copies;
        self.bytes_through_process += o.bytes_through_process;
        self.skipped_present += o.skipped_present;
        self.not_found += o.not_found;
        self.bytes_copied += o.bytes_copied;
    }
}

/// The outcome of one `granary migrate entry` run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationReport {
    pub entry: String,
    pub source_bucket: String,
    pub destination_bucket: String,
    /// The phase reached (`Done` when finished, `Plan` for a dry run).
    pub phase: String,
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy_mode: Option<CopyMode>,
    /// Objects in the manifest, by state.
    pub objects: u64,
    pub bytes: u64,
    pub copied: u64,
    pub not_found: u64,
    pub pending: u64,
    /// What this run did.
    pub counters: CopyCounters,
    /// etcd downtime of the cut-over (scale-down to ready again), when it happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downtime_seconds: Option<f64>,
    /// Dry run: the rough duration of the copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_seconds: Option<f64>,
    /// Nothing to do: the entry is already in the destination bucket.
    pub already_there: bool,
}

impl std::fmt::Display for MigrationReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.already_there {
            return writeln!(
                f,
                "{} is already in bucket {}; nothing to do",
                self.entry, self.destination_bucket
            );
        }
        let title = if self.dry_run { "plan" } else { "migration" };
        writeln!(
            f,
            "{title} of {}: {} -> {} (phase {})",
            self.entry, self.source_bucket, self.destination_bucket, self.phase
        )?;
        if let Some(mode) = self.copy_mode {
            writeln!(f, "  copy:      {mode:?}")?;
        }
        writeln!(
            f,
            "  objects:   {} ({}), copied {}, not found {}, pending {}",
            self.objects,
            human_bytes(self.bytes),
            self.copied,
            self.not_found,
            self.pending
        )?;
        if let Some(s) = self.estimated_seconds {
            writeln!(f, "  estimate:  {s:.1}s")?;
        }
        if !self.dry_run {
            let c = &self.counters;
            writeln!(
                f,
                "  this run:  {} copy requests, {} through this process, {} already present, {} not found",
                c.copy_requests(),
                human_bytes(c.bytes_through_process),
                c.skipped_present,
                c.not_found
            )?;
        }
        if let Some(d) = self.downtime_seconds {
            writeln!(f, "  downtime:  {d:.1}s")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn json_lines_are_one_object_each() {
        #[derive(Clone, Default)]
        struct Buf(std::sync::Arc<Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("not poisoned").extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = Output::JsonLines(Mutex::new(Box::new(buf.clone())));
        let mut p = CopyProgress::new(&out, 2, 10);
        p.advance(4);
        p.advance(6);
        out.phase("ns/e", Phase::Copy);
        let text = String::from_utf8(buf.0.lock().expect("not poisoned").clone()).expect("utf8");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1]["objects"], 2);
        assert_eq!(lines[1]["bytes"], 10);
        assert_eq!(lines[2]["phase"], "Copy");
    }
}

//! The backup's own log and its results, kept as Velero keeps them: every line goes to
//! `<name>-logs.gz` (logrus' text format), and every warning and error is also counted
//! and filed in `<name>-results.gz` under the namespace it concerns, `cluster` for
//! cluster-scoped items, or `velero` for the backup as a whole and for resources
//! across namespaces (Velero's log counter hook). Warnings and errors also go to the process log through `tracing`.

use std::sync::Mutex;
use std::time::Instant;

use chrono::{DateTime, SecondsFormat, Utc};

use granary_velero::files::Results;

/// A line's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warning,
    Error,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// What a line is about: the backup as a whole, one item, or one resource.
#[derive(Clone, Copy, Debug)]
pub enum Subject<'a> {
    Backup,
    /// Resource (`resource.group`), namespace (`""` when cluster-scoped), name.
    Item(&'a str, &'a str, &'a str),
    /// A whole resource (`resource.group`), in a namespace or everywhere (`""`).
    Resource(&'a str, &'a str),
}

#[derive(Default)]
struct Inner {
    lines: Vec<String>,
    results: Results,
}

/// The log of one running backup. Shared by the runner's tasks.
pub struct Logbook {
    /// The logrus field naming the run: `backup` or `restore`.
    key: &'static str,
    backup: String,
    start: DateTime<Utc>,
    started: Instant,
    inner: Mutex<Inner>,
}

/// Quotes a logrus value when it needs it.
fn field(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/:".contains(c))
    {
        v.to_owned()
    } else {
        format!("{v:?}")
    }
}

impl Logbook {
    /// `backup` is `namespace/name`; `start` the run's start time (the caller's clock).
    pub fn new(backup: String, start: DateTime<Utc>) -> Self {
        Self::named("backup", backup, start)
    }

    /// The log of a run named by the logrus field `key` (`restore=velero/r1`).
    pub fn named(key: &'static str, name: String, start: DateTime<Utc>) -> Self {
        Self {
            key,
            backup: name,
            start,
            started: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The time now, as `start` plus the monotonic time since.
    pub fn now(&self) -> DateTime<Utc> {
        self.start
            + chrono::TimeDelta::from_std(self.started.elapsed())
                .unwrap_or(chrono::TimeDelta::zero())
    }

    pub fn info(&self, subject: Subject<'_>, msg: &str) {
        self.log(Level::Info, subject, msg);
    }

    pub fn warn(&self, subject: Subject<'_>, msg: &str) {
        self.log(Level::Warning, subject, msg);
    }

    pub fn error(&self, subject: Subject<'_>, msg: &str) {
        self.log(Level::Error, subject, msg);
    }

    pub fn log(&self, level: Level, subject: Subject<'_>, msg: &str) {
        let time = self.now().to_rfc3339_opts(SecondsFormat::Secs, true);
        // logrus sorts fields by key.
        let mut fields: Vec<(&str, &str)> = vec![(self.key, &self.backup)];
        let (namespace, summary) = match subject {
            Subject::Backup => (None, msg.to_owned()),
            Subject::Item(resource, ns, name) => {
                fields.push(("name", name));
                if !ns.is_empty() {
                    fields.push(("namespace", ns));
                }
                fields.push(("resource", resource));
                let id = if ns.is_empty() {
                    name.to_owned()
                } else {
                    format!("{ns}/{name}")
                };
                (Some(ns), format!("{resource} {id}: {msg}"))
            }
            Subject::Resource(resource, ns) => {
                if !ns.is_empty() {
                    fields.push(("namespace", ns));
                }
                fields.push(("resource", resource));
                // About a whole resource: filed under its namespace, else the backup's.
                ((!ns.is_empty()).then_some(ns), format!("{resource}: {msg}"))
            }
        };
        fields.sort_by_key(|(k, _)| *k);
        let mut line = format!(
            "time=\"{time}\" level={} msg={}",
            level.as_str(),
            format_args!("{msg:?}")
        );
        for (k, v) in fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(&field(v));
        }
        match level {
            Level::Info => tracing::debug!(run = %self.backup, kind = self.key, "{summary}"),
            Level::Warning => tracing::warn!(run = %self.backup, kind = self.key, "{summary}"),
            Level::Error => tracing::error!(run = %self.backup, kind = self.key, "{summary}"),
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.lines.push(line);
        let set = match level {
            Level::Info => return,
            Level::Warning => &mut inner.results.warnings,
            Level::Error => &mut inner.results.errors,
        };
        match namespace {
            None => set.add_velero(summary),
            Some(ns) => set.add(ns, summary),
        }
    }

    /// (errors, warnings) so far.
    pub fn counts(&self) -> (u32, u32) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (
            inner.results.errors.count() as u32,
            inner.results.warnings.count() as u32,
        )
    }

    /// The lines and results, ending the log.
    pub fn take(&self) -> (Vec<String>, Results) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = std::mem::take(&mut *inner);
        (inner.lines, inner.results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_results() {
        let start = DateTime::parse_from_rfc3339("2026-11-24T01:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let log = Logbook::new("velero/b1".into(), start);
        log.info(Subject::Backup, "Starting backup");
        log.warn(
            Subject::Resource("pods", ""),
            "Cannot find resource 'ns/x'.",
        );
        log.error(Subject::Item("configmaps", "ns1", "c"), "boom");
        log.error(Subject::Item("persistentvolumes", "", "pv"), "bad");
        log.error(Subject::Backup, "store down");
        assert_eq!(log.counts(), (3, 1));
        let (lines, results) = log.take();
        assert_eq!(lines.len(), 5);
        assert!(
            lines[0].starts_with(
                "time=\"2026-11-24T01:00:00Z\" level=info msg=\"Starting backup\" backup=velero/b1"
            ),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[2].split_once(" level=").map(|x| x.1),
            Some("error msg=\"boom\" backup=velero/b1 name=c namespace=ns1 resource=configmaps")
        );
        assert_eq!(
            results.errors.namespaces["ns1"],
            vec!["configmaps ns1/c: boom".to_owned()]
        );
        assert_eq!(
            results.errors.cluster,
            vec!["persistentvolumes pv: bad".to_owned()]
        );
        assert_eq!(results.errors.velero, vec!["store down".to_owned()]);
        assert_eq!(
            results.warnings.velero,
            vec!["pods: Cannot find resource 'ns/x'.".to_owned()]
        );
    }
}

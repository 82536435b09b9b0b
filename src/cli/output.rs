//! How the CLI prints: velero's tables (upper-case headers, columns three spaces apart),
//! its time formats, and objects as JSON or YAML. Pure functions over plain data.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

/// `-o`: a table (or describe text) for people, JSON or YAML for programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
    Yaml,
}

/// `-o` of a `create` command: `json|yaml` print the object and create nothing, as velero
/// does; `table` (velero's default) or none creates it.
pub fn print_only(o: Option<OutputFormat>) -> Option<OutputFormat> {
    o.filter(|o| *o != OutputFormat::Table)
}

/// Lays out rows under headers, each column as wide as its widest cell plus three
/// spaces (kubectl's and velero's tabwriter settings); no trailing spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < cells.len() {
                let pad = widths[i] - cell.chars().count() + 3;
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A timestamp as Go prints a `time.Time` in UTC (`2026-01-02 15:04:05 +0000 UTC`).
pub fn go_time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

/// kubectl's `ShortHumanDuration`: `42s`, `5m`, `3h`, `12d`, `2y`.
pub fn short_human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 24 {
        return format!("{hours}h");
    }
    if hours < 24 * 365 {
        return format!("{}d", hours / 24);
    }
    format!("{}y", hours / 24 / 365)
}

/// velero's `humanReadableTimeFromNow`: `n/a`, `now`, `29d`, or `3h ago`.
pub fn time_from_now(when: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match when {
        None => "n/a".into(),
        Some(t) if t == now => "now".into(),
        Some(t) if t > now => short_human_duration(t - now),
        Some(t) => format!("{} ago", short_human_duration(now - t)),
    }
}

/// One object, or a `List` of several, as JSON or YAML (velero prints a `v1` `List` when
/// more than one object matches).
pub fn objects<T: Serialize>(
    format: OutputFormat,
    items: &[T],
    single: bool,
) -> anyhow::Result<String> {
    let value = if single && items.len() == 1 {
        serde_json::to_value(&items[0])?
    } else {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
    };
    Ok(match format {
        OutputFormat::Json => serde_json::to_string_pretty(&value)? + "\n",
        OutputFormat::Yaml => serde_saphyr::to_string(&value)?,
        OutputFormat::Table => unreachable!("tables are printed by the command itself"),
    })
}

/// What every `get` prints for the objects it found (`names`: how many were asked for
/// by name), one behaviour for all kinds: a table of them (kubectl's "No <kind> found
/// in namespace <ns>." on stderr, exit 0, when a listing finds none), or them as
/// json/yaml (one named object alone, else a `List`, empty too). Named objects that
/// were not found are the caller's error, after this.
pub fn list<T: Serialize>(
    format: OutputFormat,
    items: &[T],
    names: usize,
    plural: &str,
    namespace: &str,
    table: impl FnOnce(&[T]) -> String,
) -> anyhow::Result<String> {
    match format {
        OutputFormat::Table if items.is_empty() => {
            if names == 0 {
                eprintln!("No {plural} found in namespace {namespace}.");
            }
            Ok(String::new())
        }
        OutputFormat::Table => Ok(table(items)),
        other => objects(other, items, names == 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn table_pads_columns_three_spaces() {
        let t = table(
            &["NAME", "STATUS", "X"],
            &[
                vec!["a".into(), "Completed".into(), "".into()],
                vec!["longer-name".into(), "New".into(), "1".into()],
            ],
        );
        assert_eq!(
            t,
            "NAME          STATUS      X\na             Completed\nlonger-name   New         1\n"
        );
    }

    #[test]
    fn times_as_velero_prints_them() {
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(go_time(&now), "2026-01-02 03:04:05 +0000 UTC");
        assert_eq!(time_from_now(None, now), "n/a");
        assert_eq!(time_from_now(Some(now), now), "now");
        assert_eq!(time_from_now(Some(now + TimeDelta::hours(720)), now), "30d");
        assert_eq!(
            time_from_now(Some(now - TimeDelta::minutes(3)), now),
            "3m ago"
        );
        assert_eq!(short_human_duration(TimeDelta::seconds(59)), "59s");
        assert_eq!(short_human_duration(TimeDelta::hours(23)), "23h");
        assert_eq!(short_human_duration(TimeDelta::days(800)), "2y");
    }

    #[test]
    fn one_object_or_a_list() {
        let items = vec![serde_json::json!({"kind": "Backup"})];
        let one = objects(OutputFormat::Json, &items, true).unwrap();
        assert!(one.contains("\"kind\": \"Backup\"") && !one.contains("List"));
        let list = objects(OutputFormat::Yaml, &items, false).unwrap();
        assert!(list.contains("kind: List"), "{list}");
    }
}

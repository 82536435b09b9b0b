//! The side-by-side rows every benchmark reports: Granary's figure, the peer's figure on
//! the same work in the same run, their ratio and the goal. Pure: formatting and JSON
//! only; the benchmarks measure, this module says what the figures mean.

use serde_json::{Value, json};

/// What a figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    Milliseconds,
    Requests,
    Bytes,
    MiB,
    /// Requests (or writes) per object.
    PerObject,
    /// Objects (or items, entries) per second.
    PerSecond,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Milliseconds => "ms",
            Unit::Requests => "requests",
            Unit::Bytes => "bytes",
            Unit::MiB => "MiB",
            Unit::PerObject => "per object",
            Unit::PerSecond => "per second",
        }
    }

    fn format(self, v: f64) -> String {
        match self {
            Unit::Seconds => format!("{v:.2}s"),
            Unit::Milliseconds => format!("{v:.2}ms"),
            Unit::Requests | Unit::Bytes => format!("{v:.0}"),
            Unit::MiB => format!("{v:.0}MiB"),
            Unit::PerObject => format!("{v:.2}"),
            Unit::PerSecond => format!("{v:.0}/s"),
        }
    }
}

/// The peer's side of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Peer {
    /// Measured on the same work in the same run.
    Measured(f64),
    /// A figure that is known rather than measured (e.g. the minimal request count).
    Reference(f64),
    /// The peer's program is not installed: no figure.
    NotInstalled,
    /// The peer ran and failed: no figure, the reason.
    Failed(String),
    /// This measure has no peer (recorded for later comparison).
    None,
}

impl Peer {
    pub fn figure(&self) -> Option<f64> {
        match self {
            Peer::Measured(v) | Peer::Reference(v) => Some(*v),
            _ => None,
        }
    }

    fn status(&self) -> &'static str {
        match self {
            Peer::Measured(_) => "measured",
            Peer::Reference(_) => "reference",
            Peer::NotInstalled => "not installed",
            Peer::Failed(_) => "failed",
            Peer::None => "none",
        }
    }
}

/// One measure, side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub measure: String,
    pub unit: Unit,
    pub granary: f64,
    /// Who the peer is (`rclone purge`, `bare client`, `minimal`); empty without one.
    pub peer_name: String,
    pub peer: Peer,
    /// The goal on the ratio granary / peer (lower is better), when there is one.
    pub goal_ratio_max: Option<f64>,
}

impl Row {
    /// A measure without a peer.
    pub fn alone(measure: impl Into<String>, unit: Unit, granary: f64) -> Row {
        Row {
            measure: measure.into(),
            unit,
            granary,
            peer_name: String::new(),
            peer: Peer::None,
            goal_ratio_max: None,
        }
    }

    pub fn versus(
        measure: impl Into<String>,
        unit: Unit,
        granary: f64,
        peer_name: impl Into<String>,
        peer: Peer,
    ) -> Row {
        Row {
            measure: measure.into(),
            unit,
            granary,
            peer_name: peer_name.into(),
            peer,
            goal_ratio_max: None,
        }
    }

    pub fn goal(mut self, ratio_max: f64) -> Row {
        self.goal_ratio_max = Some(ratio_max);
        self
    }

    /// Granary's figure over the peer's; `None` without a peer figure or with a zero one.
    pub fn ratio(&self) -> Option<f64> {
        let p = self.peer.figure()?;
        (p != 0.0).then(|| self.granary / p)
    }

    /// Whether the goal is met; `None` without a goal or a ratio.
    pub fn goal_met(&self) -> Option<bool> {
        Some(self.ratio()? <= self.goal_ratio_max?)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "measure": self.measure,
            "unit": self.unit.as_str(),
            "granary": self.granary,
            "peer": self.peer_name,
            "peer_status": self.peer.status(),
            "peer_figure": self.peer.figure(),
            "peer_error": match &self.peer { Peer::Failed(e) => Some(e.as_str()), _ => None },
            "ratio": self.ratio(),
            "goal_ratio_max": self.goal_ratio_max,
            "goal_met": self.goal_met(),
        })
    }
}

/// The rows as a fixed-width table, with a title line.
pub fn render(title: &str, rows: &[Row]) -> String {
    let mut out = format!("{title}\n");
    out.push_str(&format!(
        "{:<52} {:>12} {:<26} {:>13} {:>7}  goal\n",
        "measure", "granary", "peer", "peer figure", "ratio"
    ));
    for r in rows {
        let peer_figure = match &r.peer {
            Peer::Measured(v) | Peer::Reference(v) => r.unit.format(*v),
            Peer::NotInstalled => "not installed".into(),
            Peer::Failed(_) => "failed".into(),
            Peer::None => "-".into(),
        };
        let ratio = r.ratio().map(|x| format!("{x:.2}")).unwrap_or("-".into());
        let goal = match (r.goal_ratio_max, r.goal_met()) {
            (Some(g), Some(true)) => format!("<= {g} met"),
            (Some(g), Some(false)) => format!("<= {g} MISSED"),
            (Some(g), None) => format!("<= {g}"),
            (None, _) => String::new(),
        };
        out.push_str(&format!(
            "{:<52} {:>12} {:<26} {:>13} {:>7}  {goal}\n",
            r.measure,
            r.unit.format(r.granary),
            if r.peer_name.is_empty() {
                "-"
            } else {
                &r.peer_name
            },
            peer_figure,
            ratio
        ));
        if let Peer::Failed(e) = &r.peer {
            out.push_str(&format!("    {}: {e}\n", r.peer_name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_is_granary_over_peer_and_checks_the_goal() {
        let r = Row::versus("t", Unit::Seconds, 3.0, "rclone", Peer::Measured(2.0)).goal(1.0);
        assert_eq!(r.ratio(), Some(1.5));
        assert_eq!(r.goal_met(), Some(false));
        let r = Row::versus("t", Unit::Requests, 20.0, "minimal", Peer::Reference(20.0)).goal(1.05);
        assert_eq!(r.goal_met(), Some(true));
    }

    #[test]
    fn a_missing_peer_has_no_figure_and_no_ratio() {
        for p in [
            Peer::NotInstalled,
            Peer::Failed("exit 1".into()),
            Peer::None,
            Peer::Measured(0.0),
        ] {
            let r = Row::versus("t", Unit::Seconds, 1.0, "aws s3 rm", p).goal(1.0);
            assert_eq!(r.ratio(), None);
            assert_eq!(r.goal_met(), None);
            let j = r.to_json();
            assert!(j["ratio"].is_null());
        }
        let j = Row::versus("t", Unit::Seconds, 1.0, "rclone", Peer::NotInstalled).to_json();
        assert_eq!(j["peer_status"], "not installed");
        assert!(j["peer_figure"].is_null());
    }

    #[test]
    fn the_table_says_not_installed_never_a_figure() {
        let rows = [
            Row::versus(
                "delete",
                Unit::Seconds,
                1.0,
                "rclone purge",
                Peer::NotInstalled,
            ),
            Row::alone("creates", Unit::PerSecond, 1234.0),
        ];
        let t = render("title", &rows);
        assert!(t.contains("not installed"), "{t}");
        assert!(t.contains("1234/s"), "{t}");
        assert!(t.lines().count() == 4, "{t}");
    }
}

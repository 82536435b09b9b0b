//! The monitoring files of `deploy/monitoring/`: the alert rules pass `promtool check
//! rules` and their `promtool test rules` suite, which has a firing and a quiet case for
//! every alert; the PrometheusRule carries exactly the rules file's groups; every query of
//! the Grafana dashboard parses; and rules and dashboard use only metrics Granary exports.
//!
//! promtool is `$GRANARY_PROMTOOL`, else `promtool` on PATH (scripts/test.sh installs
//! Debian's). Without one these tests fail: they never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use granary_test_support::manifests::read_docs;
use granary_test_support::repo_path;

const RULES: &str = "deploy/monitoring/granary-rules.yaml";
const RULES_TEST: &str = "deploy/monitoring/granary-rules.test.yaml";
const PROMETHEUS_RULE: &str = "deploy/monitoring/prometheusrule.yaml";
const DASHBOARD: &str = "deploy/monitoring/dashboard.json";

/// The promtool to run: `$GRANARY_PROMTOOL`, else `promtool` on PATH. Panics (fails the
/// test) when there is none, or when it does not run.
fn promtool() -> PathBuf {
    let bin = match std::env::var_os("GRANARY_PROMTOOL").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("promtool"))
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "promtool not found: set GRANARY_PROMTOOL to a promtool binary or put one \
                     on PATH (scripts/test.sh extracts Debian's prometheus package into \
                     ~/.cache/granary/prometheus and sets GRANARY_PROMTOOL)"
                )
            }),
    };
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("promtool {} does not start: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} --version failed: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs promtool with `args`; fails the test, with promtool's output, unless it succeeds.
fn run_promtool(args: &[&str]) -> String {
    let bin = promtool();
    let out = Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed:\n{text}",
        args.join(" ")
    );
    text
}

fn path_arg(rel: &str) -> String {
    repo_path(rel).to_str().expect("UTF-8 path").to_string()
}

fn yaml(rel: &str) -> Value {
    let docs = read_docs(&repo_path(rel));
    assert_eq!(docs.len(), 1, "{rel}: one YAML document");
    docs.into_iter().next().expect("one document").value
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(repo_path(DASHBOARD)).expect("dashboard.json");
    serde_json::from_str(&text).expect("dashboard.json is JSON")
}

/// Every rule of the rules file.
fn rules() -> Vec<Value> {
    yaml(RULES)["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").clone())
        .collect()
}

/// The names of the alerts of the rules file.
fn alert_names() -> BTreeSet<String> {
    rules()
        .iter()
        .filter_map(|r| r["alert"].as_str().map(String::from))
        .collect()
}

#[test]
fn promtool_checks_the_rules_file() {
    let text = run_promtool(&["check", "rules", &path_arg(RULES)]);
    assert!(text.contains("SUCCESS"), "{text}");
}

#[test]
fn promtool_unit_tests_of_the_rules_pass() {
    let text = run_promtool(&["test", "rules", &path_arg(RULES_TEST)]);
    assert!(text.contains("SUCCESS"), "{text}");
}

#[test]
fn the_prometheus_rule_carries_exactly_the_rules_file_groups() {
    let rule = yaml(PROMETHEUS_RULE);
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert!(rule["metadata"]["name"].is_string(), "a name");
    let plain = yaml(RULES);
    assert_eq!(
        rule["spec"]["groups"], plain["groups"],
        "{PROMETHEUS_RULE}'s spec.groups must be {RULES}'s groups: copy them over"
    );
}

#[test]
fn every_alert_has_a_severity_a_summary_and_a_description() {
    let rules = rules();
    assert!(!rules.is_empty());
    for r in rules.iter().filter(|r| r["alert"].is_string()) {
        let name = r["alert"].as_str().expect("alert name");
        let severity = r["labels"]["severity"].as_str().unwrap_or_default();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for key in ["summary", "description"] {
            let text = r["annotations"][key].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{name}: annotation {key} missing or short");
        }
    }
}

/// Every alert of the rules file has, in the test file, a case where it fires (expected
/// alerts) and one where it does not (`exp_alerts: []` or none).
#[test]
fn every_alert_has_a_firing_and_a_quiet_case() {
    let suite = yaml(RULES_TEST);
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for group in suite["tests"].as_array().expect("tests") {
        for case in group["alert_rule_test"].as_array().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected == 0 {
                quiet.insert(name);
            } else {
                for alert in case["exp_alerts"].as_array().into_iter().flatten() {
                    assert!(
                        alert["exp_labels"]["severity"].is_string()
                            && alert["exp_annotations"]["summary"].is_string()
                            && alert["exp_annotations"]["description"].is_string(),
                        "{name}: an expected alert names its severity, summary and description"
                    );
                }
                firing.insert(name);
            }
        }
    }
    let alerts = alert_names();
    assert!(alerts.len() >= 5, "{alerts:?}");
    let no_fire: Vec<_> = alerts.difference(&firing).collect();
    let no_quiet: Vec<_> = alerts.difference(&quiet).collect();
    assert!(
        no_fire.is_empty(),
        "alerts with no firing case: {no_fire:?}"
    );
    assert!(
        no_quiet.is_empty(),
        "alerts with no quiet case: {no_quiet:?}"
    );
    let unknown: Vec<_> = firing
        .union(&quiet)
        .filter(|a| !alerts.contains(*a))
        .collect();
    assert!(
        unknown.is_empty(),
        "cases of alerts that do not exist: {unknown:?}"
    );
}

/// Every `targets[].expr` of the dashboard's panels (rows' nested panels included).
fn dashboard_exprs(d: &Value) -> Vec<String> {
    fn walk(panel: &Value, out: &mut Vec<String>) {
        for t in panel["targets"].as_array().into_iter().flatten() {
            out.push(
                t["expr"]
                    .as_str()
                    .expect("a target has an expr")
                    .to_string(),
            );
        }
        for p in panel["panels"].as_array().into_iter().flatten() {
            walk(p, out);
        }
    }
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        walk(p, &mut out);
    }
    out
}

/// The series selectors of the dashboard's `label_values(selector, label)` variables.
fn variable_selectors(d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for v in d["templating"]["list"].as_array().expect("templating.list") {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .expect("a query variable has a query");
        let inner = q
            .trim()
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {}: not label_values(…): {q}", v["name"]));
        let (selector, _label) = inner
            .rsplit_once(',')
            .unwrap_or_else(|| panic!("variable {}: label_values needs a selector", v["name"]));
        out.push(selector.trim().to_string());
    }
    out
}

/// `expr` with the dashboard's variables replaced by values PromQL accepts. Fails on a
/// variable it does not know (`$1` of label_replace is no variable).
fn substitute(expr: &str) -> String {
    let mut s = expr.to_string();
    for (var, value) in [
        ("$__rate_interval", "5m"),
        ("$__interval", "1m"),
        ("$__range", "1h"),
        ("${seed}", ".*"),
        ("$seed", ".*"),
    ] {
        s = s.replace(var, value);
    }
    let chars: Vec<char> = s.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c == '$' {
            assert!(
                chars.get(i + 1).is_some_and(char::is_ascii_digit),
                "unknown dashboard variable in {expr}"
            );
        }
    }
    s
}

#[test]
fn the_dashboard_is_templated_on_datasource_and_seed() {
    let d = dashboard();
    assert!(
        d["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "schemaVersion {}",
        d["schemaVersion"]
    );
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("variable {name} missing"))
    };
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    let seed = var("seed");
    assert_eq!(seed["type"], "query");
    assert_eq!(seed["datasource"]["uid"], "${datasource}");
    assert_eq!(seed["includeAll"], true);
    assert_eq!(
        seed["allValue"], ".*",
        "All must match series without a seed label"
    );
    // Every panel and query reads the templated data source.
    fn walk(panel: &Value, at: &str) {
        let title = format!("{at}/{}", panel["title"].as_str().unwrap_or("?"));
        if panel["type"] != "row" {
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        }
        for t in panel["targets"].as_array().into_iter().flatten() {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
        }
        for p in panel["panels"].as_array().into_iter().flatten() {
            walk(p, &title);
        }
    }
    for p in d["panels"].as_array().expect("panels") {
        walk(p, "");
    }
    // The one metric Granary labels with its seed is filtered by the variable everywhere.
    for expr in dashboard_exprs(&d) {
        if expr.contains("granary_backupentries_pending_deletion") {
            assert!(expr.contains("seed=~\"$seed\""), "{expr}");
        }
    }
}

#[test]
fn every_dashboard_query_parses() {
    let d = dashboard();
    let exprs = dashboard_exprs(&d);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let mut rules: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| json!({"record": format!("granary_dashboard:query_{i}"), "expr": substitute(e)}))
        .collect();
    for (i, selector) in variable_selectors(&d).iter().enumerate() {
        rules.push(json!({
            "record": format!("granary_dashboard:variable_{i}"),
            "expr": format!("count({})", substitute(selector)),
        }));
    }
    let count = rules.len();
    let file = json!({"groups": [{"name": "granary-dashboard", "rules": rules}]});
    let dir = tempfile::tempdir().expect("temp dir");
    // JSON is YAML: promtool reads it as a rules file.
    let path = dir.path().join("dashboard-queries.yaml");
    std::fs::write(&path, serde_json::to_string_pretty(&file).expect("JSON")).expect("write");
    let text = run_promtool(&["check", "rules", path.to_str().expect("UTF-8 path")]);
    assert!(
        text.contains(&format!("SUCCESS: {count} rules found")),
        "{text}"
    );
}

/// Whether Granary's registries hold a metric family `name`: the shared controller
/// metrics, the garden's, the seed's and the Velero part's, registered into one registry
/// as the processes do. A registry refuses a second collector of a name it holds, so
/// registering a probe of that name tells, whether or not the family has series yet.
fn registered(name: &str) -> bool {
    let metrics = granary_runtime::metrics::Metrics::new();
    granary_garden::metrics::GardenMetrics::register(&metrics).expect("garden metrics");
    let _seed = granary_seed::metrics::SeedMetrics::new(metrics.clone());
    let _velero = granary_velero_server::metrics::VeleroMetrics::new(&metrics);
    let probe = prometheus::IntGauge::new(name, "probe").expect("a valid metric name");
    metrics.register(Box::new(probe)).is_err()
}

/// Whether a metric `name` is registered somewhere the registries above do not cover: a
/// string literal passed to a metric constructor (`…::new("name"`) in the sources.
fn constructed_in_sources(name: &str) -> bool {
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["src", "crates", "providers/src"] {
        rust_files(&repo_path(dir), &mut files);
    }
    let literal = format!("\"{name}\"");
    files.iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        text.match_indices(&literal)
            .any(|(at, _)| text[..at].trim_end().ends_with("new("))
    })
}

/// Whether Granary exports a series named `name` (a histogram's `_bucket`, `_sum` and
/// `_count` included).
fn exported(name: &str) -> bool {
    let family = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s));
    [Some(name), family]
        .into_iter()
        .flatten()
        .any(|n| registered(n) || constructed_in_sources(n))
}

/// The metric names a PromQL expression selects: identifiers that are no function,
/// aggregation, keyword or label (label matchers, grouping lists and strings skipped), and
/// plain names of `__name__` matchers.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
        "atan2",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "inf",
        "nan",
    ];
    const LABEL_LISTS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let c: Vec<char> = expr.chars().collect();
    let ident = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':';
    // Index after the string opening at `i`.
    let skip_string = |mut i: usize| {
        let quote = c[i];
        i += 1;
        while i < c.len() && c[i] != quote {
            i += if c[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    // Index after the bracket opening at `i` (strings inside skipped).
    let skip_group = |mut i: usize, open: char, close: char| {
        let mut depth = 0;
        while i < c.len() {
            if c[i] == '"' || c[i] == '\'' || c[i] == '`' {
                i = skip_string(i);
                continue;
            }
            if c[i] == open {
                depth += 1;
            } else if c[i] == close {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            i += 1;
        }
        i
    };
    let next_non_space = |mut i: usize| {
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '"' || ch == '\'' || ch == '`' {
            i = skip_string(i);
        } else if ch == '{' {
            let end = skip_group(i, '{', '}');
            let matchers: String = c[i + 1..end - 1].iter().collect();
            for m in matchers.split(',') {
                let m = m.trim();
                if let Some(v) = m
                    .strip_prefix("__name__")
                    .map(|v| v.trim_start().trim_start_matches(['=', '~']).trim())
                {
                    for n in v.trim_matches('"').split('|') {
                        assert!(
                            !n.is_empty() && n.chars().all(ident),
                            "only plain names in __name__ matchers: {expr}"
                        );
                        names.insert(n.to_string());
                    }
                }
            }
            i = end;
        } else if ch == '[' {
            i = skip_group(i, '[', ']');
        } else if ch.is_ascii_digit()
            || (ch == '.' && c.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            // A number or a duration (`1e3`, `0.9`, `25h`, `1h30m`).
            i += 1;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' {
            let start = i;
            while i < c.len() && ident(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let after = next_non_space(i);
            let call = c.get(after) == Some(&'(');
            if LABEL_LISTS.contains(&word.as_str()) {
                if call {
                    i = skip_group(after, '(', ')');
                }
            } else if !call && !KEYWORDS.contains(&word.as_str()) {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_promql() {
    let names = metric_names(
        r#"sum without (instance, pod) (increase(a_total{x="b_c", __name__=~"d|e"}[5m] offset 1h)) / on(z) group_left(y) max by (le) (f) > bool 0.9 or vector(1e3) unless label_replace(g, "h", "$1", "i", "(.+)-[0-9]+")"#,
    );
    let want: BTreeSet<String> = ["a_total", "d", "e", "f", "g"].map(String::from).into();
    assert_eq!(names, want);
}

#[test]
fn rules_and_dashboard_use_only_metrics_granary_exports() {
    let d = dashboard();
    // Where each name is used, for the failure message.
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in rules() {
        let name = r["alert"]
            .as_str()
            .or(r["record"].as_str())
            .unwrap_or("?")
            .to_string();
        for m in metric_names(r["expr"].as_str().expect("expr")) {
            used.entry(m).or_default().insert(format!("rule {name}"));
        }
    }
    for e in dashboard_exprs(&d).iter().chain(&variable_selectors(&d)) {
        for m in metric_names(&substitute(e)) {
            used.entry(m).or_default().insert("dashboard".to_string());
        }
    }
    assert!(used.len() >= 15, "{:?}", used.keys());
    let unknown: Vec<String> = used
        .iter()
        .filter(|(name, _)| !exported(name))
        .map(|(name, at)| {
            format!(
                "{name} (in {})",
                at.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "metrics Granary does not export: {unknown:?}"
    );
    // The check itself tells exported from made-up names.
    assert!(registered("granary_reconcile_total") && registered("velero_backup_attempt_total"));
    assert!(!exported("granary_made_up_total"));
}

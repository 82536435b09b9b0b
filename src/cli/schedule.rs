//! `granary schedule create|get|describe|pause|unpause|delete`: velero's schedule
//! commands against the same Schedule objects; the `schedule` controller of `granary
//! seed`/`granary server` takes the backups.

use anyhow::{Context, bail};
use chrono::Utc;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::backup_spec::{BackupFlags, build_backup, describe_errors};
use super::flags::FlagError;
use super::output::{self, OutputFormat};
use super::{Target, confirmed, is_conflict, is_not_found};
use granary_api::velero::{Schedule, ScheduleSpec};
use granary_runtime::clock::from_k8s;
use granary_velero_server::schedules::{ANNOTATION_WAITING_FOR, Cadence};

/// A `granary schedule` subcommand with its flags; the `///` lines are the subcommands'
/// and flags' help.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule (`-o json|yaml` prints it without creating it).
    Create {
        /// The schedule's name.
        name: String,
        /// When to back up: a 5-field cron expression or `@every <duration>`.
        #[arg(long)]
        schedule: String,
        /// Create it paused.
        #[arg(long)]
        paused: bool,
        /// Skip the first backup, due at creation.
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        skip_immediately: Option<bool>,
        /// Make the schedule the owner of its backups.
        #[arg(long)]
        use_owner_references_in_backup: bool,
        /// Rehearse the restore of each backup it takes: a deep check, then the restore
        /// run against the live cluster with nothing written, the outcome on the Backup.
        #[arg(long)]
        rehearse: bool,
        /// What each backup holds and where it goes (the template).
        #[command(flatten)]
        flags: Box<BackupFlags>,
        // `json|yaml`: print the Schedule and create nothing ([`output::print_only`]).
        /// Print the Schedule as json or yaml instead of creating it.
        #[arg(short = 'o', long, value_enum)]
        output: Option<OutputFormat>,
    },
    /// List schedules, or the named ones.
    Get {
        /// The schedules to list (default: every schedule of the namespace).
        names: Vec<String>,
        /// Only schedules with these labels.
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Output format: a table, or the objects as json or yaml.
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Show schedules in detail.
    Describe {
        /// The schedules to describe (default: every schedule of the namespace).
        names: Vec<String>,
    },
    /// Pause schedules: they create no backups until unpaused.
    Pause {
        /// The schedules to pause (or --all).
        names: Vec<String>,
        /// Every schedule of the namespace.
        #[arg(long)]
        all: bool,
    },
    /// Unpause schedules.
    Unpause {
        /// The schedules to unpause (or --all).
        names: Vec<String>,
        /// Every schedule of the namespace.
        #[arg(long)]
        all: bool,
        /// Skip the backup that is due right now.
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        skip_immediately: Option<bool>,
    },
    /// Delete schedules (their backups stay).
    Delete {
        /// The schedules to delete.
        names: Vec<String>,
        /// Do not ask.
        #[arg(long)]
        confirm: bool,
    },
}

/// The Schedule velero's `schedule create` would create, or every problem with the
/// flags. The backup flags make the template (`--labels` label the schedule, whose
/// labels its backups take, as velero does).
pub fn build_schedule(
    name: &str,
    namespace: &str,
    expr: &str,
    flags: &BackupFlags,
    paused: bool,
    skip_immediately: Option<bool>,
    use_owner_references_in_backup: bool,
) -> Result<Schedule, Vec<FlagError>> {
    let mut errs = Vec::new();
    if let Err(e) = Cadence::parse(expr) {
        errs.push(FlagError::new("--schedule", expr, e));
    }
    let backup = build_backup(name, namespace, flags);
    let backup = match backup {
        Ok(b) => Some(b),
        Err(e) => {
            errs.extend(e);
            None
        }
    };
    let Some(backup) = backup.filter(|_| errs.is_empty()) else {
        return Err(errs);
    };
    let mut schedule = Schedule::new(
        name,
        ScheduleSpec {
            template: backup.spec,
            schedule: expr.to_string(),
            use_owner_references_in_backup: use_owner_references_in_backup.then_some(true),
            paused: paused.then_some(true),
            skip_immediately,
        },
    );
    schedule.metadata.namespace = Some(namespace.to_string());
    schedule.metadata.labels = backup.metadata.labels;
    Ok(schedule)
}

/// velero's `schedule get` table.
pub fn schedules_table(schedules: &[Schedule], now: chrono::DateTime<Utc>) -> String {
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let status = s.status.clone().unwrap_or_default();
            let created = s
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| output::go_time(&from_k8s(t.0)))
                .unwrap_or_else(|| "<unknown>".into());
            let selector = s
                .spec
                .template
                .label_selector
                .as_ref()
                .and_then(|l| l.match_labels.as_ref())
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into());
            vec![
                s.name_any(),
                status
                    .phase
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "New".into()),
                created,
                s.spec.schedule.clone(),
                s.spec
                    .template
                    .ttl
                    .as_ref()
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "0s".into()),
                match status.last_backup {
                    Some(t) => format!("{} ago", output::short_human_duration(now - t)),
                    None => "n/a".into(),
                },
                selector,
                (s.spec.paused == Some(true)).to_string(),
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "STATUS",
            "CREATED",
            "SCHEDULE",
            "BACKUP TTL",
            "LAST BACKUP",
            "SELECTOR",
            "PAUSED",
        ],
        &rows,
    )
}

/// `schedule describe`: the fields velero shows, and what a due backup waits for.
pub fn describe_schedule(s: &Schedule) -> String {
    let status = s.status.clone().unwrap_or_default();
    let mut out = String::new();
    // A label longer than the column still gets a space before its value.
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<15} {v}\n"));
    line("Name:", s.name_any());
    line("Namespace:", s.namespace().unwrap_or_default());
    let labels = s
        .labels()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    line(
        "Labels:",
        if labels.is_empty() {
            "<none>".into()
        } else {
            labels
        },
    );
    line(
        "Phase:",
        status
            .phase
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|| "New".into()),
    );
    if let Some(errors) = status.validation_errors.filter(|e| !e.is_empty()) {
        line("Validation errors:", errors.join("; "));
    }
    line("Paused:", (s.spec.paused == Some(true)).to_string());
    line("Schedule:", s.spec.schedule.clone());
    line(
        "Use owner references:",
        (s.spec.use_owner_references_in_backup == Some(true)).to_string(),
    );
    let opt_time = |t: Option<chrono::DateTime<Utc>>| {
        t.map(|t| output::go_time(&t))
            .unwrap_or_else(|| "<never>".into())
    };
    out.push_str("\nBackup Template:\n");
    for l in super::describe::spec_section(&s.spec.template).lines() {
        if l.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&format!("  {l}\n"));
        }
    }
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<15} {v}\n"));
    line("Last Backup:", opt_time(status.last_backup));
    line("Last Skipped:", opt_time(status.last_skipped));
    if let Some(w) = s.annotations().get(ANNOTATION_WAITING_FOR) {
        line("Waiting:", format!("the due backup waits: {w}"));
    }
    out
}

/// Runs one `granary schedule` subcommand.
pub async fn run(target: &Target, command: ScheduleCommand) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    if let ScheduleCommand::Create {
        name,
        schedule,
        paused,
        skip_immediately,
        use_owner_references_in_backup,
        rehearse,
        flags,
        output: format,
    } = &command
    {
        let mut s = build_schedule(
            name,
            ns,
            schedule,
            flags,
            *paused,
            *skip_immediately,
            *use_owner_references_in_backup,
        )
        .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
        if *rehearse {
            s.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    granary_velero_server::backup_verification::REHEARSE_ANNOTATION.to_owned(),
                    "true".to_owned(),
                );
        }
        if let Some(format) = output::print_only(*format) {
            print!("{}", output::objects(format, &[s], true)?);
            return Ok(());
        }
        let client = target.client().await?;
        let api: Api<Schedule> = Api::namespaced(client, ns);
        match api.create(&PostParams::default(), &s).await {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => {
                bail!("schedule {name:?} already exists in namespace {ns}")
            }
            Err(e) => return Err(e).with_context(|| format!("creating schedule {name}")),
        }
        println!("Schedule {name:?} created successfully.");
        return Ok(());
    }
    let client = target.client().await?;
    let api: Api<Schedule> = Api::namespaced(client.clone(), ns);
    match command {
        ScheduleCommand::Create { .. } => Ok(()),
        ScheduleCommand::Get {
            names,
            selector,
            output: format,
        } => {
            let found = fetch(&api, &names, selector.as_deref(), false).await?;
            print!(
                "{}",
                output::list(format, &found, names.len(), "schedules", ns, |f| {
                    schedules_table(f, Utc::now())
                })?
            );
            Ok(())
        }
        ScheduleCommand::Describe { names } => {
            let found = fetch(&api, &names, None, false).await?;
            let texts: Vec<String> = found.iter().map(describe_schedule).collect();
            print!("{}", texts.join("\n"));
            Ok(())
        }
        ScheduleCommand::Pause { names, all } => set_paused(&api, names, all, true, None).await,
        ScheduleCommand::Unpause {
            names,
            all,
            skip_immediately,
        } => set_paused(&api, names, all, false, skip_immediately).await,
        ScheduleCommand::Delete { names, confirm } => {
            if names.is_empty() {
                bail!("give the names of the schedules to delete");
            }
            if !confirm
                && !confirmed(&format!(
                    "You are about to delete schedule(s) {}.",
                    names.join(", ")
                ))
            {
                println!("Cancelled.");
                return Ok(());
            }
            for name in &names {
                match api.delete(name, &Default::default()).await {
                    Ok(_) => println!("Schedule deleted: {name}"),
                    Err(e) if is_not_found(&e) => {
                        bail!("schedule {name:?} not found in namespace {ns}")
                    }
                    Err(e) => return Err(e).with_context(|| format!("deleting schedule {name}")),
                }
            }
            Ok(())
        }
    }
}

/// `pause` (`paused`) and `unpause` (not, with `--skip-immediately`).
async fn set_paused(
    api: &Api<Schedule>,
    names: Vec<String>,
    all: bool,
    paused: bool,
    skip_immediately: Option<bool>,
) -> anyhow::Result<()> {
    if names.is_empty() && !all {
        bail!("give schedule names or --all");
    }
    let found = fetch(api, &names, None, all).await?;
    for s in found {
        let name = s.name_any();
        let mut spec = json!({"paused": paused});
        if let Some(skip) = skip_immediately {
            spec["skipImmediately"] = json!(skip);
        }
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .with_context(|| format!("updating schedule {name}"))?;
        let word = if paused { "paused" } else { "unpaused" };
        println!("Schedule {name:?} {word} successfully.");
    }
    Ok(())
}

/// The named schedules (each must exist), or all of them (optionally by selector).
async fn fetch(
    api: &Api<Schedule>,
    names: &[String],
    selector: Option<&str>,
    all: bool,
) -> anyhow::Result<Vec<Schedule>> {
    if names.is_empty() || all {
        let mut params = ListParams::default();
        if let Some(s) = selector {
            params = params.labels(s);
        }
        let mut v = api.list(&params).await.context("listing schedules")?.items;
        v.sort_by_key(|s| s.name_any());
        return Ok(v);
    }
    let mut found = Vec::new();
    for name in names {
        match api.get_opt(name).await? {
            Some(s) => found.push(s),
            None => bail!("schedule {name:?} not found"),
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags() -> BackupFlags {
        BackupFlags {
            scope: super::super::backup_spec::ScopeFlags {
                include_namespaces: Some(vec!["app".into()]),
                labels: vec!["team=a".into()],
                ..Default::default()
            },
            ttl: Some("24h".into()),
            ..Default::default()
        }
    }

    #[test]
    fn create_builds_velero_s_schedule() {
        let s = build_schedule(
            "nightly",
            "velero",
            "0 2 * * *",
            &flags(),
            true,
            Some(true),
            true,
        )
        .expect("valid");
        assert_eq!(s.name_any(), "nightly");
        assert_eq!(s.metadata.namespace.as_deref(), Some("velero"));
        assert_eq!(s.labels()["team"], "a");
        assert_eq!(s.spec.schedule, "0 2 * * *");
        assert_eq!(s.spec.paused, Some(true));
        assert_eq!(s.spec.skip_immediately, Some(true));
        assert_eq!(s.spec.use_owner_references_in_backup, Some(true));
        assert_eq!(
            s.spec.template.included_namespaces,
            Some(vec!["app".to_string()])
        );
        assert!(s.spec.template.ttl.is_some());
    }

    #[test]
    fn bad_flags_are_all_named() {
        let mut f = flags();
        f.ttl = Some("soon".into());
        let errs = build_schedule("n", "velero", "every day", &f, false, None, false)
            .expect_err("invalid");
        let flags: Vec<&str> = errs.iter().map(|e| e.flag.as_str()).collect();
        assert!(flags.contains(&"--schedule"), "{flags:?}");
        assert!(flags.contains(&"--ttl"), "{flags:?}");
    }

    #[test]
    fn table_and_describe() {
        let mut s = build_schedule(
            "nightly",
            "velero",
            "@every 1h",
            &flags(),
            false,
            None,
            false,
        )
        .expect("valid");
        s.status = Some(granary_api::velero::ScheduleStatus {
            phase: Some(granary_api::velero::SchedulePhase::Enabled),
            ..Default::default()
        });
        s.annotations_mut().insert(
            ANNOTATION_WAITING_FOR.into(),
            "backup nightly-1 is still InProgress".into(),
        );
        let table = schedules_table(&[s.clone()], Utc::now());
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("NAME "), "{table}");
        assert!(lines[1].starts_with("nightly "), "{table}");
        assert!(
            lines[1].contains("Enabled") && lines[1].contains("@every 1h"),
            "{table}"
        );
        assert!(lines[1].ends_with("false"), "{table}");
        let text = describe_schedule(&s);
        assert!(text.contains("Phase:          Enabled\n"), "{text}");
        assert!(
            text.contains("backup nightly-1 is still InProgress"),
            "{text}"
        );
        // velero's Backup Template section: the template as a backup describes it,
        // indented under its heading.
        assert!(
            text.contains("\nBackup Template:\n  Namespaces:\n    Included:  app\n    Excluded:  <none>\n\n  Resources:\n"),
            "{text}"
        );
        assert!(text.contains("\n  TTL:  "), "{text}");
        assert!(text.contains("\n  Hooks:  <none>\n"), "{text}");
    }
}

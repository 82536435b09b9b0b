//! `granary backup-location create|get|set|delete`, as velero's CLI does them: one
//! default location at a time (setting a new default clears the old one), and deleting
//! a location deletes the Backup objects that point at it (their files stay in the
//! bucket).

use anyhow::{Context, bail};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::backup_spec::describe_errors;
use super::location_spec::{
    LocationFlags, LocationSetFlags, build_location, locations_table, set_patch,
};
use super::output::{self, OutputFormat};
use super::{Target, confirmed, is_conflict, is_not_found};
use granary_api::velero::{Backup, BackupStorageLocation, STORAGE_LOCATION_LABEL};
use granary_velero::label::valid_label_value;

/// A `granary backup-location` subcommand with its flags; the `///` lines are the
/// subcommands' and flags' help.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum LocationCommand {
    /// Create a backup storage location (`-o json|yaml` prints it without creating it).
    Create {
        /// The location's name.
        name: String,
        #[command(flatten)]
        flags: LocationFlags,
        // `json|yaml`: print the location that would be created, create nothing
        // ([`output::print_only`]).
        /// Print the location as json or yaml instead of creating it.
        #[arg(short = 'o', long, value_enum)]
        output: Option<OutputFormat>,
    },
    /// List locations, or the named ones.
    Get {
        /// The locations to list (default: every location of the namespace).
        names: Vec<String>,
        /// Output format: a table, or the objects as json or yaml.
        #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
        output: OutputFormat,
    },
    /// Change a location.
    Set {
        /// The location to change.
        name: String,
        #[command(flatten)]
        flags: LocationSetFlags,
    },
    /// Delete locations and the Backup objects that point at them (not their files).
    Delete {
        /// The locations to delete.
        #[arg(required = true)]
        names: Vec<String>,
        /// Do not ask for confirmation.
        #[arg(long)]
        confirm: bool,
    },
}

/// Runs one `granary backup-location` subcommand.
pub async fn run(target: &Target, command: LocationCommand) -> anyhow::Result<()> {
    let ns = target.namespace.as_str();
    if let LocationCommand::Create {
        name,
        flags,
        output,
    } = &command
        && let Some(format) = output::print_only(*output)
    {
        let bsl = build_location(name, ns, flags)
            .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
        print!("{}", output::objects(format, &[bsl], true)?);
        return Ok(());
    }
    // Flags are checked before anything is sent.
    let patch = match &command {
        LocationCommand::Set { flags, .. } => {
            Some(set_patch(flags).map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?)
        }
        _ => None,
    };
    let client = target.client().await?;
    let api: Api<BackupStorageLocation> = Api::namespaced(client.clone(), ns);
    match command {
        LocationCommand::Create { name, flags, .. } => {
            let bsl = build_location(&name, ns, &flags)
                .map_err(|errs| anyhow::anyhow!("{}", describe_errors(&errs)))?;
            if granary_velero_server::location::provider_kind(&bsl.spec.provider).is_none() {
                eprintln!(
                    "warning: provider {:?} is not one Granary can use (aws, azure, gcp, local, \
                     or velero.io/<name>); the location will stay Unavailable in Granary",
                    bsl.spec.provider
                );
            }
            match api.create(&PostParams::default(), &bsl).await {
                Ok(_) => {}
                Err(e) if is_conflict(&e) => {
                    bail!("backup storage location {name:?} already exists in namespace {ns}")
                }
                Err(e) if is_not_found(&e) => {
                    bail!("namespace {ns} does not exist: give the Velero namespace with -n")
                }
                Err(e) => return Err(e).with_context(|| format!("creating location {name}")),
            }
            if flags.default {
                clear_other_defaults(&api, &name).await?;
            }
            println!("Backup storage location {name:?} configured successfully.");
            Ok(())
        }
        LocationCommand::Get { names, output } => get(&api, ns, &names, output).await,
        LocationCommand::Set { name, flags } => {
            let patch = patch.expect("computed above for set");
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {
                    bail!("backup storage location {name:?} not found in namespace {ns}")
                }
                Err(e) => return Err(e).with_context(|| format!("updating location {name}")),
            }
            if flags.default == Some(true) {
                clear_other_defaults(&api, &name).await?;
            }
            println!("Backup storage location {name:?} configured successfully.");
            Ok(())
        }
        LocationCommand::Delete { names, confirm } => {
            delete(&client, &api, ns, &names, confirm).await
        }
    }
}

/// Velero keeps one default location: every other one loses `spec.default`.
async fn clear_other_defaults(api: &Api<BackupStorageLocation>, keep: &str) -> anyhow::Result<()> {
    let patch = serde_json::json!({"spec": {"default": false}});
    for other in api.list(&ListParams::default()).await?.items {
        let name = other.metadata.name.clone().unwrap_or_default();
        if name != keep && other.spec.default == Some(true) {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("clearing spec.default of location {name}"))?;
            println!("Location {name:?} is no longer the default.");
        }
    }
    Ok(())
}

async fn get(
    api: &Api<BackupStorageLocation>,
    ns: &str,
    names: &[String],
    format: OutputFormat,
) -> anyhow::Result<()> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    if names.is_empty() {
        found = api.list(&ListParams::default()).await?.items;
        found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    } else {
        for name in names {
            match api.get_opt(name).await? {
                Some(l) => found.push(l),
                None => missing.push(name.clone()),
            }
        }
    }
    print!(
        "{}",
        output::list(
            format,
            &found,
            names.len(),
            "backup storage locations",
            ns,
            |f| { locations_table(f) }
        )?
    );
    if !missing.is_empty() {
        bail!(
            "backup storage location(s) not found in namespace {ns}: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

async fn delete(
    client: &Client,
    api: &Api<BackupStorageLocation>,
    ns: &str,
    names: &[String],
    confirm: bool,
) -> anyhow::Result<()> {
    if names.is_empty() {
        bail!("give the name of at least one backup storage location to delete");
    }
    let mut missing = Vec::new();
    for name in names {
        if api.get_opt(name).await?.is_none() {
            missing.push(name.clone());
        }
    }
    if !missing.is_empty() {
        bail!(
            "backup storage location(s) not found in namespace {ns}: {}",
            missing.join(", ")
        );
    }
    if !confirm
        && !confirmed(&format!(
            "You are about to delete backup storage location(s) {} and the Backup objects that point at them (their files stay in the bucket).",
            names.join(", ")
        ))
    {
        // As velero: a "no" is an answer, not an error.
        println!("Cancelled.");
        return Ok(());
    }
    let backups: Api<Backup> = Api::namespaced(client.clone(), ns);
    for name in names {
        api.delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting location {name}"))?;
        println!("Backup storage location {name:?} deleted successfully.");
        let lp = ListParams::default().labels(&format!(
            "{STORAGE_LOCATION_LABEL}={}",
            valid_label_value(name)
        ));
        for b in backups.list(&lp).await?.items {
            let bname = b.metadata.name.unwrap_or_default();
            match backups.delete(&bname, &DeleteParams::default()).await {
                Ok(_) => println!("Backup {bname:?} of location {name:?} deleted."),
                Err(e) if is_not_found(&e) => {}
                Err(e) => bail!("deleting backup {bname} of location {name}: {e}"),
            }
        }
    }
    Ok(())
}

//! `granary backup verify` and `granary integrity keys|rotate|remove-key`: proving
//! backups against their integrity records (docs/formats.md#integrity-record), and the
//! signing keys they are proved with.
//!
//! `backup verify` works against a cluster (the Backups, their locations and the keys
//! Secret of the Velero namespace) or without one, from a location described by flags
//! (`--provider`, `--bucket`, `--prefix`, `--config`, `--credentials-file`, `--data-dir`
//! for `local`) and the keys Secret as a file (`--keyring`, what `kubectl get secret
//! granary-integrity-keys -o yaml` prints). It prints one line per backup and exits
//! non-zero when any backup is not verified.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use granary_api::velero::{Backup, BackupStorageLocation};
use granary_providers::{ListEntry, ObjectStore};
use granary_velero::integrity::{Keyring, ObjectDigest, RecordKind, Verdict};
use granary_velero::layout::StorageLayout;
use granary_velero_server::integrity::{self as server_integrity, Hash};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};

use super::Target;
use super::flags;

/// `granary backup verify`'s flags; the `///` lines are their help.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct VerifyFlags {
    /// The backups to verify.
    pub names: Vec<String>,
    /// Every backup (of the namespace, or at the location given by flags).
    #[arg(long)]
    pub all: bool,
    /// Also read the tarball item by item against the manifest and the resource list
    /// (the archive reader's checks).
    #[arg(long)]
    pub deep: bool,
    /// Adopt unsigned backups (Velero's own, an older Granary's) that pass the deep
    /// check: write their integrity record, signed with the newest key. A backup that
    /// fails its check is never signed.
    #[arg(long)]
    pub sign: bool,
    #[command(flatten)]
    pub local: super::LocalStore,
    /// Without a cluster: the location's provider (aws, azure, gcp, local).
    #[arg(long, requires = "bucket")]
    pub provider: Option<String>,
    /// Without a cluster: the location's bucket.
    #[arg(long, requires = "provider")]
    pub bucket: Option<String>,
    /// Without a cluster: the location's prefix.
    #[arg(long, requires = "provider")]
    pub prefix: Option<String>,
    /// Without a cluster: provider settings, k=v,... (region, s3Url, ...).
    #[arg(long, value_name = "K=V,...", requires = "provider")]
    pub config: Vec<String>,
    /// Without a cluster: the credentials file (Velero's format for the provider).
    #[arg(long, value_name = "FILE", requires = "provider")]
    pub credentials_file: Option<PathBuf>,
    /// Without a cluster: the integrity keys Secret as YAML or JSON (`kubectl get secret
    /// granary-integrity-keys -o yaml`).
    #[arg(long, value_name = "FILE", requires = "provider")]
    pub keyring: Option<PathBuf>,
}

/// One backup to check: where it is and whose it is.
struct Subject {
    /// The backup's name here.
    name: String,
    /// The name its files are stored under (another seed's backup: its name there).
    stored: String,
    /// Its location is read-only (another seed's prefix): never signed from here.
    read_only: bool,
    store: Arc<dyn ObjectStore>,
    layout: StorageLayout,
    tenant: Option<String>,
}

/// The line printed for one backup and whether it counts as verified.
pub fn verify_line(name: &str, verdict: &Verdict, deep: &[String], signed: bool) -> (String, bool) {
    if signed {
        return (
            format!("{name}: signed (was unsigned; passed the deep check)"),
            true,
        );
    }
    if !verdict.is_verified() {
        return (format!("{name}: {}", verdict.describe()), false);
    }
    match deep.first() {
        None => (format!("{name}: {}", verdict.describe()), true),
        Some(first) => {
            let more = match deep.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            (format!("{name}: deep check failed: {first}{more}"), false)
        }
    }
}

/// `granary backup verify`.
pub async fn verify(target: &Target, flags: VerifyFlags) -> anyhow::Result<()> {
    let target = &target.reading(&flags.local);
    if flags.names.is_empty() && !flags.all {
        bail!("give the backups to verify, or --all");
    }
    if !flags.names.is_empty() && flags.all {
        bail!("give backup names or --all, not both");
    }
    let (subjects, keyring) = match &flags.provider {
        Some(_) => from_flags(target, &flags).await?,
        None => from_cluster(target, &flags).await?,
    };
    if keyring.is_empty() {
        bail!("no integrity keys to verify with");
    }
    if subjects.is_empty() {
        println!("No backups found.");
        return Ok(());
    }
    let mut failed = 0;
    for s in &subjects {
        // --sign adopts an unsigned backup only after a deep check.
        let deep_wanted = flags.deep || flags.sign;
        let (verdict, deep) = if deep_wanted {
            let c = server_integrity::deep_check_backup(
                s.store.as_ref(),
                &s.layout,
                &s.stored,
                &keyring,
                s.tenant.as_deref(),
            )
            .await
            .map_err(anyhow::Error::msg)?;
            (c.verdict, c.problems)
        } else {
            let c = server_integrity::check_backup(
                s.store.as_ref(),
                &s.layout,
                &s.stored,
                &keyring,
                s.tenant.as_deref(),
                Hash::AllBut(&[]),
            )
            .await
            .map_err(anyhow::Error::msg)?;
            (c.verdict, Vec::new())
        };
        let mut signed = false;
        if flags.sign && verdict == Verdict::Unsigned && deep.is_empty() {
            if s.read_only {
                bail!(
                    "--sign: backup {} is in a read-only location; sign it where it is written",
                    s.name
                );
            }
            sign_existing(s, &keyring).await?;
            signed = true;
        }
        let verdict = if verdict == Verdict::Unsigned && !deep.is_empty() {
            Verdict::Mismatch {
                reason: format!("unsigned, and the deep check failed: {}", deep[0]),
            }
        } else {
            verdict
        };
        let (line, ok) = verify_line(&s.name, &verdict, &deep, signed);
        println!("{line}");
        if !ok {
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} backup(s) not verified", subjects.len());
    }
    Ok(())
}

/// Writes the integrity record of an unsigned backup that passed the deep check: every
/// object as it is now.
async fn sign_existing(s: &Subject, keyring: &Keyring) -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let keys = s.layout.backup(&s.stored)?;
    let bucket = s.layout.bucket();
    let entries: Vec<ListEntry> = s
        .store
        .list(bucket, keys.dir(), None)
        .try_collect()
        .await
        .context("listing the backup's objects")?;
    let mut objects: BTreeMap<String, ObjectDigest> = BTreeMap::new();
    for e in entries {
        let ListEntry::Object(m) = e else { continue };
        let name = server_integrity::name_in(keys.dir(), &m.key).to_owned();
        let digest = server_integrity::digest_object(s.store.as_ref(), bucket, &m.key)
            .await
            .with_context(|| format!("reading {}", m.key))?;
        objects.insert(name, digest);
    }
    let record = server_integrity::sign(
        RecordKind::Backup,
        &s.name,
        s.tenant.as_deref(),
        objects,
        keyring,
    )
    .map_err(anyhow::Error::msg)?;
    server_integrity::put_record(s.store.as_ref(), bucket, &keys.integrity(), &record)
        .await
        .map_err(anyhow::Error::msg)
}

/// The keyring of a Secret manifest (YAML or JSON).
pub fn keyring_from_file(path: &std::path::Path) -> anyhow::Result<Keyring> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--keyring: reading {}", path.display()))?;
    let secret: Secret = serde_saphyr::from_str(&text)
        .with_context(|| format!("--keyring: {} is no Secret manifest", path.display()))?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    Keyring::from_data(&data).with_context(|| format!("--keyring: {}", path.display()))
}

async fn from_flags(target: &Target, f: &VerifyFlags) -> anyhow::Result<(Vec<Subject>, Keyring)> {
    let Some(path) = &f.keyring else {
        bail!("--keyring: required without a cluster (the integrity keys Secret as YAML)");
    };
    let keyring = keyring_from_file(path)?;
    let config = flags::parse_map("--config", &f.config)?;
    let credential = match &f.credentials_file {
        Some(p) => Some(
            std::fs::read(p)
                .with_context(|| format!("--credentials-file: reading {}", p.display()))?,
        ),
        None => None,
    };
    let access = granary_velero_server::location::location_access(
        f.provider.as_deref().unwrap_or_default(),
        f.bucket.as_deref().unwrap_or_default(),
        f.prefix.as_deref(),
        &config,
        credential.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("the location: {e}"))?;
    let store = granary_providers::open(
        access.provider,
        access.region.as_deref(),
        &access.secret,
        &granary_providers::StoreOptions {
            local_root: target.data_dir.clone(),
            ..Default::default()
        },
    )
    .await
    .context("opening the location's store")?;
    let names = if f.all {
        granary_velero_server::backup_sync::backup_names(store.as_ref(), &access.layout)
            .await
            .context("listing the location's backups")?
    } else {
        f.names.clone()
    };
    Ok((
        names
            .into_iter()
            .map(|name| Subject {
                stored: name.clone(),
                name,
                read_only: false,
                store: store.clone(),
                layout: access.layout.clone(),
                tenant: None,
            })
            .collect(),
        keyring,
    ))
}

async fn from_cluster(target: &Target, f: &VerifyFlags) -> anyhow::Result<(Vec<Subject>, Keyring)> {
    let client = target.client().await?;
    let ns = target.namespace.as_str();
    let keyring = server_integrity::read(&client, ns)
        .await?
        .with_context(|| {
            format!(
                "no integrity keys in namespace {ns} (Secret {} is created by the server)",
                server_integrity::KEYS_SECRET
            )
        })?;
    let ctx = velero_context(target, client.clone());
    let api: Api<Backup> = Api::namespaced(client.clone(), ns);
    let backups: Vec<Backup> = if f.all {
        api.list(&Default::default()).await?.items
    } else {
        let mut out = Vec::new();
        for n in &f.names {
            out.push(
                api.get_opt(n)
                    .await?
                    .with_context(|| format!("backup {n:?} not found in namespace {ns}"))?,
            );
        }
        out
    };
    let locations: Api<BackupStorageLocation> = Api::namespaced(client, ns);
    // Each location opened once: its store, layout and namespace owner.
    type Opened = (Arc<dyn ObjectStore>, StorageLayout, Option<String>, bool);
    let mut opened: BTreeMap<String, Opened> = BTreeMap::new();
    let mut subjects = Vec::new();
    for b in backups {
        let Some(loc) = b.spec.storage_location.clone().filter(|l| !l.is_empty()) else {
            eprintln!("{}: names no storage location; skipped", b.name_any());
            continue;
        };
        if !opened.contains_key(&loc) {
            let location = locations
                .get_opt(&loc)
                .await?
                .with_context(|| format!("backup {}: location {loc:?} not found", b.name_any()))?;
            let tenant = granary_velero_server::location::tenant_namespace(&location);
            let read_only = location.spec.access_mode
                == Some(granary_api::velero::BackupStorageLocationAccessMode::ReadOnly);
            let open = ctx
                .open(location)
                .await
                .map_err(|e| anyhow::anyhow!("location {loc:?}: {e}"))?;
            opened.insert(
                loc.clone(),
                (open.store, open.access.layout, tenant, read_only),
            );
        }
        let (store, layout, tenant, read_only) = opened[&loc].clone();
        subjects.push(Subject {
            name: b.name_any(),
            stored: b.stored_name(),
            read_only,
            store,
            layout,
            tenant,
        });
    }
    Ok((subjects, keyring))
}

/// A context for the controllers' functions the CLI calls itself (dry runs, rehearsals,
/// opening locations), with the keys of the Velero namespace loaded (never created).
pub fn velero_context(
    target: &Target,
    client: Client,
) -> granary_velero_server::context::VeleroContext {
    granary_velero_server::context::VeleroContext::new(
        client,
        granary_velero_server::settings::VeleroSettings {
            namespace: target.namespace.clone(),
            ..Default::default()
        },
        granary_providers::StoreOptions {
            local_root: target.data_dir.clone(),
            ..Default::default()
        },
        granary_runtime::clock::Clock::system(),
        granary_velero_server::metrics::VeleroMetrics::new(
            &granary_runtime::metrics::Metrics::new(),
        ),
        granary_runtime::selector::ObjectSelector::new(None),
    )
}

/// [`velero_context`] with the keys read from the namespace's Secret.
pub async fn velero_context_with_keys(
    target: &Target,
    client: Client,
) -> anyhow::Result<granary_velero_server::context::VeleroContext> {
    let ctx = velero_context(target, client.clone());
    if let Some(ring) = server_integrity::read(&client, &target.namespace).await? {
        ctx.keys.set(ring);
    }
    Ok(ctx)
}

/// `granary integrity …`: the signing keys of a Velero namespace (`granary server`'s, a
/// seed's copy) or, with `-n garden` against the garden, the landscape's.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum IntegrityCommand {
    /// List the key ids, oldest first (the last signs); never the keys.
    Keys,
    /// Add a fresh key, which signs new backups from now on; older keys keep verifying
    /// what they signed until removed.
    Rotate,
    /// Remove a key: what it signed no longer verifies (`unknown-key`). The newest key
    /// cannot be removed.
    RemoveKey {
        /// The key id (`k1`, `k2`, …).
        id: String,
    },
}

/// Runs one `granary integrity` subcommand.
pub async fn run(target: &Target, command: IntegrityCommand) -> anyhow::Result<()> {
    let client = target.client().await?;
    let ns = target.namespace.as_str();
    match command {
        IntegrityCommand::Keys => {
            for id in server_integrity::list(&client, ns).await? {
                println!("{id}");
            }
        }
        IntegrityCommand::Rotate => {
            let id = server_integrity::rotate(&client, ns).await?;
            println!(
                "Key {id} added to Secret {ns}/{}: new backups are signed with it.",
                server_integrity::KEYS_SECRET
            );
        }
        IntegrityCommand::RemoveKey { id } => {
            server_integrity::remove(&client, ns, &id).await?;
            println!(
                "Key {id} removed from Secret {ns}/{}: what it signed is now unknown-key.",
                server_integrity::KEYS_SECRET
            );
        }
    }
    Ok(())
}

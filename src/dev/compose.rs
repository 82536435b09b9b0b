//! Bringing the dev landscape up and down: one embedded API server for the garden and one
//! per seed (durable under the data directory, with the CA, token and port of the
//! previous run, the port when it is free), the CRDs, the sample landscape on a fresh start, the garden
//! controllers, one seed agent per Seed, and one health/metrics server for all of them.
//!
//! Data directory layout:
//! ```text
//! <data-dir>/garden/               the garden API server's state
//! <data-dir>/seeds/<name>/         each seed API server's state
//! <data-dir>/buckets/              the `local` object store
//! <data-dir>/garden.kubeconfig     kubeconfigs, rewritten on every start (the same
//!                                  unless a port was taken meanwhile)
//! <data-dir>/seed-<name>.kubeconfig
//! <data-dir>/team-a.kubeconfig     the sample namespace owner's (see [`crate::dev::owner`])
//! <data-dir>/owner-tokens.csv      the owner's token, for the owner's seed's API server
//! <data-dir>/granary.log           the logs while the live view owns the terminal
//! ```
//!
//! The state holds every Secret (real cloud credentials with `--provider`) and the
//! kubeconfigs hold admin tokens: the data directory is 0700 and every file `granary dev`
//! writes there is created 0600; what an older run left wider is tightened at start.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::dev::DevError;
use crate::dev::landscape::Landscape;
use crate::dev::metrics::Components;
use crate::dev::provider::BackupStore;
use granary_api::core::Seed;
use granary_api::crds::{self, Side};
use granary_apiserver::{EmbeddedOptions, EmbeddedServer};
use granary_garden::config::{GardenConfiguration, ProviderQuota};
use granary_garden::{GardenController, RunningGarden};
use granary_runtime::config::ConfigDuration;
use granary_runtime::health::{HealthServer, ReadinessFlag};
use granary_runtime::metrics::Metrics;
use granary_seed::config::SeedConfiguration;
use granary_seed::{RunningSeed, SeedAgent};
use granary_velero_server::settings::VeleroSettings;

/// The entries of the data directory `--reset` removes (and nothing else, so a data
/// directory pointed at a folder with other files loses only what `granary dev` made).
const OWNED: [&str; 5] = [
    "garden",
    "seeds",
    "buckets",
    "granary.log",
    crate::dev::owner::TOKEN_FILE,
];

/// How long shutting down may take before the rest is abandoned.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);

/// How often a seed's mirror looks at every object again without a trigger (API calls
/// only, no provider calls). Short, because a mirror is not woken when a bucket held by
/// another seed becomes ready: an entry whose bucket is on another seed would otherwise
/// wait for the 5-minute default before it goes from waiting to Succeeded.
const RESYNC: Duration = Duration::from_secs(5);

/// The file in the data directory that keeps the metrics port chosen when the default
/// one was taken.
pub const METRICS_PORT_FILE: &str = "metrics-port";

/// Serves /healthz, /readyz and /metrics on `address`; when that is taken and
/// `fallback_in` names the data directory, on the port that directory had before (so a
/// dashboard or a scrape keeps working across restarts), else on any free one, which is
/// then remembered there.
async fn serve_health(
    address: &str,
    fallback_in: Option<&Path>,
    served: Metrics,
    ready: ReadinessFlag,
) -> Result<HealthServer, DevError> {
    let e = match HealthServer::start(address, served.clone(), ready.clone()).await {
        Ok(h) => return Ok(h),
        Err(e) => e,
    };
    let Some(data_dir) = fallback_in else {
        return Err(e.into());
    };
    tracing::info!(error = %e, address, "metrics address taken");
    let remembered = data_dir.join(METRICS_PORT_FILE);
    let before = std::fs::read_to_string(&remembered)
        .ok()
        .and_then(|p| p.trim().parse::<u16>().ok());
    if let Some(port) = before
        && let Ok(h) =
            HealthServer::start(&format!("127.0.0.1:{port}"), served.clone(), ready.clone()).await
    {
        return Ok(h);
    }
    let h = HealthServer::start("127.0.0.1:0", served, ready).await?;
    std::fs::write(&remembered, format!("{}\n", h.local_addr.port())).map_err(|source| {
        DevError::Io {
            what: format!("writing {}", remembered.display()),
            source,
        }
    })?;
    Ok(h)
}

/// What the landscape is started with.
#[derive(Clone, Debug)]
pub struct Plan {
    pub data_dir: PathBuf,
    pub grace_period: Duration,
    /// Seeds and shoots of a fresh landscape.
    pub seeds: usize,
    pub shoots: usize,
    /// Entries per bucket.
    pub quota: u32,
    pub store: BackupStore,
    /// Where /healthz, /readyz and /metrics are served; `fallback` allows a free port
    /// when that one is taken.
    pub metrics_address: String,
    pub metrics_fallback: bool,
}

impl Plan {
    pub fn garden_kubeconfig(&self) -> PathBuf {
        self.data_dir.join("garden.kubeconfig")
    }

    pub fn seed_kubeconfig(&self, seed: &str) -> PathBuf {
        self.data_dir.join(format!("seed-{seed}.kubeconfig"))
    }

    pub fn buckets_dir(&self) -> PathBuf {
        self.data_dir.join("buckets")
    }

    /// The sample namespace owner's kubeconfig.
    pub fn owner_kubeconfig(&self) -> PathBuf {
        self.data_dir
            .join(format!("{}.kubeconfig", crate::dev::owner::OWNER_NAMESPACE))
    }
}

/// One seed of the running landscape.
pub struct SeedSide {
    pub name: String,
    pub server: EmbeddedServer,
    /// A client of `server`.
    pub client: Client,
    agent: RunningSeed,
    metrics: Metrics,
}

/// The running landscape.
pub struct Running {
    pub garden: EmbeddedServer,
    pub garden_client: Client,
    pub seeds: Vec<SeedSide>,
    /// True when this start created the sample landscape (fresh data directory).
    pub created: bool,
    /// The Velero settings every seed runs with (namespace, default location).
    pub velero: VeleroSettings,
    /// The seed where the sample namespace owner owns `team-a` (none without seeds).
    pub owner_seed: Option<String>,
    pub health: HealthServer,
    controllers: RunningGarden,
    readiness: tokio::task::JoinHandle<()>,
    /// The shoots' control-plane stand-ins ([`crate::dev::control_planes`]).
    control_planes: (
        tokio_util::sync::CancellationToken,
        tokio::task::JoinHandle<()>,
    ),
}

/// Removes what `granary dev` keeps in `data_dir`.
/// The lock file of a data directory (never removed by `--reset`).
pub const LOCK_FILE: &str = "granary-dev.lock";

/// Takes the data directory's exclusive lock and writes this process's id into it, or
/// fails at once naming the process that holds it. The lock goes with the returned file
/// (when the process ends, however it ends).
pub fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, DevError> {
    use std::io::{Read, Seek, Write};
    let path = data_dir.join(LOCK_FILE);
    let io = |what: &str, source| DevError::Io {
        what: format!("{what} {}", path.display()),
        source,
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(&path).map_err(|e| io("opening", e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(DevError::Start(format!(
                "{} is in use by another granary dev{}: stop it first, or pass another --data-dir",
                data_dir.display(),
                if holder.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {holder})")
                }
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io("locking", e)),
    }
    file.set_len(0).map_err(|e| io("writing", e))?;
    file.rewind().map_err(|e| io("writing", e))?;
    write!(file, "{}", std::process::id()).map_err(|e| io("writing", e))?;
    file.flush().map_err(|e| io("writing", e))?;
    Ok(file)
}

#[cfg(test)]
mod lock_tests {
    use super::*;

    #[test]
    fn a_second_instance_is_refused_naming_the_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock_data_dir(dir.path()).expect("first lock");
        let e = lock_data_dir(dir.path()).expect_err("second refused");
        let text = e.to_string();
        assert!(text.contains("in use by another granary dev"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        drop(first);
        lock_data_dir(dir.path()).expect("free again once the first is gone");
    }
}

pub fn reset(data_dir: &Path) -> Result<(), DevError> {
    let io = |path: &Path, source| DevError::Io {
        what: format!("removing {}", path.display()),
        source,
    };
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = OWNED.contains(&name.as_str()) || name.ends_with(".kubeconfig");
        if !ours {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
        } else {
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        }
    }
    Ok(())
}

/// Creates `dir` (mode 0700) or tightens it to 0700 when an older run left it wider.
pub(crate) fn private_dir(dir: &Path) -> Result<(), DevError> {
    let io = |source| DevError::Io {
        what: format!("creating {}", dir.display()),
        source,
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).map_err(io)?;
    Ok(())
}

/// Opens (creating with mode 0600, or tightening to 0600) a file only the owner may
/// read: it is never world-readable, not even for a moment.
pub(crate) fn private_file(path: &Path, append: bool) -> Result<std::fs::File, DevError> {
    let io = |source| DevError::Io {
        what: format!("opening {}", path.display()),
        source,
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).append(append).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let file = opts.open(path).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
    }
    Ok(file)
}

/// Starts an embedded server on `data` and (re)writes its kubeconfig. The server keeps
/// its CA, token and port in `data` (the port when it is still free), so a kubeconfig
/// from an earlier run keeps working across restarts.
/// With `token_file`, the server also knows that file's users (authorized with RBAC).
async fn api_server(
    data: PathBuf,
    kubeconfig: &Path,
    token_file: Option<&Path>,
) -> Result<EmbeddedServer, DevError> {
    let opts = EmbeddedOptions {
        port: None,
        data_dir: Some(data),
    };
    let server = match token_file {
        Some(tokens) => EmbeddedServer::start_with_token_file(opts, tokens).await?,
        None => EmbeddedServer::start(opts).await?,
    };
    // Created 0600 here (an older run's file tightened) before the server writes the
    // token into it, so it is never readable by others.
    drop(private_file(kubeconfig, false)?);
    server.write_kubeconfig(kubeconfig)?;
    Ok(server)
}

/// Installs (or updates) the CRDs of `side` and waits until each is Established.
pub async fn install_crds(client: &Client, side: Side) -> Result<(), DevError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("granary-dev").force();
    let crds = crds::crds(Some(side));
    for crd in &crds {
        let name = crd.name_any();
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(|source| DevError::Kube {
                what: format!("installing CRD {name}"),
                source,
            })?;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for crd in &crds {
        let name = crd.name_any();
        loop {
            let established = api
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(DevError::Start(format!(
                    "CRD {name} did not become Established"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// The providers whose object stores Granary speaks: the dev quota holds for each, so a
/// profile or seed added later with another of them is sharded too.
const KNOWN_PROVIDERS: [&str; 4] = ["local", "aws", "azure", "gcp"];

/// The dev quota (`--quota`) for every provider the landscape may use: the known ones
/// and any other that a CloudProfile or Seed names in `spec.backup` (valid or not).
fn garden_configuration(quota: u32, named: &[String]) -> GardenConfiguration {
    let mut config = GardenConfiguration::default();
    // One process holds every controller: nothing to elect.
    config.leader_election.enabled = false;
    config.controllers.backup_bucket.quota = quota_providers(named)
        .into_iter()
        .map(|provider| ProviderQuota {
            provider,
            limit: quota,
        })
        .collect();
    config
}

fn quota_providers(named: &[String]) -> std::collections::BTreeSet<String> {
    KNOWN_PROVIDERS
        .iter()
        .map(|p| p.to_string())
        .chain(named.iter().filter(|p| !p.is_empty()).cloned())
        .collect()
}

/// Every provider the `spec.backup` of these profiles and seeds names (a profile's
/// machine type when its backup names none).
fn backup_providers<'a>(
    profiles: impl IntoIterator<Item = &'a granary_api::core::CloudProfile>,
    seeds: impl IntoIterator<Item = &'a Seed>,
) -> Vec<String> {
    let of_profiles = profiles.into_iter().filter_map(|p| {
        let backup = p.spec.backup.as_ref()?;
        Some(if backup.provider.is_empty() {
            p.spec.type_.clone()
        } else {
            backup.provider.clone()
        })
    });
    let of_seeds = seeds.into_iter().filter_map(|s| {
        let backup = s.spec.backup.as_ref()?;
        Some(if backup.provider.is_empty() {
            s.spec.provider.type_.clone()
        } else {
            backup.provider.clone()
        })
    });
    of_profiles.chain(of_seeds).collect()
}

fn seed_configuration(plan: &Plan, seed: &str) -> SeedConfiguration {
    let mut config = SeedConfiguration {
        seed_name: seed.to_string(),
        ..SeedConfiguration::default()
    };
    config.leader_election.enabled = false;
    config.controllers.backup_entry.deletion_grace_period = Some(ConfigDuration(plan.grace_period));
    // Namespace owners back up their own namespaces with OADP's non-admin API. With the
    // `local` store the landscape's buckets are directories on this machine, and a
    // namespace owner's own location may use them only because the admin (this
    // landscape) says so.
    config.velero.non_admin.enable = true;
    // A landscape to watch: another seed's new backups show up within seconds, not the
    // production minute (each seed's sibling locations and their sync follow this).
    config.velero.backup_sync_period = ConfigDuration(std::time::Duration::from_secs(5));
    if plan.store == BackupStore::Local {
        config.velero.non_admin.enforce_bsl_spec.provider = "local".into();
        config.velero.non_admin.allowed_local_buckets =
            vec![crate::dev::owner::OWNER_BUCKET.to_string()];
    }
    config
}

/// Brings the landscape up.
pub async fn start(plan: &Plan) -> Result<Running, DevError> {
    private_dir(&plan.data_dir)?;
    let fresh = !plan.data_dir.join("garden").exists();
    let garden = api_server(
        plan.data_dir.join("garden"),
        &plan.garden_kubeconfig(),
        None,
    )
    .await?;
    let garden_client = garden.client().await?;
    install_crds(&garden_client, Side::Garden).await?;

    let mut providers = Vec::new();
    if fresh {
        let landscape = Landscape::sample()?
            .sized(plan.seeds, plan.shoots)
            .with_store(&plan.store);
        landscape.create(&garden_client).await?;
        providers.push(landscape.backup_provider());
    }
    providers.extend(current_backup_providers(&garden_client).await?);

    let seeds: Api<Seed> = Api::all(garden_client.clone());
    let mut seed_names: Vec<String> = seeds
        .list(&ListParams::default())
        .await
        .map_err(|source| DevError::Kube {
            what: "listing seeds".into(),
            source,
        })?
        .items
        .iter()
        .map(|s| s.name_any())
        .collect();
    seed_names.sort();
    // The sample namespace owner lives on the first seed (none without seeds).
    let owner_seed = seed_names.first().cloned();
    let owner = crate::dev::owner::ensure_token_file(&plan.data_dir)?;

    // The seeds come first, so that every seed has renewed its liveness Lease when the
    // garden assigns the buckets: a bucket then goes to a seed of its own region.
    let components = Components::default();
    let seed_sides = futures::future::try_join_all(seed_names.into_iter().map(|name| {
        let owner = (Some(&name) == owner_seed.as_ref()).then_some(&owner);
        start_seed(plan, garden_client.clone(), name, owner)
    }))
    .await?;
    for side in &seed_sides {
        components.add(format!("seed-{}", side.name), side.metrics.clone());
    }
    seed_leases_renewed(&garden_client, &seed_sides).await;
    let garden_metrics = Metrics::new();
    components.add("garden", garden_metrics.clone());
    let controllers = GardenController::new(
        garden_client.clone(),
        garden_configuration(plan.quota, &providers),
    )
    .metrics(garden_metrics)
    .identity("granary-dev")
    .start()
    .map_err(|e| DevError::Start(format!("garden metrics: {e}")))?;
    let mut seed_clients = std::collections::HashMap::new();
    for side in &seed_sides {
        seed_clients.insert(side.name.clone(), side.client.clone());
    }
    let stop_control_planes = tokio_util::sync::CancellationToken::new();
    let control_planes = tokio::spawn(crate::dev::control_planes::run(
        garden_client.clone(),
        seed_clients,
        stop_control_planes.clone(),
    ));
    let mut readiness = vec![controllers.readiness()];
    readiness.extend(seed_sides.iter().map(|s| s.agent.readiness()));

    let ready = ReadinessFlag::default();
    let readiness = tokio::spawn(combine_readiness(readiness, ready.clone()));
    let served = components.registry();
    let health = serve_health(
        &plan.metrics_address,
        plan.metrics_fallback.then_some(plan.data_dir.as_path()),
        served,
        ready.clone(),
    )
    .await?;
    tracing::info!(
        address = %format!("http://{}/metrics", health.local_addr),
        "serving /healthz, /readyz and /metrics"
    );
    Ok(Running {
        garden,
        garden_client,
        seeds: seed_sides,
        created: fresh,
        velero: seed_configuration(plan, "").velero,
        owner_seed,
        health,
        controllers,
        readiness,
        control_planes: (stop_control_planes, control_planes),
    })
}

/// A seed's API server (with the seed CRDs) and its agent.
/// `owner`: this seed is the sample namespace owner's (token file and token).
async fn start_seed(
    plan: &Plan,
    garden: Client,
    name: String,
    owner: Option<&(PathBuf, crate::dev::owner::OwnerToken)>,
) -> Result<SeedSide, DevError> {
    let data = plan.data_dir.join("seeds").join(&name);
    let tokens = owner.map(|(path, _)| path.as_path());
    let server = api_server(data, &plan.seed_kubeconfig(&name), tokens).await?;
    let client = server.client().await?;
    install_crds(&client, Side::Seed).await?;
    if let Some((_, token)) = owner {
        crate::dev::owner::grant(&client).await?;
        crate::dev::owner::write_kubeconfig(&server, token, &plan.owner_kubeconfig())?;
        if plan.store == BackupStore::Local {
            // The bucket the admin gives the namespace owner for locations of their own.
            private_dir(&plan.buckets_dir().join(crate::dev::owner::OWNER_BUCKET))?;
        }
    }
    let metrics = Metrics::new();
    let agent = SeedAgent::new(garden, client.clone(), seed_configuration(plan, &name))
        .store_options(granary_providers::StoreOptions {
            local_root: Some(plan.buckets_dir()),
            ..granary_providers::StoreOptions::default()
        })
        .metrics(metrics.clone())
        .resync(RESYNC)
        .start()
        .await
        .map_err(|e| DevError::Start(format!("seed {name}: {e}")))?;
    Ok(SeedSide {
        name,
        server,
        client,
        agent,
        metrics,
    })
}

/// Waits (a few seconds at most) until every seed's liveness Lease in the garden has
/// been renewed. The agents renew it from a task of their own, so without waiting the
/// garden may assign a region's first bucket while that region's seed still looks
/// unready, to a seed of another region; that seed then holds it for good, and the
/// region's seed has no bucket for its default BackupStorageLocation.
async fn seed_leases_renewed(garden: &Client, seeds: &[SeedSide]) {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(garden.clone(), granary_api::core::GARDEN_NAMESPACE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for seed in seeds {
        let name = format!("seed-{}", seed.name);
        loop {
            let renewed = leases
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec)
                .is_some_and(|s| s.renew_time.is_some());
            if renewed {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                tracing::warn!(lease = %name, "seed liveness Lease not renewed yet; starting the garden anyway");
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The backup providers the landscape's CloudProfiles and Seeds name (for the quota).
async fn current_backup_providers(garden: &Client) -> Result<Vec<String>, DevError> {
    let listing = |what: &str, source| DevError::Kube {
        what: format!("listing {what}"),
        source,
    };
    let profiles = Api::<granary_api::core::CloudProfile>::all(garden.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| listing("cloud profiles", e))?;
    let seeds = Api::<Seed>::all(garden.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| listing("seeds", e))?;
    Ok(backup_providers(&profiles.items, &seeds.items))
}

/// Keeps `out` set while every flag in `parts` is.
async fn combine_readiness(parts: Vec<ReadinessFlag>, out: ReadinessFlag) {
    loop {
        out.set(parts.iter().all(ReadinessFlag::is_ready));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

impl Running {
    /// Stops the seed agents, the garden controllers, the health server and the API
    /// servers (flushing their state), in that order; gives up waiting after a few
    /// seconds so Ctrl-C always ends the process promptly.
    pub async fn shutdown(self) {
        let Running {
            garden,
            seeds,
            health,
            controllers,
            readiness,
            control_planes,
            ..
        } = self;
        readiness.abort();
        control_planes.0.cancel();
        control_planes.1.abort();
        let work = async move {
            let mut servers = Vec::new();
            let agents = seeds.into_iter().map(|s| {
                servers.push(s.server);
                s.agent.shutdown()
            });
            futures::future::join_all(agents.collect::<Vec<_>>()).await;
            controllers.stop().await;
            health.shutdown().await;
            servers.push(garden);
            futures::future::join_all(servers.into_iter().map(EmbeddedServer::shutdown)).await;
        };
        if tokio::time::timeout(SHUTDOWN_LIMIT, work).await.is_err() {
            tracing::warn!("shutdown took too long; stopping anyway (state on disk is kept)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_api::core::{BackupSpec, CloudProfile, CloudProfileSpec, SeedSpec};

    /// After a restart the quota once followed only the first profile with a
    /// `spec.backup`, so one with another provider sorting first (even an invalid one)
    /// left the landscape's real provider without a quota.
    #[test]
    fn the_dev_quota_holds_for_every_provider_the_landscape_names() {
        let profile = |name: &str, type_: &str, provider: &str| {
            CloudProfile::new(
                name,
                CloudProfileSpec {
                    type_: type_.into(),
                    backup: Some(BackupSpec {
                        provider: provider.into(),
                        ..BackupSpec::default()
                    }),
                    ..CloudProfileSpec::default()
                },
            )
        };
        let profiles = [
            profile("aaa-broken", "local", "openstack"),
            profile("europe", "local", ""),
        ];
        let mut seed = Seed::new("own", SeedSpec::default());
        seed.spec.backup = Some(BackupSpec {
            provider: "alicloud".into(),
            ..BackupSpec::default()
        });
        let named = backup_providers(&profiles, [&seed]);
        assert_eq!(named, ["openstack", "local", "alicloud"]);
        let config = garden_configuration(3, &named);
        for provider in ["local", "openstack", "alicloud", "aws", "azure", "gcp"] {
            assert_eq!(config.quota_for(provider), Some(3), "{provider}");
        }
        let quota = &config.controllers.backup_bucket.quota;
        let distinct: std::collections::BTreeSet<&str> =
            quota.iter().map(|q| q.provider.as_str()).collect();
        assert_eq!(distinct.len(), quota.len(), "one quota per provider");
    }

    #[test]
    fn namespace_owners_may_use_the_local_store_only_in_a_local_landscape() {
        let mut plan = Plan {
            data_dir: PathBuf::from("/nonexistent"),
            grace_period: Duration::from_secs(60),
            seeds: 1,
            shoots: 1,
            quota: 3,
            store: BackupStore::Local,
            metrics_address: "127.0.0.1:0".into(),
            metrics_fallback: true,
        };
        let velero = seed_configuration(&plan, "a").velero;
        assert!(velero.non_admin.enable);
        assert_eq!(velero.non_admin.enforce_bsl_spec.provider, "local");
        plan.store = BackupStore::Remote {
            provider: "aws".into(),
            region: "eu-west-1".into(),
            secret: std::collections::BTreeMap::new(),
        };
        let velero = seed_configuration(&plan, "a").velero;
        assert_eq!(velero.non_admin.enforce_bsl_spec.provider, "");
    }

    #[test]
    fn reset_removes_only_what_granary_dev_made() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["garden", "seeds/a", "buckets/b", "mine"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in [
            "garden.kubeconfig",
            "seed-a.kubeconfig",
            "team-a.kubeconfig",
            "owner-tokens.csv",
            "granary.log",
            "notes.txt",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        reset(dir.path()).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["mine", "notes.txt"]);
        reset(&dir.path().join("missing")).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_data_directory_and_its_files_are_private_and_old_ones_tightened() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("state");
        private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
        let kubeconfig = data.join("garden.kubeconfig");
        drop(private_file(&kubeconfig, false).unwrap());
        assert_eq!(mode(&kubeconfig), 0o600);

        // What an older run left: a 0755 directory and a 0644 kubeconfig.
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(&kubeconfig, "token: old").unwrap();
        std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644)).unwrap();
        private_dir(&data).unwrap();
        let mut log = private_file(&data.join("granary.log"), true).unwrap();
        std::io::Write::write_all(&mut log, b"line\n").unwrap();
        drop(private_file(&kubeconfig, false).unwrap());
        assert_eq!(mode(&data), 0o700, "data directory tightened");
        assert_eq!(mode(&kubeconfig), 0o600, "kubeconfig tightened");
        assert_eq!(mode(&data.join("granary.log")), 0o600, "log file");
        assert_eq!(
            std::fs::read_to_string(&kubeconfig).unwrap(),
            "token: old",
            "opening does not truncate; the server rewrites it"
        );
    }
}

#[cfg(test)]
mod health_tests {
    use super::*;

    /// With the default address taken, the port is chosen once per data directory and
    /// kept across restarts.
    #[tokio::test]
    async fn a_taken_metrics_address_falls_back_to_the_same_port_each_time() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = taken.local_addr().expect("address").to_string();
        let dir = tempfile::tempdir().expect("data dir");
        let serve = |fallback: bool| {
            let address = address.clone();
            let dir = dir.path().to_path_buf();
            async move {
                serve_health(
                    &address,
                    fallback.then_some(dir.as_path()),
                    Metrics::new(),
                    ReadinessFlag::default(),
                )
                .await
            }
        };
        let first = serve(true).await.expect("a free port");
        let port = first.local_addr.port();
        assert_ne!(first.local_addr.to_string(), address);
        let remembered = std::fs::read_to_string(dir.path().join(METRICS_PORT_FILE));
        assert_eq!(remembered.expect("remembered").trim(), port.to_string());
        first.shutdown().await;
        let again = serve(true).await.expect("a port");
        assert_eq!(
            again.local_addr.port(),
            port,
            "the same port after a restart"
        );
        // Without a fallback, a taken address is an error.
        assert!(serve(false).await.is_err());
    }
}

//! Integrity on the server's side (docs/formats.md#integrity-record): the signing keys
//! of the trust domain, writing a record beside what was stored, and checking a backup
//! (or a restore's files) at a location against its record. The record and every
//! decision are [`granary_velero::integrity`]'s; this is the I/O around them.
//!
//! **Keys** live in the Secret [`KEYS_SECRET`]: for `granary server`, in its own Velero
//! namespace, created with one fresh key when missing; in a landscape, in the garden's
//! `garden` namespace, created by the garden and read by every seed through the seed
//! authorizer (so any seed verifies any seed's backups), each seed keeping a copy in its
//! Velero namespace for the `granary` commands run against it. A namespace owner never
//! holds a key: their locations are signed with the server's. The keyring in memory follows the
//! Secret ([`maintain`]); if the server's own Secret is deleted, it is written back from
//! memory rather than replaced by a new key that would orphan every backup.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use granary_providers::{ListEntry, ObjectStore};
use granary_velero::integrity::{
    Digester, Expected, IntegrityRecord, Keyring, ObjectDigest, RecordKind, SignError, Verdict,
    verify_record,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

/// The Secret holding the signing keys (data: `k1`, `k2`, …; the highest signs).
pub const KEYS_SECRET: &str = granary_api::core::INTEGRITY_KEYS_SECRET;
/// Bytes of a fresh key.
const KEY_BYTES: usize = 32;

/// The keyring the controllers of one process sign and verify with, kept current by
/// [`maintain`].
#[derive(Clone, Default)]
pub struct Keys(Arc<RwLock<Keyring>>);

impl Keys {
    pub fn current(&self) -> Keyring {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn set(&self, ring: Keyring) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = ring;
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.current().fmt(f)
    }
}

/// Where a server's keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// Its own Secret in its Velero namespace, created when missing (`granary server`).
    Own,
    /// The landscape's, read from the garden's `namespace` (a seed): never created or
    /// changed here.
    Landscape { garden: Client, namespace: String },
}

/// Why the keys could not be read or changed. Never holds a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyProblem {
    #[error("Secret {namespace}/{KEYS_SECRET}: {message}")]
    Secret { namespace: String, message: String },
    #[error("Secret {namespace}/{KEYS_SECRET}: {source}")]
    Kube {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// A fresh random key. `rand`'s thread generator is a CSPRNG seeded from the OS.
pub fn fresh_key() -> Vec<u8> {
    let key: [u8; KEY_BYTES] = rand::random();
    key.to_vec()
}

fn keyring_of(secret: &Secret, namespace: &str) -> Result<Keyring, KeyProblem> {
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    Keyring::from_data(&data).map_err(|e| KeyProblem::Secret {
        namespace: namespace.to_owned(),
        message: e.to_string(),
    })
}

fn secret_of(ring: &Keyring) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(KEYS_SECRET.to_owned());
    s.metadata.labels = Some(BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_owned(),
        "granary".to_owned(),
    )]));
    s.type_ = Some("Opaque".to_owned());
    s.data = Some(
        ring.to_data()
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    s
}

fn kube_problem(namespace: &str) -> impl Fn(kube::Error) -> KeyProblem + '_ {
    move |source| KeyProblem::Kube {
        namespace: namespace.to_owned(),
        source,
    }
}

/// Reads the keyring of `namespace`; `None` when there is no Secret.
pub async fn read(client: &Client, namespace: &str) -> Result<Option<Keyring>, KeyProblem> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api
        .get_opt(KEYS_SECRET)
        .await
        .map_err(kube_problem(namespace))?
    {
        None => Ok(None),
        Some(s) => keyring_of(&s, namespace).map(Some),
    }
}

/// The keyring of `namespace`, the Secret created with one fresh key when missing (when
/// two create it at once, the first one's keys are everybody's).
pub async fn ensure(client: &Client, namespace: &str) -> Result<Keyring, KeyProblem> {
    if let Some(ring) = read(client, namespace).await? {
        if !ring.is_empty() {
            return Ok(ring);
        }
        return Err(KeyProblem::Secret {
            namespace: namespace.to_owned(),
            message: "holds no key (add one with `granary integrity rotate`)".into(),
        });
    }
    let (ring, _) =
        Keyring::default()
            .with_new_key(fresh_key())
            .map_err(|e| KeyProblem::Secret {
                namespace: namespace.to_owned(),
                message: e.to_string(),
            })?;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    match api.create(&PostParams::default(), &secret_of(&ring)).await {
        Ok(_) => {
            tracing::info!(
                namespace,
                secret = KEYS_SECRET,
                "created the integrity signing key"
            );
            Ok(ring)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            read(client, namespace)
                .await?
                .ok_or_else(|| KeyProblem::Secret {
                    namespace: namespace.to_owned(),
                    message: "created by someone else and gone again".into(),
                })
        }
        Err(e) => Err(kube_problem(namespace)(e)),
    }
}

/// Replaces the Secret's keys with `ring`, only if it is still at `resource_version`.
async fn replace(
    client: &Client,
    namespace: &str,
    mut current: Secret,
    ring: &Keyring,
) -> Result<(), KeyProblem> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    current.data = secret_of(ring).data;
    current.string_data = None;
    api.replace(KEYS_SECRET, &PostParams::default(), &current)
        .await
        .map_err(kube_problem(namespace))?;
    Ok(())
}

async fn get(client: &Client, namespace: &str) -> Result<(Secret, Keyring), KeyProblem> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api
        .get_opt(KEYS_SECRET)
        .await
        .map_err(kube_problem(namespace))?
        .ok_or_else(|| KeyProblem::Secret {
            namespace: namespace.to_owned(),
            message: "not found (a server creates it when it starts; in a landscape, the \
                      garden's namespace holds it)"
                .into(),
        })?;
    let ring = keyring_of(&secret, namespace)?;
    Ok((secret, ring))
}

/// Rotation: adds a fresh key, which signs from now on; the older ones keep verifying.
/// Returns the new key's id.
pub async fn rotate(client: &Client, namespace: &str) -> Result<String, KeyProblem> {
    let (secret, ring) = get(client, namespace).await?;
    let (ring, id) = ring
        .with_new_key(fresh_key())
        .map_err(|e| KeyProblem::Secret {
            namespace: namespace.to_owned(),
            message: e.to_string(),
        })?;
    replace(client, namespace, secret, &ring).await?;
    Ok(id)
}

/// Removes key `id`: what it signed no longer verifies (`unknown-key`). The newest key is
/// never removed (rotate first), so there is always one to sign with.
pub async fn remove(client: &Client, namespace: &str, id: &str) -> Result<(), KeyProblem> {
    let (secret, ring) = get(client, namespace).await?;
    let problem = |message: String| KeyProblem::Secret {
        namespace: namespace.to_owned(),
        message,
    };
    if ring.newest().map(|(n, _)| n).as_deref() == Some(id) {
        return Err(problem(format!(
            "{id} is the newest key, which signs new backups: rotate first, then remove it"
        )));
    }
    let Some(without) = ring.without(id) else {
        return Err(problem(format!(
            "has no key {id:?} (keys: {})",
            ring.ids().join(", ")
        )));
    };
    replace(client, namespace, secret, &without).await
}

/// The key ids of `namespace`'s keyring, oldest first.
pub async fn list(client: &Client, namespace: &str) -> Result<Vec<String>, KeyProblem> {
    Ok(get(client, namespace).await?.1.ids())
}

/// Keeps `keys` current from the source until dropped: the first read before returning
/// control to the watch (so controllers started after [`load`] sign at once), then every
/// change. A server's own Secret that is deleted is written back from memory.
pub async fn maintain(client: Client, namespace: String, source: KeySource, keys: Keys) {
    let (api, ns, own) = match &source {
        KeySource::Own => (
            Api::<Secret>::namespaced(client.clone(), &namespace),
            namespace.clone(),
            true,
        ),
        KeySource::Landscape { garden, namespace } => (
            Api::<Secret>::namespaced(garden.clone(), namespace),
            namespace.clone(),
            false,
        ),
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={KEYS_SECRET}"));
    // With the runtime's bounded back-off: a failing watch must not retry in a tight loop.
    let mut stream = watcher::watcher(api, config)
        .backoff(granary_runtime::backoff::WatchBackoff::default())
        .boxed();
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => {
                match keyring_of(&s, &ns) {
                    Ok(ring) if !ring.is_empty() => {
                        if !own {
                            mirror(&client, &namespace, &ring).await;
                        }
                        keys.set(ring);
                    }
                    Ok(_) => {
                        tracing::warn!(namespace = %ns, secret = KEYS_SECRET, "the integrity keys Secret holds no key; keeping the keys known")
                    }
                    Err(e) => tracing::warn!(error = %e, "integrity keys; keeping the keys known"),
                }
            }
            Ok(watcher::Event::Delete(s)) if own && s.name_any() == KEYS_SECRET => {
                let ring = keys.current();
                if ring.is_empty() {
                    continue;
                }
                tracing::warn!(namespace = %ns, secret = KEYS_SECRET, "the integrity keys Secret was deleted: writing back the keys known");
                let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
                if let Err(e) = api.create(&PostParams::default(), &secret_of(&ring)).await {
                    tracing::warn!(namespace = %ns, error = %e, "writing back the integrity keys");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "integrity keys watch"),
        }
    }
}

/// The first keyring of `source`: for [`KeySource::Own`] the Secret ensured, for a
/// landscape the garden's read and mirrored (`Ok(None)` while the garden has none yet).
pub async fn load(
    client: &Client,
    namespace: &str,
    source: &KeySource,
) -> Result<Option<Keyring>, KeyProblem> {
    match source {
        KeySource::Own => ensure(client, namespace).await.map(Some),
        KeySource::Landscape {
            garden,
            namespace: garden_namespace,
        } => {
            let ring = read(garden, garden_namespace).await?;
            if let Some(ring) = &ring {
                mirror(client, namespace, ring).await;
            }
            Ok(ring)
        }
    }
}

/// A seed keeps a copy of the landscape's keys in its Velero namespace (which namespace
/// owners cannot read), so `granary` commands run against the seed (`backup verify`,
/// `restore create --dry-run`) verify with them as its server does. Failures are logged:
/// the server itself works from memory.
async fn mirror(client: &Client, namespace: &str, ring: &Keyring) {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let result = match api.get_opt(KEYS_SECRET).await {
        Ok(None) => api
            .create(&PostParams::default(), &secret_of(ring))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Ok(Some(current)) => {
            if keyring_of(&current, namespace).ok().as_ref() == Some(ring) {
                return;
            }
            replace(client, namespace, current, ring)
                .await
                .map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = result {
        tracing::warn!(namespace, secret = KEYS_SECRET, error = %e, "copying the landscape's integrity keys into the seed");
    }
}

/// One object of a directory being checked.
struct Found {
    key: String,
    size: u64,
}

/// Lists every object under `dir` (no delimiter), keyed by its name inside `dir`.
async fn list_dir(
    store: &dyn ObjectStore,
    bucket: &str,
    dir: &str,
) -> Result<BTreeMap<String, Found>, granary_providers::Error> {
    let entries: Vec<ListEntry> = store.list(bucket, dir, None).try_collect().await?;
    Ok(entries
        .into_iter()
        .filter_map(|e| match e {
            ListEntry::Object(m) => Some(m),
            ListEntry::Prefix(_) => None,
        })
        .filter_map(|m| {
            let name = m.key.strip_prefix(dir)?.to_owned();
            Some((
                name,
                Found {
                    key: m.key,
                    size: m.size,
                },
            ))
        })
        .collect())
}

/// The digest of one stored object, read as a stream.
pub async fn digest_object(
    store: &dyn ObjectStore,
    bucket: &str,
    key: &str,
) -> Result<ObjectDigest, granary_providers::Error> {
    let mut stream = store.get(bucket, key).await?;
    let mut d = Digester::default();
    while let Some(chunk) = stream.next().await {
        d.update(&chunk?);
    }
    Ok(d.finish())
}

/// Where a record and what it covers are.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub bucket: &'a str,
    /// The directory (`…/backups/<name>/`), ending with `/`.
    pub dir: &'a str,
    /// The record's full key.
    pub record: &'a str,
    pub expected: Expected<'a>,
}

/// A check's outcome: the verdict and, when the record verified, the record (its
/// digests then are the written ones, for checking what the caller reads itself).
#[derive(Clone, Debug)]
pub struct Checked {
    pub verdict: Verdict,
    pub record: Option<IntegrityRecord>,
}

/// Which objects a check reads and hashes (the listing always covers all of them).
#[derive(Clone, Copy, Debug)]
pub enum Hash<'a> {
    /// Every object but these, which the caller checks with
    /// [`IntegrityRecord::check_object`] as it reads them (nothing is read twice).
    AllBut(&'a [&'a str]),
    /// Only this one (a download of one file).
    Only(&'a str),
}

impl Hash<'_> {
    fn wants(&self, name: &str) -> bool {
        match self {
            Hash::AllBut(skip) => !skip.contains(&name),
            Hash::Only(one) => *one == name,
        }
    }
}

/// Checks the directory against its record: the signature and binding, the listing
/// (nothing missing, added or resized), and the SHA-256 of the objects `hash` names. A
/// store error is `Err`: no verdict.
pub async fn check(
    store: &dyn ObjectStore,
    subject: Subject<'_>,
    keyring: &Keyring,
    hash: Hash<'_>,
) -> Result<Checked, granary_providers::Error> {
    let mut found = list_dir(store, subject.bucket, subject.dir).await?;
    let record_name = subject
        .record
        .strip_prefix(subject.dir)
        .unwrap_or(subject.record);
    if found.remove(record_name).is_none() {
        return Ok(Checked {
            verdict: Verdict::Unsigned,
            record: None,
        });
    }
    let data = granary_providers::get_bytes(store, subject.bucket, subject.record).await?;
    let record = match verify_record(&data, keyring, subject.expected) {
        Ok(r) => r,
        Err(verdict) => {
            return Ok(Checked {
                verdict,
                record: None,
            });
        }
    };
    let sizes: BTreeMap<String, u64> = found.iter().map(|(n, f)| (n.clone(), f.size)).collect();
    if let Err(verdict) = record.check_listing(&sizes) {
        return Ok(Checked {
            verdict,
            record: None,
        });
    }
    for (name, f) in &found {
        if !hash.wants(name) {
            continue;
        }
        let digest = digest_object(store, subject.bucket, &f.key).await?;
        if let Err(verdict) = record.check_object(name, &digest) {
            return Ok(Checked {
                verdict,
                record: None,
            });
        }
    }
    Ok(Checked {
        verdict: Verdict::Verified {
            key_id: record.key_id.clone(),
        },
        record: Some(record),
    })
}

/// Signs `objects` (names inside the directory → digests) with the keyring's newest key.
pub fn sign(
    kind: RecordKind,
    name: &str,
    tenant: Option<&str>,
    objects: BTreeMap<String, ObjectDigest>,
    keyring: &Keyring,
) -> Result<IntegrityRecord, String> {
    IntegrityRecord::sign(kind, name, tenant, objects, keyring).map_err(|e| match e {
        SignError::NoKey => format!(
            "cannot sign the integrity record: no signing key (Secret {KEYS_SECRET} not read \
             yet)"
        ),
        e => format!("cannot sign the integrity record: {e}"),
    })
}

/// Stores a signed record at `record_key`.
pub async fn put_record(
    store: &dyn ObjectStore,
    bucket: &str,
    record_key: &str,
    record: &IntegrityRecord,
) -> Result<(), String> {
    store
        .put(bucket, record_key, Bytes::from(record.to_bytes()))
        .await
        .map_err(|e| format!("error uploading {record_key} to object storage: {e}"))
}

/// The name of an object inside `dir` (its key without the directory).
pub fn name_in<'a>(dir: &str, key: &'a str) -> &'a str {
    key.strip_prefix(dir).unwrap_or(key)
}

/// The namespace owner a Velero Backup was made for: the origin namespace of a Backup
/// NAC's controller created for a NonAdminBackup (its labels and origin annotations),
/// `None` for an administrator's.
pub fn tenant_of_backup(backup: &granary_api::velero::Backup) -> Option<String> {
    use crate::nonadmin::plan::{Origin, nac_origin};
    nac_origin(Origin::Backup, backup.labels(), backup.annotations()).map(|(ns, _)| ns)
}

/// The namespace owner a Velero Restore was made for (a NonAdminRestore's namespace).
pub fn tenant_of_restore(restore: &granary_api::velero::Restore) -> Option<String> {
    use crate::nonadmin::plan::{Origin, nac_origin};
    nac_origin(Origin::Restore, restore.labels(), restore.annotations()).map(|(ns, _)| ns)
}

/// Keeps `ctx.keys` current until dropped: the first keyring loaded (retried until the
/// Secret can be read, and for a server's own, created), then [`maintain`]ed.
pub async fn run(ctx: Arc<crate::context::VeleroContext>) {
    let mut delay = std::time::Duration::from_millis(200);
    loop {
        match load(&ctx.client, ctx.namespace(), &ctx.key_source).await {
            Ok(Some(ring)) if !ring.is_empty() => {
                tracing::info!(keys = ?ring.ids(), "integrity signing keys loaded");
                ctx.keys.set(ring);
                break;
            }
            Ok(_) => tracing::warn!(
                "no integrity signing key yet (the garden creates the landscape's): backups \
                 cannot be signed, sync waits"
            ),
            Err(e) => tracing::warn!(error = %e, "integrity signing keys"),
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(std::time::Duration::from_secs(10));
    }
    maintain(
        ctx.client.clone(),
        ctx.namespace().to_owned(),
        ctx.key_source.clone(),
        ctx.keys.clone(),
    )
    .await;
}

/// Waits until `keys` holds a key, at most `timeout`.
pub async fn wait_for_keys(keys: &Keys, timeout: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    while keys.current().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Whether a restore may read a backup with `verdict`: `verified` always; `unsigned`
/// only for an administrator's restore that says so ([`ALLOW_UNVERIFIED_ANNOTATION`],
/// `granary restore create --allow-unverified`), never for a namespace owner's; a
/// `mismatch` or `unknown-key` never. `Err` is the validation error, naming what differs.
///
/// [`ALLOW_UNVERIFIED_ANNOTATION`]: granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION
pub fn restore_admits(
    verdict: &Verdict,
    backup: &str,
    for_tenant: bool,
    allow_unverified: bool,
) -> Result<(), String> {
    match verdict {
        Verdict::Verified { .. } => Ok(()),
        Verdict::Unsigned if for_tenant => Err(format!(
            "backup {backup} is unsigned (no integrity record): a namespace owner's restore \
             reads only backups Granary signed"
        )),
        Verdict::Unsigned if allow_unverified => Ok(()),
        Verdict::Unsigned => Err(format!(
            "backup {backup} is unsigned (no integrity record: written by Velero or an older \
             Granary); an administrator restores it with --allow-unverified (annotation {}: \
             \"true\")",
            granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION
        )),
        Verdict::UnknownKey { .. } | Verdict::Mismatch { .. } => Err(format!(
            "backup {backup} failed its integrity check, nothing is restored from it: {}",
            verdict.describe()
        )),
    }
}

/// Whether `restore` carries an administrator's [`ALLOW_UNVERIFIED_ANNOTATION`].
///
/// [`ALLOW_UNVERIFIED_ANNOTATION`]: granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION
pub fn allows_unverified(restore: &granary_api::velero::Restore) -> bool {
    restore
        .annotations()
        .get(granary_api::velero::ALLOW_UNVERIFIED_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// Checks backup `name` at an opened location for a read, hashing what `hash` names,
/// with the tenant binding `tenant` (see [`Expected`]).
pub async fn check_backup(
    store: &dyn ObjectStore,
    layout: &granary_velero::layout::StorageLayout,
    name: &str,
    keyring: &Keyring,
    tenant: Option<&str>,
    hash: Hash<'_>,
) -> Result<Checked, String> {
    let keys = layout
        .backup(name)
        .map_err(|e| format!("backup {name}: {e}"))?;
    let record = keys.integrity();
    check(
        store,
        Subject {
            bucket: layout.bucket(),
            dir: keys.dir(),
            record: &record,
            expected: Expected {
                kind: RecordKind::Backup,
                name,
                tenant,
            },
        },
        keyring,
        hash,
    )
    .await
    .map_err(|e| format!("error reading backup {name} to check its integrity: {e}"))
}

/// Checks the files of restore `name` at an opened location, hashing what `hash` names.
pub async fn check_restore(
    store: &dyn ObjectStore,
    layout: &granary_velero::layout::StorageLayout,
    name: &str,
    keyring: &Keyring,
    hash: Hash<'_>,
) -> Result<Checked, String> {
    let keys = layout
        .restore(name)
        .map_err(|e| format!("restore {name}: {e}"))?;
    let record = keys.integrity();
    check(
        store,
        Subject {
            bucket: layout.bucket(),
            dir: keys.dir(),
            record: &record,
            expected: Expected {
                kind: RecordKind::Restore,
                name,
                tenant: None,
            },
        },
        keyring,
        hash,
    )
    .await
    .map_err(|e| format!("error reading restore {name}'s files to check their integrity: {e}"))
}

/// What [`deep_check_backup`] found.
#[derive(Clone, Debug)]
pub struct DeepChecked {
    pub verdict: Verdict,
    /// The deep check's problems (empty when sound, or when the verdict ruled it out).
    pub problems: Vec<String>,
}

/// The record check of backup `name` ([`check_backup`]) and, for a verified or unsigned
/// backup, the deep check: the tarball read item by item with the archive reader's
/// checks (what `granary archive verify` reports) and compared with the stored manifest,
/// and the stored resource list compared with the manifest. The tarball is read once:
/// hashed against the record while it is parsed, the manifest and resource list read
/// meanwhile. Velero's own backups carry no manifest: their tarball is checked alone.
pub async fn deep_check_backup(
    store: &dyn ObjectStore,
    layout: &granary_velero::layout::StorageLayout,
    name: &str,
    keyring: &Keyring,
    tenant: Option<&str>,
) -> Result<DeepChecked, String> {
    let keys = layout
        .backup(name)
        .map_err(|e| format!("backup {name}: {e}"))?;
    let contents = keys.contents();
    let tarball_name = name_in(keys.dir(), &contents).to_owned();
    let bucket = layout.bucket();
    let optional = |r: Result<Bytes, granary_providers::Error>, what: &str| match r {
        Ok(b) => Ok(Some(b)),
        Err(granary_providers::Error::NotFound(_)) => Ok(None),
        Err(e) => Err(format!("error reading {what} of backup {name}: {e}")),
    };
    // The record check and the reads of what the deep check needs, at once.
    let skip = [tarball_name.as_str()];
    let (manifest_key, list_key) = (keys.manifest(), keys.resource_list());
    let (checked, tarball, manifest, list) = tokio::join!(
        check_backup(store, layout, name, keyring, tenant, Hash::AllBut(&skip),),
        granary_providers::get_bytes(store, bucket, &contents),
        granary_providers::get_bytes(store, bucket, &manifest_key),
        granary_providers::get_bytes(store, bucket, &list_key),
    );
    let checked = checked?;
    if !matches!(
        checked.verdict,
        Verdict::Verified { .. } | Verdict::Unsigned
    ) {
        return Ok(DeepChecked {
            verdict: checked.verdict,
            problems: Vec::new(),
        });
    }
    let tarball =
        tarball.map_err(|e| format!("error reading the tarball of backup {name}: {e}"))?;
    let stored = StoredFiles {
        manifest: optional(manifest, "the manifest")?,
        list: optional(list, "the resource list")?,
        list_name: name_in(keys.dir(), &list_key).to_owned(),
    };
    // Parsing, hashing and reading the tarball are CPU work: off the async threads.
    let (problems, digest) = tokio::task::spawn_blocking(move || deep_problems(&tarball, stored))
        .await
        .map_err(|e| format!("reading the tarball stopped: {e}"))?;
    if let Some(record) = &checked.record
        && let Err(verdict) = record.check_object(&tarball_name, &digest)
    {
        return Ok(DeepChecked {
            verdict,
            problems: Vec::new(),
        });
    }
    Ok(DeepChecked {
        verdict: checked.verdict,
        problems,
    })
}

/// The manifest and resource list stored beside a tarball, as read.
struct StoredFiles {
    manifest: Option<Bytes>,
    list: Option<Bytes>,
    list_name: String,
}

/// The deep check's problems, and the digest of the tarball's bytes. The tarball is
/// read on this thread (inflated on others) while another reads the stored files.
fn deep_problems(tarball: &[u8], stored: StoredFiles) -> (Vec<String>, ObjectDigest) {
    use granary_velero::archive::ArchiveLimits;
    use granary_velero::files::ResourceListDigests;
    use granary_velero::inspect::{manifest_mismatch, verify_reader_rebuilt};
    use granary_velero::integrity::DigestingReader;
    use granary_velero::manifest::ItemDigests;
    let limits = ArchiveLimits::default();
    std::thread::scope(|s| {
        // The stored manifest as fingerprints, the resource list it implies, and the
        // stored list's.
        let side = s.spawn(|| {
            let mut problems = Vec::new();
            let mut expected = ResourceListDigests::default();
            let manifest = stored.manifest.as_ref().and_then(|m| {
                ItemDigests::read_gz_visiting(&m[..], limits.max_retained_bytes / 4, |i| {
                    expected.add_gv(&i.group, &i.version, &i.kind, &i.namespace, &i.name)
                })
                .map_err(|e| problems.push(format!("manifest.json.gz cannot be read: {e}")))
                .ok()
            });
            if let (Some(list), Some(_)) = (&stored.list, &manifest) {
                match ResourceListDigests::read_gz(&list[..], 64 << 20) {
                    Ok(l) if l == expected.finish() => {}
                    Ok(_) => problems.push(format!(
                        "{} does not list what the manifest holds",
                        stored.list_name
                    )),
                    Err(e) => problems.push(format!("the resource list cannot be read: {e}")),
                }
            }
            (manifest, problems)
        });
        let mut input = DigestingReader::new(tarball);
        let read = verify_reader_rebuilt(&mut input, &limits);
        // Reading from memory cannot fail.
        let digest = input.finish().unwrap_or_else(|_| ObjectDigest::of(tarball));
        let (manifest, side_problems) = side
            .join()
            .unwrap_or_else(|_| (None, vec!["reading the manifest stopped".into()]));
        let mut problems = side_problems;
        match read {
            Ok((report, rebuilt)) => {
                problems.extend(report.problems);
                if let Some(p) = manifest.and_then(|m| manifest_mismatch(&m, &rebuilt)) {
                    problems.push(p);
                }
            }
            Err(e) => problems.push(format!("the tarball is refused: {e}")),
        }
        (problems, digest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restores_read_verified_backups_and_unsigned_ones_only_when_an_admin_says_so() {
        let verified = Verdict::Verified {
            key_id: "k1".into(),
        };
        let mismatch = Verdict::Mismatch {
            reason: "b.tar.gz differs".into(),
        };
        let unknown = Verdict::UnknownKey {
            key_id: "k9".into(),
        };
        for tenant in [false, true] {
            for allow in [false, true] {
                assert!(restore_admits(&verified, "b", tenant, allow).is_ok());
                let e = restore_admits(&mismatch, "b", tenant, allow).unwrap_err();
                assert!(e.contains("b.tar.gz differs"), "{e}");
                let e = restore_admits(&unknown, "b", tenant, allow).unwrap_err();
                assert!(e.contains("k9"), "{e}");
            }
        }
        assert!(restore_admits(&Verdict::Unsigned, "b", false, true).is_ok());
        let e = restore_admits(&Verdict::Unsigned, "b", false, false).unwrap_err();
        assert!(e.contains("--allow-unverified"), "{e}");
        let e = restore_admits(&Verdict::Unsigned, "b", true, true).unwrap_err();
        assert!(e.contains("namespace owner"), "{e}");
    }
}

//! The decisions of the `download-request` controller, with no I/O: which object a
//! DownloadRequest's target names (Velero's `GetDownloadURL` mapping, keys from
//! [`granary_velero::layout`]), what to do with a request now (process, wait for its
//! expiry, delete it), and the one-time tokens behind the download URLs of `local`
//! locations, which cannot sign.

use chrono::{DateTime, Utc};
use granary_api::velero::{DownloadRequestPhase, DownloadRequestStatus, DownloadTargetKind};
use granary_velero::layout::{LayoutError, StorageLayout};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// How long a download URL (and so its request) lives: Velero's `DownloadURLTTL`.
pub const DOWNLOAD_URL_TTL: Duration = Duration::from_secs(10 * 60);

/// The key of the object `kind` names for backup or restore `name` (Velero's
/// `objectBackupStore.GetDownloadURL`).
pub fn target_key(
    layout: &StorageLayout,
    kind: DownloadTargetKind,
    name: &str,
) -> Result<String, LayoutError> {
    use DownloadTargetKind as K;
    if kind.is_restore_target() {
        let r = layout.restore(name)?;
        return Ok(match kind {
            K::RestoreLog => r.logs(),
            K::RestoreResults => r.results(),
            K::RestoreResourceList => r.resource_list(),
            K::RestoreItemOperations => r.item_operations(),
            _ => r.volume_info(),
        });
    }
    let b = layout.backup(name)?;
    Ok(match kind {
        K::BackupContents => b.contents(),
        K::BackupLog => b.logs(),
        K::BackupVolumeSnapshots => b.volume_snapshots(),
        K::BackupItemOperations => b.item_operations(),
        K::BackupResourceList => b.resource_list(),
        K::BackupResults => b.results(),
        K::CsiBackupVolumeSnapshots => b.csi_volume_snapshots(),
        K::CsiBackupVolumeSnapshotContents => b.csi_volume_snapshot_contents(),
        _ => b.volume_info(),
    })
}

/// Whether the object is gzip-compressed JSON or text that a client shows decompressed
/// (velero's `downloadrequest.Stream` gunzips every kind but the backup tarball).
pub fn gunzipped_by_clients(kind: DownloadTargetKind) -> bool {
    kind != DownloadTargetKind::BackupContents
}

/// What the controller does with a request now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Its expiration has passed: delete it (Velero's `deleteIfExpired`).
    Delete,
    /// Processed and not yet expired: look again at its expiration.
    WaitUntil(DateTime<Utc>),
    /// New: sign a URL (the expiration is set first, so a request that cannot be
    /// served still expires and goes away).
    Process,
}

pub fn step(status: Option<&DownloadRequestStatus>, now: DateTime<Utc>) -> Step {
    let expiration = status.and_then(|s| s.expiration);
    if let Some(at) = expiration
        && at <= now
    {
        return Step::Delete;
    }
    match (status.and_then(|s| s.phase), expiration) {
        (Some(DownloadRequestPhase::Processed), Some(at)) => Step::WaitUntil(at),
        _ => Step::Process,
    }
}

/// One-time download tokens for objects of `local` locations, held in memory by the
/// process that serves them. A URL carries an id (to find the entry) and a secret
/// token (compared in constant time); the first successful fetch, the expiry or the
/// request's deletion ends it. Tokens are never logged.
pub struct Tokens<T> {
    entries: Mutex<HashMap<String, Entry<T>>>,
}

struct Entry<T> {
    token: [u8; 32],
    request: String,
    expires: DateTime<Utc>,
    what: T,
}

/// A token as handed out: the URL path and query that redeem it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    pub id: String,
    pub token: String,
}

impl Issued {
    /// `/downloads/<id>?token=<token>`.
    pub fn path(&self) -> String {
        format!("/downloads/{}?token={}", self.id, self.token)
    }
}

impl<T> Default for Tokens<T> {
    fn default() -> Self {
        Tokens {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Tokens<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry<T>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new token for `what`, for DownloadRequest `request`, valid until `expires`.
    /// Expired entries are dropped on the way.
    pub fn issue(
        &self,
        request: &str,
        what: T,
        expires: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Issued {
        let token: [u8; 32] = rand::random();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut entries = self.lock();
        entries.retain(|_, e| e.expires > now);
        entries.insert(
            id.clone(),
            Entry {
                token,
                request: request.to_string(),
                expires,
                what,
            },
        );
        Issued {
            id,
            token: hex(&token),
        }
    }

    /// The object behind `id` if `token` is its token and it has not expired; the entry
    /// is used up either way once the token matches.
    pub fn redeem(&self, id: &str, token: &str, now: DateTime<Utc>) -> Option<T> {
        let mut entries = self.lock();
        let entry = entries.get(id)?;
        let given = unhex(token)?;
        if !bool::from(entry.token.ct_eq(&given)) {
            return None;
        }
        let entry = entries.remove(id)?;
        (entry.expires > now).then_some(entry.what)
    }

    /// Ends every token issued for `request` (it was deleted or re-processed).
    pub fn revoke(&self, request: &str) {
        self.lock().retain(|_, e| e.request != request);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use DownloadTargetKind as K;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    #[test]
    fn every_target_kind_maps_to_velero_s_key() {
        let layout = StorageLayout::new("bkt", Some("velero/seed")).expect("layout");
        let b = "velero/seed/backups/b1/b1";
        let r = "velero/seed/restores/r1/restore-r1";
        for (kind, key) in [
            (K::BackupContents, format!("{b}.tar.gz")),
            (K::BackupLog, format!("{b}-logs.gz")),
            (
                K::BackupVolumeSnapshots,
                format!("{b}-volumesnapshots.json.gz"),
            ),
            (
                K::BackupItemOperations,
                format!("{b}-itemoperations.json.gz"),
            ),
            (K::BackupResourceList, format!("{b}-resource-list.json.gz")),
            (K::BackupResults, format!("{b}-results.gz")),
            (K::BackupVolumeInfos, format!("{b}-volumeinfo.json.gz")),
            (
                K::CsiBackupVolumeSnapshots,
                format!("{b}-csi-volumesnapshots.json.gz"),
            ),
            (
                K::CsiBackupVolumeSnapshotContents,
                format!("{b}-csi-volumesnapshotcontents.json.gz"),
            ),
            (K::RestoreLog, format!("{r}-logs.gz")),
            (K::RestoreResults, format!("{r}-results.gz")),
            (K::RestoreResourceList, format!("{r}-resource-list.json.gz")),
            (
                K::RestoreItemOperations,
                format!("{r}-itemoperations.json.gz"),
            ),
            // Velero names this one without the `restore-` prefix.
            (
                K::RestoreVolumeInfo,
                "velero/seed/restores/r1/r1-volumeinfo.json.gz".to_string(),
            ),
        ] {
            let name = if kind.is_restore_target() { "r1" } else { "b1" };
            assert_eq!(
                target_key(&layout, kind, name).expect("key"),
                key,
                "{kind:?}"
            );
        }
        assert!(target_key(&layout, K::BackupLog, "../x").is_err());
        assert!(gunzipped_by_clients(K::BackupLog));
        assert!(!gunzipped_by_clients(K::BackupContents));
    }

    #[test]
    fn steps_follow_the_expiration() {
        let now = t("2026-01-01T00:00:00Z");
        assert_eq!(step(None, now), Step::Process);
        let new = DownloadRequestStatus {
            phase: Some(DownloadRequestPhase::New),
            expiration: Some(t("2026-01-01T00:05:00Z")),
            ..Default::default()
        };
        assert_eq!(step(Some(&new), now), Step::Process);
        let processed = DownloadRequestStatus {
            phase: Some(DownloadRequestPhase::Processed),
            ..new.clone()
        };
        assert_eq!(
            step(Some(&processed), now),
            Step::WaitUntil(t("2026-01-01T00:05:00Z"))
        );
        // Expired: deleted whatever the phase, as Velero does.
        for s in [&new, &processed] {
            assert_eq!(step(Some(s), t("2026-01-01T00:05:00Z")), Step::Delete);
        }
    }

    #[test]
    fn tokens_work_once_until_they_expire() {
        let now = t("2026-01-01T00:00:00Z");
        let later = t("2026-01-01T00:10:00Z");
        let tokens: Tokens<&str> = Tokens::default();
        let a = tokens.issue("req-a", "object-a", later, now);
        assert!(a.path().starts_with(&format!("/downloads/{}?token=", a.id)));
        // A wrong token does not use the entry up.
        let wrong = "0".repeat(64);
        assert_eq!(tokens.redeem(&a.id, &wrong, now), None);
        assert_eq!(tokens.redeem(&a.id, "short", now), None);
        assert_eq!(tokens.redeem(&a.id, &a.token, now), Some("object-a"));
        assert_eq!(tokens.redeem(&a.id, &a.token, now), None, "one time");

        let b = tokens.issue("req-b", "object-b", later, now);
        assert_eq!(tokens.redeem(&b.id, &b.token, later), None, "expired");
        let c = tokens.issue("req-c", "object-c", later, now);
        tokens.revoke("req-c");
        assert_eq!(tokens.redeem(&c.id, &c.token, now), None, "revoked");
        // Expired entries go when the next is issued.
        tokens.issue("req-d", "object-d", t("2026-01-01T00:01:00Z"), now);
        tokens.issue("req-e", "object-e", later, t("2026-01-01T00:02:00Z"));
        assert_eq!(tokens.len(), 1);
        assert_ne!(a.token, c.token);
    }
}

//! Leader election through a `coordination.k8s.io/v1` Lease (one per controller set: the
//! garden, or one seed). Only the leader runs its controllers; a standby takes over once
//! the leader's lease has expired; a leader that cannot renew within its renew deadline
//! stops its controllers at once. The same Lease mechanics renew a seed's liveness Lease
//! in the garden (docs/architecture.md#seed-liveness), through [`renew_lease`].

use crate::clock::{Clock, from_k8s, to_k8s};
use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// What the holder of a lease looks like to a candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    pub holder: Option<String>,
    pub renewed: Option<DateTime<Utc>>,
    pub duration: Duration,
}

/// What a candidate does about a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseAction {
    /// No Lease exists: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder's lease expired: take it (a transition).
    TakeOver,
    /// Somebody else holds a live lease: stand by.
    Wait,
}

/// The pure rule: a lease is live while `renewed + duration` is in the future.
pub fn lease_action(current: Option<&LeaseView>, me: &str, now: DateTime<Utc>) -> LeaseAction {
    let Some(lease) = current else {
        return LeaseAction::Create;
    };
    match lease.holder.as_deref() {
        Some(holder) if holder == me => LeaseAction::Renew,
        None | Some("") => LeaseAction::TakeOver,
        Some(_) => {
            let duration =
                chrono::Duration::from_std(lease.duration).unwrap_or(chrono::Duration::MAX);
            let expired = lease
                .renewed
                .is_none_or(|r| r.checked_add_signed(duration).is_some_and(|end| end <= now));
            if expired {
                LeaseAction::TakeOver
            } else {
                LeaseAction::Wait
            }
        }
    }
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        holder: spec.holder_identity,
        renewed: spec.renew_time.map(|t| from_k8s(t.0)),
        duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64),
    }
}

/// One attempt to hold lease `name`: creates, renews or takes it over as
/// [`lease_action`] decides. Returns whether `identity` holds it afterwards. Conflicts
/// (another candidate won the race) count as not holding it.
pub async fn renew_lease(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    duration: Duration,
    labels: &BTreeMap<String, String>,
    now: DateTime<Utc>,
) -> Result<bool, kube::Error> {
    let existing = api.get_opt(name).await?;
    let action = lease_action(existing.as_ref().map(view).as_ref(), identity, now);
    let micro = MicroTime(to_k8s(now));
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX).max(1);
    let result = match (action, existing) {
        (LeaseAction::Wait, _) => return Ok(false),
        (LeaseAction::Create, _) | (_, None) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    labels: (!labels.is_empty()).then(|| labels.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity.to_string()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(micro.clone()),
                    renew_time: Some(micro),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        (action, Some(mut lease)) => {
            let mut spec = lease.spec.take().unwrap_or_default();
            if action == LeaseAction::TakeOver {
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                spec.acquire_time = Some(micro.clone());
            }
            spec.holder_identity = Some(identity.to_string());
            spec.lease_duration_seconds = Some(seconds);
            spec.renew_time = Some(micro);
            lease.spec = Some(spec);
            // resourceVersion is kept, so a concurrent writer makes this a 409.
            api.replace(name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Timings of leader election (the `leaderElection` block of the configuration files).
#[derive(Clone, Debug)]
pub struct ElectionSettings {
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    pub labels: BTreeMap<String, String>,
}

/// Runs `work` only while holding the lease; returns when `shutdown` resolves, after
/// releasing the lease if held. `work` is started anew each time leadership is gained,
/// and dropped (cancelled) at once when it is lost.
pub async fn run_as_leader<W, F>(
    api: Api<Lease>,
    settings: ElectionSettings,
    clock: Clock,
    mut work: W,
    shutdown: impl Future<Output = ()>,
) -> Result<(), kube::Error>
where
    W: FnMut() -> F,
    F: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    loop {
        // Stand by until we hold the lease, saying who holds it whenever that changes.
        let mut holder_said: Option<String> = None;
        loop {
            match renew_lease(
                &api,
                &settings.lease_name,
                &settings.identity,
                settings.lease_duration,
                &settings.labels,
                clock.now(),
            )
            .await
            {
                Ok(true) => break,
                Ok(false) => {
                    let holder = api
                        .get_opt(&settings.lease_name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|l| l.spec)
                        .and_then(|s| s.holder_identity)
                        .unwrap_or_default();
                    if holder_said.as_ref() != Some(&holder) {
                        tracing::info!(lease = %settings.lease_name, holder = %holder, identity = %settings.identity, "leader election: standing by while {holder} holds the lease {}", settings.lease_name);
                        holder_said = Some(holder);
                    }
                }
                Err(e) => {
                    tracing::warn!(lease = %settings.lease_name, error = %e, "leader election: lease check failed")
                }
            }
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = tokio::time::sleep(settings.retry_period) => {}
            }
        }
        tracing::info!(lease = %settings.lease_name, identity = %settings.identity, "leader election: became leader");
        let task = work();
        tokio::pin!(task);
        let mut last_renewal = tokio::time::Instant::now();
        let mut work_done = false;
        let lost = loop {
            tokio::select! {
                _ = &mut shutdown => {
                    release(&api, &settings.lease_name, &settings.identity).await;
                    return Ok(());
                }
                _ = &mut task, if !work_done => {
                    // The work ended by itself: keep holding (and renewing) the lease
                    // until shutdown, so no standby starts the same work.
                    work_done = true;
                }
                _ = tokio::time::sleep(settings.retry_period) => {
                    match renew_lease(&api, &settings.lease_name, &settings.identity, settings.lease_duration, &settings.labels, clock.now()).await {
                        Ok(true) => last_renewal = tokio::time::Instant::now(),
                        Ok(false) => break "another candidate holds the lease",
                        Err(e) => tracing::warn!(lease = %settings.lease_name, error = %e, "leader election: renew failed"),
                    }
                    if last_renewal.elapsed() > settings.renew_deadline {
                        break "could not renew within the renew deadline";
                    }
                }
            }
        };
        tracing::warn!(lease = %settings.lease_name, reason = lost, "leader election: lost leadership; controllers stopped");
    }
}

/// Gives the lease up (so a standby need not wait for it to expire). Best effort.
pub async fn release(api: &Api<Lease>, name: &str, identity: &str) {
    let Ok(Some(mut lease)) = api.get_opt(name).await else {
        return;
    };
    let Some(spec) = lease.spec.as_mut() else {
        return;
    };
    if spec.holder_identity.as_deref() != Some(identity) {
        return;
    }
    spec.holder_identity = None;
    spec.renew_time = None;
    if let Err(e) = api.replace(name, &PostParams::default(), &lease).await {
        tracing::warn!(lease = %name, error = %e, "leader election: release failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
            + chrono::Duration::seconds(s)
    }

    fn held(by: &str, renewed: i64) -> LeaseView {
        LeaseView {
            holder: Some(by.into()),
            renewed: Some(t(renewed)),
            duration: Duration::from_secs(15),
        }
    }

    #[test]
    fn lease_rules() {
        assert_eq!(lease_action(None, "me", t(0)), LeaseAction::Create);
        assert_eq!(
            lease_action(Some(&held("me", 0)), "me", t(100)),
            LeaseAction::Renew
        );
        assert_eq!(
            lease_action(Some(&held("other", 0)), "me", t(14)),
            LeaseAction::Wait
        );
        assert_eq!(
            lease_action(Some(&held("other", 0)), "me", t(15)),
            LeaseAction::TakeOver
        );
        let released = LeaseView {
            holder: None,
            renewed: None,
            duration: Duration::from_secs(15),
        };
        assert_eq!(
            lease_action(Some(&released), "me", t(0)),
            LeaseAction::TakeOver
        );
        let never = LeaseView {
            holder: Some("other".into()),
            renewed: None,
            duration: Duration::from_secs(15),
        };
        assert_eq!(
            lease_action(Some(&never), "me", t(0)),
            LeaseAction::TakeOver
        );
    }
}

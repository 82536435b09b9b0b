//! How the seed gets back in touch with the garden after the garden was unreachable.
//!
//! Two delays used to stretch the catch-up to half a minute or more:
//! - kube-runtime's default watch back-off (0.8 s doubling to 30 s, plus up to 100 %
//!   jitter) kept a broken watch down that long after the garden was back. The seed's
//!   watches use [`granary_runtime::backoff::WatchBackoff`] instead.
//! - A garden watch resumes from its last resource version, so a garden object that did
//!   not change during the outage gets no event; a mirror pass that failed meanwhile
//!   waits out its own back-off (1 s doubling to 60 s). The [`GardenProbe`] notices the
//!   garden answering again and the failed keys are retried at once.

use crate::context::{Context, ReconcileError};
use granary_runtime::work_queue::WorkQueue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How often the probe asks a garden that did not answer.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// True when no API server answered: the request never got a response (connection
/// refused or cut, TLS or HTTP transport failure). An answer, even an error status, is
/// not this.
pub(crate) fn unanswered(e: &ReconcileError) -> bool {
    matches!(
        e,
        ReconcileError::Kube(kube::Error::HyperError(_) | kube::Error::Service(_))
    )
}

/// Watches for the garden coming back; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct GardenProbe {
    suspicion: Notify,
}

impl GardenProbe {
    /// A request got no answer: maybe the garden is gone (coalesced while probing).
    pub(crate) fn suspect(&self) {
        self.suspicion.notify_one();
    }

    /// Runs forever: on each suspicion asks `answers` (does the garden answer?); if it
    /// does not, asks again every `interval` until it does, then calls `back`. A
    /// suspicion the first answer dispels (the failure was elsewhere) calls nothing.
    pub(crate) async fn run<A, Fut, B>(&self, interval: Duration, answers: A, back: B)
    where
        A: Fn() -> Fut,
        Fut: Future<Output = bool>,
        B: Fn(),
    {
        loop {
            self.suspicion.notified().await;
            if answers().await {
                continue;
            }
            tracing::warn!("the garden does not answer; probing until it does");
            loop {
                tokio::time::sleep(interval).await;
                if answers().await {
                    break;
                }
            }
            tracing::info!("the garden answers again; retrying what failed meanwhile");
            back();
        }
    }
}

/// Runs `probe` for the mirror: once the garden answers again, every key of `queues`
/// (controller name, its queue) with a recorded failure runs at once.
pub(crate) async fn retry_when_garden_is_back(
    ctx: Arc<Context>,
    probe: Arc<GardenProbe>,
    queues: Vec<(&'static str, WorkQueue<String>)>,
) {
    probe
        .run(
            PROBE_INTERVAL,
            || {
                let garden = ctx.garden.clone();
                async move { garden_answers(&garden).await }
            },
            || {
                for (controller, queue) in &queues {
                    for key in ctx.failing(&format!("{controller}/")) {
                        queue.trigger(key);
                    }
                }
            },
        )
        .await
}

/// Whether `garden` answers at all (any HTTP response counts).
async fn garden_answers(garden: &kube::Client) -> bool {
    match garden.apiserver_version().await {
        Ok(_) => true,
        Err(e) => !unanswered(&ReconcileError::Kube(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Waits (real time, with a deadline) until `done` holds.
    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    #[tokio::test]
    async fn probe_calls_back_once_the_garden_answers_again() {
        let interval = Duration::from_millis(20);
        let probe = Arc::new(GardenProbe::default());
        let up = Arc::new(AtomicBool::new(true));
        let asked = Arc::new(AtomicUsize::new(0));
        let backs = Arc::new(AtomicUsize::new(0));
        let task = {
            let (probe, up, asked, backs) =
                (probe.clone(), up.clone(), asked.clone(), backs.clone());
            tokio::spawn(async move {
                probe
                    .run(
                        interval,
                        || {
                            asked.fetch_add(1, Ordering::SeqCst);
                            let up = up.load(Ordering::SeqCst);
                            async move { up }
                        },
                        || {
                            backs.fetch_add(1, Ordering::SeqCst);
                        },
                    )
                    .await
            })
        };
        // A failure elsewhere: the garden answers, nothing to do.
        probe.suspect();
        until("asked once", || asked.load(Ordering::SeqCst) == 1).await;
        assert_eq!(backs.load(Ordering::SeqCst), 0);

        // The garden is down; suspicions meanwhile are coalesced into one.
        up.store(false, Ordering::SeqCst);
        probe.suspect();
        until("probing", || asked.load(Ordering::SeqCst) >= 4).await;
        probe.suspect();
        probe.suspect();
        assert_eq!(backs.load(Ordering::SeqCst), 0, "not while down");
        // (A current-thread runtime: the probe does not run between these two lines.)
        let asked_while_down = asked.load(Ordering::SeqCst);
        up.store(true, Ordering::SeqCst);
        until("called back", || backs.load(Ordering::SeqCst) == 1).await;
        // One answered probe, then one question for the coalesced suspicion; no call.
        until("coalesced suspicion checked", || {
            asked.load(Ordering::SeqCst) == asked_while_down + 2
        })
        .await;
        tokio::time::sleep(interval * 3).await;
        assert_eq!(asked.load(Ordering::SeqCst), asked_while_down + 2);
        assert_eq!(backs.load(Ordering::SeqCst), 1);
        task.abort();
    }
}

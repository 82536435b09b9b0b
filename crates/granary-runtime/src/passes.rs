//! The pass driver: a controller whose decision needs the whole set of its objects at
//! once (the backup queue orders every Backup, the restore queue admits by footprint, the
//! non-admin controllers match each tenant object with its Velero counterpart) lists
//! them and decides in one `pass`. This runs such a pass now, after every wake-up (a
//! watch event `poke`s the `Notify`) and at least every `every`; passes never overlap,
//! and events that arrive during a pass coalesce into one more pass. A failed pass is
//! logged and retried at the next wake-up. `docs/controllers.md` says when a controller
//! is driven this way rather than per object.

use std::future::Future;
use std::time::Duration;
use tokio::sync::Notify;

/// Runs `pass` forever: once now, then on each notification of `wake` (when given) or
/// after `every`, whichever comes first. `what` names the pass in the log line of a
/// failure.
pub async fn run_passes<F, Fut, E>(
    what: &'static str,
    wake: Option<&Notify>,
    every: Duration,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    loop {
        if let Err(e) = pass().await {
            tracing::warn!(error = %e, "{what}");
        }
        match wake {
            Some(wake) => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(every) => {}
                }
            }
            None => tokio::time::sleep(every).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    /// Starts a driver whose passes count themselves and fail (a failure is logged, the
    /// driver goes on).
    fn driver(
        wake: Option<Arc<Notify>>,
        every: Duration,
    ) -> (Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        let task = tokio::spawn(async move {
            run_passes("test pass failed", wake.as_deref(), every, || {
                let count = counted.clone();
                async move {
                    count.fetch_add(1, Ordering::SeqCst);
                    Err::<(), _>("failed")
                }
            })
            .await
        });
        (count, task)
    }

    async fn until(count: &AtomicUsize, at_least: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while count.load(Ordering::SeqCst) < at_least {
            assert!(Instant::now() < deadline, "{at_least} passes within 10 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_pass_runs_at_once_and_on_each_wake() {
        let wake = Arc::new(Notify::new());
        let (count, task) = driver(Some(wake.clone()), Duration::from_secs(3600));
        until(&count, 1).await;
        wake.notify_one();
        until(&count, 2).await;
        wake.notify_one();
        until(&count, 3).await;
        task.abort();
    }

    #[tokio::test]
    async fn without_a_wake_a_pass_runs_every_period() {
        let (count, task) = driver(None, Duration::from_millis(10));
        until(&count, 3).await;
        task.abort();
    }
}

//! Retries of single store requests: jittered exponential backoff (backon), only on
//! [`Error::Throttled`] and [`Error::Transient`], bounded in attempts and total delay.
//!
//! The SDKs' own retry loops are switched off (or set to one attempt) by each provider,
//! so the two never multiply: one logical request makes at most `max_attempts` HTTP
//! attempts. Every retry is counted in [`RetryStats`], which tests and metrics read.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::error::{Error, Result};

/// How hard to retry a failing request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (1 = no retries).
    pub max_attempts: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Upper bound on the sum of all delays of one request.
    pub max_total_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(10),
            max_total_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Fast retries for tests against loopback servers.
    pub fn fast(max_attempts: usize) -> Self {
        RetryPolicy {
            max_attempts,
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
            max_total_delay: Duration::from_secs(5),
        }
    }
}

/// Counters shared by all clones of a provider.
#[derive(Debug, Default)]
pub struct RetryStats {
    retries: AtomicU64,
    gave_up: AtomicU64,
}

impl RetryStats {
    /// Attempts made after a retryable failure.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }
    /// Requests that still failed with a retryable error after the last attempt.
    pub fn gave_up(&self) -> u64 {
        self.gave_up.load(Ordering::Relaxed)
    }
}

/// Runs request closures under a [`RetryPolicy`].
#[derive(Debug, Clone)]
pub(crate) struct Retrier {
    policy: RetryPolicy,
    stats: Arc<RetryStats>,
}

impl Retrier {
    pub(crate) fn new(policy: RetryPolicy) -> Self {
        Retrier {
            policy,
            stats: Arc::new(RetryStats::default()),
        }
    }

    pub(crate) fn stats(&self) -> Arc<RetryStats> {
        self.stats.clone()
    }

    /// Calls `op` until it succeeds, fails with a non-retryable error, or the policy is
    /// exhausted. `op` must be safe to repeat (every store request we make is
    /// idempotent: puts overwrite, deletes of absent keys succeed).
    pub(crate) async fn run<T, F, Fut>(&self, what: &str, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_jitter()
            .with_min_delay(self.policy.min_delay)
            .with_max_delay(self.policy.max_delay)
            .with_max_times(self.policy.max_attempts.saturating_sub(1))
            .with_total_delay(Some(self.policy.max_total_delay));
        let stats = &self.stats;
        let result = op
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(Error::is_retryable)
            .notify(|e: &Error, delay| {
                stats.retries.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(what, error = %e, ?delay, "retrying object store request");
            })
            .await;
        if let Err(e) = &result
            && e.is_retryable()
        {
            stats.gave_up.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test]
    async fn retries_only_retryable_and_counts() {
        let r = Retrier::new(RetryPolicy::fast(4));
        let calls = AtomicUsize::new(0);
        let out = r
            .run("t", || async {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                if n < 2 {
                    Err(Error::new(ErrorKind::Throttled, "slow down"))
                } else {
                    Ok(n)
                }
            })
            .await;
        assert_eq!(out, Ok(2));
        assert_eq!(r.stats().retries(), 2);

        let calls = AtomicUsize::new(0);
        let out: Result<()> = r
            .run("t", || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Error::new(ErrorKind::Unauthorized, "no"))
            })
            .await;
        assert_eq!(out.unwrap_err().kind(), ErrorKind::Unauthorized);
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let out: Result<()> = r
            .run("t", || async {
                Err(Error::new(ErrorKind::Transient, "reset"))
            })
            .await;
        assert_eq!(out.unwrap_err().kind(), ErrorKind::Transient);
        assert_eq!(r.stats().retries(), 2 + 3);
        assert_eq!(r.stats().gave_up(), 1);
    }
}

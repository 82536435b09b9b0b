//! The back-off of Granary's watches after an API server stopped answering: 0.5 s
//! doubling to 5 s plus up to 20 % jitter, instead of kube-runtime's default (0.8 s
//! doubling to 30 s plus up to 100 %), so a garden, seed or `granary dev` view is back
//! within seconds of its API server.

use std::time::Duration;

/// First wait after a watch error.
const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between two attempts to re-establish a watch (before jitter).
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The watch back-off of every Granary component: exponential, bounded by
/// [`WATCH_BACKOFF_MAX`] plus up to 20 % jitter, reset by the first event after a failure.
#[derive(Debug, Default)]
pub struct WatchBackoff {
    current: Option<Duration>,
}

impl WatchBackoff {
    /// The next delay without jitter.
    fn step(&mut self) -> Duration {
        let next = match self.current {
            None => WATCH_BACKOFF_MIN,
            Some(d) => (d * 2).min(WATCH_BACKOFF_MAX),
        };
        self.current = Some(next);
        next
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.step();
        Some(base.mul_f64(1.0 + 0.2 * rand::random::<f64>()))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_backoff_is_bounded_and_resets() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::default();
        let delays: Vec<Duration> = b.by_ref().take(12).collect();
        assert!(delays[0] >= WATCH_BACKOFF_MIN && delays[0] <= WATCH_BACKOFF_MIN.mul_f64(1.2));
        assert!(delays[1] >= WATCH_BACKOFF_MIN * 2);
        for d in &delays {
            assert!(*d <= WATCH_BACKOFF_MAX.mul_f64(1.2), "{d:?}");
        }
        assert!(delays[11] >= WATCH_BACKOFF_MAX, "reaches the cap");
        b.reset();
        assert!(b.next().unwrap() <= WATCH_BACKOFF_MIN.mul_f64(1.2));
    }
}

//! Time for controllers. Logic never calls `Utc::now()` itself: it asks a [`Clock`], which
//! is the system clock in production and a hand-moved one in tests, so grace periods,
//! lease expiry and TTLs are tested without waiting.

use chrono::{DateTime, Duration, Utc};
use std::sync::{Arc, Mutex};

/// A source of the current time. Cloning shares the same time source.
#[derive(Clone, Debug)]
pub struct Clock(Source);

#[derive(Clone, Debug)]
enum Source {
    System,
    Manual(Arc<Mutex<DateTime<Utc>>>),
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Clock(Source::System)
    }

    /// A clock that stands still at `start` until moved with [`Clock::advance`] or
    /// [`Clock::set`].
    pub fn manual(start: DateTime<Utc>) -> Self {
        Clock(Source::Manual(Arc::new(Mutex::new(start))))
    }

    /// The current time.
    pub fn now(&self) -> DateTime<Utc> {
        match &self.0 {
            Source::System => Utc::now(),
            Source::Manual(t) => *lock(t),
        }
    }

    /// Moves a manual clock forward. Has no effect on the system clock.
    pub fn advance(&self, by: Duration) {
        if let Source::Manual(t) = &self.0 {
            let mut guard = lock(t);
            *guard += by;
        }
    }

    /// Sets a manual clock. Has no effect on the system clock.
    pub fn set(&self, to: DateTime<Utc>) {
        if let Source::Manual(t) = &self.0 {
            *lock(t) = to;
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

fn lock(t: &Mutex<DateTime<Utc>>) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
    // A poisoned lock only means another thread panicked while holding a plain value;
    // the value itself is always consistent.
    t.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_it() {
        let start = Utc
            .with_ymd_and_hms(2024, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date");
        let clock = Clock::manual(start);
        let other = clock.clone();
        assert_eq!(clock.now(), start);
        other.advance(Duration::seconds(90));
        assert_eq!(clock.now(), start + Duration::seconds(90));
        clock.set(start);
        assert_eq!(other.now(), start);
    }

    #[test]
    fn system_clock_is_close_to_now() {
        let diff = Clock::system().now() - Utc::now();
        assert!(diff.num_seconds().abs() < 5);
    }
}

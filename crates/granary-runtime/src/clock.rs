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

/// Converts a Kubernetes timestamp (k8s-openapi's `jiff` based `Time`/`MicroTime` inner
/// value) into Granary's chrono time.
pub fn from_k8s(ts: k8s_openapi::jiff::Timestamp) -> DateTime<Utc> {
    let nanos = ts.as_nanosecond();
    let secs = nanos.div_euclid(1_000_000_000) as i64;
    let sub = nanos.rem_euclid(1_000_000_000) as u32;
    DateTime::from_timestamp(secs, sub).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Converts Granary's chrono time into the timestamp k8s-openapi's `Time`/`MicroTime` wrap.
pub fn to_k8s(t: DateTime<Utc>) -> k8s_openapi::jiff::Timestamp {
    let nanos = i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos());
    k8s_openapi::jiff::Timestamp::from_nanosecond(nanos)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod conversion_tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn k8s_time_round_trips() {
        let t = Utc
            .with_ymd_and_hms(2024, 5, 6, 7, 8, 9)
            .single()
            .expect("valid date")
            + Duration::microseconds(123_456);
        assert_eq!(from_k8s(to_k8s(t)), t);
        assert_eq!(to_k8s(t).to_string(), "2024-05-06T07:08:09.123456Z");
    }
}

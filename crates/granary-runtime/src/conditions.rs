//! Setting one Gardener condition in a status' `conditions` list the way every controller
//! should: `lastTransitionTime` moves only when the status changes, and nothing moves at
//! all when status, reason and message are unchanged (so an unchanged reconcile writes
//! nothing).

use chrono::{DateTime, Utc};
use granary_api::common::{Condition, ConditionStatus};

/// The list with condition `type_` set to (status, reason, message); others unchanged.
pub fn set_condition(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = conditions.to_vec();
    match out.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => {}
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.last_update_time = now;
        }
        None => out.push(Condition {
            type_: type_.to_string(),
            status,
            last_transition_time: now,
            last_update_time: now,
            reason: reason.to_string(),
            message: message.to_string(),
            codes: Vec::new(),
        }),
    }
    out
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

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let one = set_condition(&[], "A", ConditionStatus::True, "Ok", "fine", t(0));
        assert_eq!(one.len(), 1);
        assert_eq!(
            set_condition(&one, "A", ConditionStatus::True, "Ok", "fine", t(5)),
            one
        );
        let msg = set_condition(&one, "A", ConditionStatus::True, "Ok", "still fine", t(5));
        assert_eq!(msg[0].last_transition_time, t(0));
        assert_eq!(msg[0].last_update_time, t(5));
        let flipped = set_condition(&msg, "A", ConditionStatus::False, "Bad", "broken", t(9));
        assert_eq!(flipped[0].last_transition_time, t(9));
        let two = set_condition(&flipped, "B", ConditionStatus::Unknown, "R", "m", t(9));
        assert_eq!(two.len(), 2);
        assert_eq!(two[0], flipped[0]);
    }
}

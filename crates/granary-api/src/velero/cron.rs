//! Syntax check of a Schedule's `spec.schedule`, accepting what Velero's cron parser
//! (the standard 5-field form) accepts: `minute hour day-of-month month day-of-week`
//! with `*`, `?`, lists, ranges, steps and month/weekday names; the descriptors
//! `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`,
//! `@every <duration>`; and an optional `CRON_TZ=<zone> ` / `TZ=<zone> ` prefix.
//! It only checks syntax; computing run times is the schedule controller's business.

use super::Duration;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// Value of the first name (`jan` is 1, `sun` is 0).
    first_name_value: u32,
}

const FIELDS: [Field; 5] = [
    Field {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        first_name_value: 0,
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        first_name_value: 0,
    },
    Field {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
        first_name_value: 0,
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
        first_name_value: 1,
    },
    Field {
        name: "day of week",
        min: 0,
        max: 6,
        names: &WEEKDAYS,
        first_name_value: 0,
    },
];

/// Checks a cron expression; the error says what is wrong.
pub fn check_cron(expr: &str) -> Result<(), String> {
    let mut spec = expr.trim();
    if spec.is_empty() {
        return Err("empty cron expression".to_owned());
    }
    for tz in ["CRON_TZ=", "TZ="] {
        if let Some(rest) = spec.strip_prefix(tz) {
            let (zone, rest) = rest
                .split_once(' ')
                .ok_or("time zone prefix without expression")?;
            if zone.is_empty() {
                return Err("empty time zone".to_owned());
            }
            spec = rest.trim();
            break;
        }
    }
    if let Some(descriptor) = spec.strip_prefix('@') {
        return check_descriptor(descriptor);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
            fields.len()
        ));
    }
    for (text, field) in fields.iter().zip(FIELDS.iter()) {
        check_field(text, field)?;
    }
    Ok(())
}

fn check_descriptor(d: &str) -> Result<(), String> {
    match d {
        "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => Ok(()),
        _ => {
            let every = d
                .strip_prefix("every ")
                .ok_or_else(|| format!("unknown descriptor @{d}"))?;
            let delta = Duration::parse(every.trim())
                .and_then(|d| d.to_delta())
                .map_err(|e| e.to_string())?;
            if delta <= chrono::TimeDelta::zero() {
                return Err("@every needs a positive duration".to_owned());
            }
            Ok(())
        }
    }
}

fn check_field(text: &str, field: &Field) -> Result<(), String> {
    for part in text.split(',') {
        check_part(part, field).map_err(|e| format!("{} field {text:?}: {e}", field.name))?;
    }
    Ok(())
}

fn check_part(part: &str, field: &Field) -> Result<(), String> {
    let (range, step) = match part.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (part, None),
    };
    if let Some(step) = step {
        let n: u32 = step.parse().map_err(|_| format!("bad step {step:?}"))?;
        if n == 0 {
            return Err("step must be positive".to_owned());
        }
    }
    if range == "*" || range == "?" {
        return Ok(());
    }
    let (lo, hi) = match range.split_once('-') {
        Some((a, b)) => (value(a, field)?, value(b, field)?),
        None => {
            let v = value(range, field)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(format!("range start {lo} is beyond its end {hi}"));
    }
    Ok(())
}

fn value(text: &str, field: &Field) -> Result<u32, String> {
    let v = if let Some(i) = field
        .names
        .iter()
        .position(|n| n.eq_ignore_ascii_case(text))
    {
        // The index is below 12, so it fits.
        i as u32 + field.first_name_value
    } else {
        text.parse::<u32>()
            .map_err(|_| format!("bad value {text:?}"))?
    };
    if v < field.min || v > field.max {
        return Err(format!("{v} is out of range {}-{}", field.min, field.max));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::check_cron;

    #[test]
    fn accepts_standard_expressions() {
        for ok in [
            "0 1 * * *",
            "*/15 * * * *",
            "0 0 1,15 * 1-5",
            "30 2 * JAN,jul sun",
            "0 3 ? * MON-FRI",
            "5-10/2 0-23/6 1-31 1-12 0-6",
            "@daily",
            "@every 6h",
            "CRON_TZ=Europe/Berlin 0 1 * * *",
            "TZ=UTC @hourly",
        ] {
            assert_eq!(check_cron(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_bad_expressions_with_reason() {
        for (bad, why) in [
            ("", "empty"),
            ("0 1 * *", "expected 5 fields"),
            ("0 1 * * * *", "expected 5 fields"),
            ("60 * * * *", "minute field"),
            ("* 24 * * *", "hour field"),
            ("* * 0 * *", "day of month field"),
            ("* * * 13 *", "month field"),
            ("* * * * 7", "day of week field"),
            ("*/0 * * * *", "step must be positive"),
            ("5-1 * * * *", "range start"),
            ("@fortnightly", "unknown descriptor"),
            ("@every soon", "invalid duration"),
            ("x * * * *", "bad value"),
        ] {
            let e = check_cron(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}

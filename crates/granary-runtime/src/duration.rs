//! Durations as people write them in configuration files and Kubernetes objects: Go's
//! `time.ParseDuration` syntax (`10s`, `5m`, `72h`, `1h30m`, `500ms`, `720h0m0s`), and the
//! canonical Go rendering back (`72h0m0s`).

use std::time::Duration;

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses Go duration syntax: a sequence of decimal numbers with units `ns`, `us`
/// (or `µs`), `ms`, `s`, `m`, `h`; `0` alone is allowed. Negative durations are refused:
/// nothing in Granary waits a negative time.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit (use ns, us, ms, s, m or h)"))?;
        if num_len == 0 {
            return Err(err("expected a number"));
        }
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| err("malformed number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit: f64 = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(err("unknown unit (use ns, us, ms, s, m or h)")),
        };
        rest = &rest[unit_len..];
        total += value * nanos_per_unit;
    }
    if total > u64::MAX as f64 {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// Renders a duration as Go's `Duration.String()` does (`720h0m0s`, `1.5s`, `250ms`).
pub fn format_go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (value, unit) = if nanos < 1_000 {
            return format!("{nanos}ns");
        } else if nanos < 1_000_000 {
            (nanos as f64 / 1e3, "µs")
        } else {
            (nanos as f64 / 1e6, "ms")
        };
        return format!("{}{unit}", trim_float(value));
    }
    let total_secs = d.as_secs();
    let hours = total_secs / 3600;
    let minutes = (total_secs % 3600) / 60;
    let secs = (total_secs % 60) as f64 + f64::from(d.subsec_nanos()) / 1e9;
    let secs = trim_float(secs);
    if hours > 0 {
        format!("{hours}h{minutes}m{secs}s")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_go_syntax() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(
            parse_duration("72h").unwrap(),
            Duration::from_secs(72 * 3600)
        );
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(
            parse_duration("720h0m0s").unwrap(),
            Duration::from_secs(720 * 3600)
        );
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
    }

    #[test]
    fn refuses_bad_input_with_reason() {
        for bad in ["", "10", "h", "10x", "-5s", "1..2s", "s10"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.to_string().contains("invalid duration"), "{e}");
        }
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(
            format_go_duration(Duration::from_secs(720 * 3600)),
            "720h0m0s"
        );
        assert_eq!(format_go_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn format_then_parse_round_trips(ms in 0u64..10_000_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse_duration(&format_go_duration(d)).unwrap(), d);
        }
    }
}

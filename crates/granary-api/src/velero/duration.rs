//! Go `time.Duration` strings as Velero writes them (`"720h0m0s"`, `"10m"`, `"500ms"`).
//!
//! Velero's duration fields are `metav1.Duration`: on the wire a string in Go's
//! `time.ParseDuration` syntax. [`Duration`] keeps the exact string it was given, so an
//! object read and written back is unchanged (`"4h"` stays `"4h"`, it does not become
//! `"4h0m0s"`), and parses it on demand. Deserialising never fails on a bad string:
//! like every other field problem it is reported by validation with its field path, so
//! one bad object cannot break a whole list or watch.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use chrono::TimeDelta;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Go duration string, kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Duration(String);

/// Why a string is not a Go duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: {reason} (expected Go duration syntax such as \"720h0m0s\", \"10m\", \"1h30m\" or \"500ms\")"
)]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

const NANOS_PER_UNIT: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // U+00B5 micro sign
    ("\u{3bc}s", 1_000), // U+03BC Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

impl Duration {
    /// Parses `s` as a Go duration and keeps `s` verbatim.
    pub fn parse(s: &str) -> Result<Self, DurationError> {
        parse_go_duration(s)?;
        Ok(Duration(s.to_owned()))
    }

    /// The duration written the way Go's `Duration.String()` writes it
    /// (`720h0m0s`, `10m0s`, `500ms`, `0s`).
    pub fn from_delta(d: TimeDelta) -> Self {
        Duration(format_go_duration(d))
    }

    /// Hours, written as Go writes them (`hours(720)` is `"720h0m0s"`).
    pub fn hours(h: i64) -> Self {
        Self::from_delta(TimeDelta::hours(h))
    }

    /// Minutes, written as Go writes them (`minutes(10)` is `"10m0s"`).
    pub fn minutes(m: i64) -> Self {
        Self::from_delta(TimeDelta::minutes(m))
    }

    /// The string exactly as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The parsed value (may be negative, as in Go).
    pub fn to_delta(&self) -> Result<TimeDelta, DurationError> {
        parse_go_duration(&self.0)
    }

    /// The parsed value as a std duration; negative durations are an error.
    pub fn to_std(&self) -> Result<std::time::Duration, DurationError> {
        let d = self.to_delta()?;
        d.to_std().map_err(|_| DurationError {
            input: self.0.clone(),
            reason: "negative durations are not allowed here",
        })
    }

    /// True when the string parses to zero (Go's zero `metav1.Duration` is written `"0s"`),
    /// which Velero treats the same as an unset field.
    pub fn is_zero(&self) -> bool {
        matches!(self.to_delta(), Ok(d) if d.is_zero())
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Kept verbatim even when it does not parse: validation reports it with its path.
        String::deserialize(deserializer).map(Duration)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string" })
    }
}

fn err(input: &str, reason: &'static str) -> DurationError {
    DurationError {
        input: input.to_owned(),
        reason,
    }
}

/// Go's `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
fn parse_go_duration(input: &str) -> Result<TimeDelta, DurationError> {
    let mut s = input;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(TimeDelta::zero());
    }
    if s.is_empty() {
        return Err(err(input, "empty"));
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, rest) = s.split_at(int_len);
        s = rest;
        let mut frac_part = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &rest[..frac_len];
            s = &rest[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err(input, "a number is expected before each unit"));
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        if unit.is_empty() {
            return Err(err(input, "missing unit"));
        }
        let scale = NANOS_PER_UNIT
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, n)| *n)
            .ok_or_else(|| err(input, "unknown unit (use ns, us, ms, s, m or h)"))?;
        let too_big = || err(input, "out of range");
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| too_big())?
        };
        let mut nanos = whole.checked_mul(scale).ok_or_else(too_big)?;
        // Fractions beyond nanosecond precision are dropped, as in Go.
        let mut frac_scale = scale;
        for digit in frac_part.bytes() {
            frac_scale /= 10;
            if frac_scale == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * frac_scale;
        }
        total = total.checked_add(nanos).ok_or_else(too_big)?;
        if total > i64::MAX as u128 {
            return Err(too_big());
        }
    }
    let nanos = i64::try_from(total).map_err(|_| err(input, "out of range"))?;
    Ok(TimeDelta::nanoseconds(if negative {
        -nanos
    } else {
        nanos
    }))
}

/// Go's `Duration.String()`.
fn format_go_duration(d: TimeDelta) -> String {
    let Some(nanos) = d.num_nanoseconds() else {
        // Beyond Go's range (about 292 years); write whole hours instead.
        return format!("{}h0m0s", d.num_hours());
    };
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000_000_000 {
        let (scale, unit) = match u {
            0..1_000 => (1, "ns"),
            1_000..1_000_000 => (1_000, "\u{b5}s"),
            _ => (1_000_000, "ms"),
        };
        return format!("{sign}{}{unit}", fixed(u, scale));
    }
    let secs = u / 1_000_000_000;
    let frac = u % 1_000_000_000;
    let mut out = String::from(sign);
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if secs >= 60 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&fixed(s * 1_000_000_000 + frac, 1_000_000_000));
    out.push('s');
    out
}

/// `value / scale` with the fraction written without trailing zeros.
fn fixed(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> TimeDelta {
        parse_go_duration(s).unwrap()
    }

    #[test]
    fn parses_go_syntax() {
        assert_eq!(parse("720h0m0s"), TimeDelta::hours(720));
        assert_eq!(parse("10m"), TimeDelta::minutes(10));
        assert_eq!(parse("1h30m"), TimeDelta::minutes(90));
        assert_eq!(parse("500ms"), TimeDelta::milliseconds(500));
        assert_eq!(parse("1.5h"), TimeDelta::minutes(90));
        assert_eq!(parse(".5s"), TimeDelta::milliseconds(500));
        assert_eq!(parse("2us"), TimeDelta::microseconds(2));
        assert_eq!(parse("2\u{b5}s"), TimeDelta::microseconds(2));
        assert_eq!(parse("0"), TimeDelta::zero());
        assert_eq!(parse("0s"), TimeDelta::zero());
        assert_eq!(parse("-1m"), TimeDelta::minutes(-1));
        assert_eq!(parse("+3s"), TimeDelta::seconds(3));
    }

    #[test]
    fn rejects_non_go_syntax_with_a_clear_error() {
        for bad in [
            "",
            "10",
            "1d",
            "h",
            ".s",
            "1h 30m",
            "abc",
            "-",
            "9999999999999h",
        ] {
            let e = parse_go_duration(bad).unwrap_err();
            assert!(e.to_string().contains("invalid duration"), "{bad}: {e}");
        }
        assert!(
            parse_go_duration("10")
                .unwrap_err()
                .to_string()
                .contains("missing unit")
        );
        assert!(Duration::parse("-1h").unwrap().to_std().is_err());
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(Duration::hours(720).as_str(), "720h0m0s");
        assert_eq!(Duration::minutes(10).as_str(), "10m0s");
        assert_eq!(Duration::hours(4).as_str(), "4h0m0s");
        assert_eq!(Duration::from_delta(TimeDelta::seconds(30)).as_str(), "30s");
        assert_eq!(
            Duration::from_delta(TimeDelta::milliseconds(1500)).as_str(),
            "1.5s"
        );
        assert_eq!(
            Duration::from_delta(TimeDelta::milliseconds(500)).as_str(),
            "500ms"
        );
        assert_eq!(Duration::from_delta(TimeDelta::zero()).as_str(), "0s");
        assert_eq!(
            Duration::from_delta(TimeDelta::minutes(-90)).as_str(),
            "-1h30m0s"
        );
        for s in ["720h0m0s", "1h30m0s", "1.5s", "500ms", "1.5\u{b5}s", "3ns"] {
            assert_eq!(Duration::from_delta(parse(s)).as_str(), s);
        }
    }

    #[test]
    fn keeps_the_string_it_was_given() {
        let d: Duration = serde_json::from_str("\"4h\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"4h\"");
        let bad: Duration = serde_json::from_str("\"soon\"").unwrap();
        assert!(bad.to_delta().is_err());
        assert!(Duration::parse("0s").unwrap().is_zero());
    }
}

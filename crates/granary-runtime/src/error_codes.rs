//! From failures to Gardener error codes. Providers report typed failure kinds; the
//! controllers put the matching `ERR_*` codes into `lastError.codes` so Gardener's tools
//! and dashboards read them. Errors that arrive only as text (e.g. from a cloud SDK's
//! message) are classified by the same well-known markers Gardener's `DetermineError` uses.

use granary_api::common::ErrorCode;

/// The kinds of failure a provider or controller reports. The names read well as metric
/// labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// An object or key does not exist.
    NotFound,
    /// The bucket or container itself does not exist.
    BucketNotFound,
    /// The credentials are wrong or expired.
    Unauthenticated,
    /// The credentials are valid but not allowed to do this.
    Unauthorized,
    /// The provider asked us to slow down.
    Throttled,
    /// An account quota or limit is exhausted (e.g. the bucket count).
    QuotaExceeded,
    /// Somebody else owns the resource, or a concurrent change won.
    Conflict,
    /// A temporary failure (5xx, connection reset, timeout).
    Transient,
    /// The request or the configuration is wrong.
    Invalid,
    /// Another object this one needs is not ready (e.g. an entry's bucket).
    Dependency,
}

impl FailureKind {
    /// The Gardener codes for this kind of failure (empty when no code fits).
    pub fn codes(self) -> Vec<ErrorCode> {
        match self {
            FailureKind::Unauthenticated => vec![ErrorCode::InfraUnauthenticated],
            FailureKind::Unauthorized => vec![ErrorCode::InfraUnauthorized],
            FailureKind::Throttled => vec![ErrorCode::InfraRateLimitsExceeded],
            FailureKind::QuotaExceeded => vec![ErrorCode::InfraQuotaExceeded],
            FailureKind::Invalid => vec![ErrorCode::ConfigurationProblem],
            FailureKind::BucketNotFound | FailureKind::Dependency => {
                vec![ErrorCode::RetryableInfraDependencies]
            }
            FailureKind::Transient => vec![ErrorCode::RetryableInfraDependencies],
            // Somebody else owns the bucket: a person has to pick another name.
            FailureKind::Conflict => vec![ErrorCode::InfraDependencies],
            FailureKind::NotFound => Vec::new(),
        }
    }

    /// A short label for metrics and events.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NotFound => "NotFound",
            FailureKind::BucketNotFound => "BucketNotFound",
            FailureKind::Unauthenticated => "Unauthenticated",
            FailureKind::Unauthorized => "Unauthorized",
            FailureKind::Throttled => "Throttled",
            FailureKind::QuotaExceeded => "QuotaExceeded",
            FailureKind::Conflict => "Conflict",
            FailureKind::Transient => "Transient",
            FailureKind::Invalid => "Invalid",
            FailureKind::Dependency => "Dependency",
        }
    }
}

impl From<granary_providers::ErrorKind> for FailureKind {
    fn from(kind: granary_providers::ErrorKind) -> Self {
        use granary_providers::ErrorKind as P;
        match kind {
            P::NotFound => FailureKind::NotFound,
            P::BucketNotFound => FailureKind::BucketNotFound,
            P::Unauthenticated => FailureKind::Unauthenticated,
            P::Unauthorized => FailureKind::Unauthorized,
            P::Throttled => FailureKind::Throttled,
            P::QuotaExceeded => FailureKind::QuotaExceeded,
            P::Conflict => FailureKind::Conflict,
            P::Transient => FailureKind::Transient,
            P::Invalid => FailureKind::Invalid,
        }
    }
}

/// The Gardener codes of an object-store failure.
pub fn provider_error_codes(error: &granary_providers::Error) -> Vec<ErrorCode> {
    FailureKind::from(error.kind()).codes()
}

/// Markers in provider error text and the code each one means. Matched case-insensitively
/// as substrings, the way Gardener's `DetermineError` matches its regular expressions.
const TEXT_MARKERS: &[(&str, ErrorCode)] = &[
    ("invalidaccesskeyid", ErrorCode::InfraUnauthenticated),
    ("signaturedoesnotmatch", ErrorCode::InfraUnauthenticated),
    ("authenticationfailed", ErrorCode::InfraUnauthenticated),
    ("invalid_grant", ErrorCode::InfraUnauthenticated),
    ("unauthenticated", ErrorCode::InfraUnauthenticated),
    ("expiredtoken", ErrorCode::InfraUnauthenticated),
    ("accessdenied", ErrorCode::InfraUnauthorized),
    ("access denied", ErrorCode::InfraUnauthorized),
    ("authorizationfailed", ErrorCode::InfraUnauthorized),
    (
        "authorizationpermissionmismatch",
        ErrorCode::InfraUnauthorized,
    ),
    ("forbidden", ErrorCode::InfraUnauthorized),
    ("unauthorized", ErrorCode::InfraUnauthorized),
    ("toomanybuckets", ErrorCode::InfraQuotaExceeded),
    ("quotaexceeded", ErrorCode::InfraQuotaExceeded),
    ("quota exceeded", ErrorCode::InfraQuotaExceeded),
    ("limitexceeded", ErrorCode::InfraQuotaExceeded),
    ("throttling", ErrorCode::InfraRateLimitsExceeded),
    ("slowdown", ErrorCode::InfraRateLimitsExceeded),
    ("rate limit", ErrorCode::InfraRateLimitsExceeded),
    ("ratelimitexceeded", ErrorCode::InfraRateLimitsExceeded),
    ("toomanyrequests", ErrorCode::InfraRateLimitsExceeded),
    ("serverbusy", ErrorCode::InfraRateLimitsExceeded),
];

/// Codes found in an error text, sorted and without duplicates.
pub fn codes_from_text(text: &str) -> Vec<ErrorCode> {
    let lower = text.to_ascii_lowercase();
    let mut codes: Vec<ErrorCode> = TEXT_MARKERS
        .iter()
        .filter(|(marker, _)| lower.contains(marker))
        .map(|(_, code)| code.clone())
        .collect();
    codes.sort();
    codes.dedup();
    codes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_gardener_codes() {
        assert_eq!(
            FailureKind::Unauthenticated.codes(),
            vec![ErrorCode::InfraUnauthenticated]
        );
        assert_eq!(
            FailureKind::Unauthorized.codes(),
            vec![ErrorCode::InfraUnauthorized]
        );
        assert_eq!(
            FailureKind::Throttled.codes(),
            vec![ErrorCode::InfraRateLimitsExceeded]
        );
        assert_eq!(
            FailureKind::QuotaExceeded.codes(),
            vec![ErrorCode::InfraQuotaExceeded]
        );
        assert_eq!(
            FailureKind::Invalid.codes(),
            vec![ErrorCode::ConfigurationProblem]
        );
        assert_eq!(
            FailureKind::Dependency.codes(),
            vec![ErrorCode::RetryableInfraDependencies]
        );
        assert!(FailureKind::NotFound.codes().is_empty());
        assert_eq!(
            FailureKind::Conflict.codes(),
            vec![ErrorCode::InfraDependencies]
        );
        let e =
            granary_providers::Error::new(granary_providers::ErrorKind::Unauthenticated, "bad key");
        assert_eq!(
            provider_error_codes(&e),
            vec![ErrorCode::InfraUnauthenticated]
        );
    }

    #[test]
    fn text_markers_like_gardener() {
        assert_eq!(
            codes_from_text(
                "operation error S3: CreateBucket, api error AccessDenied: Access Denied"
            ),
            vec![ErrorCode::InfraUnauthorized]
        );
        assert_eq!(
            codes_from_text(
                "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist"
            ),
            vec![ErrorCode::InfraUnauthenticated]
        );
        assert_eq!(
            codes_from_text("SlowDown: Please reduce your request rate"),
            vec![ErrorCode::InfraRateLimitsExceeded]
        );
        assert_eq!(
            codes_from_text("TooManyBuckets"),
            vec![ErrorCode::InfraQuotaExceeded]
        );
        assert!(codes_from_text("connection reset by peer").is_empty());
    }
}

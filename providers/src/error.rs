//! The one error type of every provider, classified so callers can decide without
//! knowing which cloud answered: retry (Throttled/Transient), report a configuration
//! problem (Invalid/Unauthenticated/Unauthorized/Conflict), or treat as absent
//! (NotFound/BucketNotFound).
//!
//! Messages are built by the providers from status codes, error codes and the SDK's
//! own description; before they are stored they pass through [`redact`], which cuts
//! URL query strings (Azure SAS signatures live there) and every secret value the
//! provider knows. A message never contains a credential.

use std::fmt;

/// What went wrong, in words that read well as a metric label (`kind().label()`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The object does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The bucket (container) does not exist.
    #[error("bucket not found: {0}")]
    BucketNotFound(String),
    /// The credentials were not accepted (unknown key, bad signature, expired token).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The credentials are valid but lack permission for the operation.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// The store asked us to slow down (503 SlowDown, 429, ServerBusy).
    #[error("throttled: {0}")]
    Throttled(String),
    /// A quota or limit of the account was reached (e.g. too many buckets).
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    /// The resource exists in a state we cannot use (bucket owned by someone else,
    /// bucket not empty, concurrent modification).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A failure that may go away on its own: 5xx, connection reset, timeout.
    #[error("transient: {0}")]
    Transient(String),
    /// The request or the configuration is wrong (missing credential key, bad key name,
    /// bad endpoint URL).
    #[error("invalid: {0}")]
    Invalid(String),
}

/// The variant of an [`Error`] without its message: for metric labels and matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    NotFound,
    BucketNotFound,
    Unauthenticated,
    Unauthorized,
    Throttled,
    QuotaExceeded,
    Conflict,
    Transient,
    Invalid,
}

impl ErrorKind {
    /// A snake_case label for metrics (`granary_object_store_errors_total{kind=…}`).
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::BucketNotFound => "bucket_not_found",
            ErrorKind::Unauthenticated => "unauthenticated",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Throttled => "throttled",
            ErrorKind::QuotaExceeded => "quota_exceeded",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Transient => "transient",
            ErrorKind::Invalid => "invalid",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Error {
    /// Builds an error of `kind` with a message; the message is redacted of URL queries.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let m = redact(&message.into(), &[]);
        match kind {
            ErrorKind::NotFound => Error::NotFound(m),
            ErrorKind::BucketNotFound => Error::BucketNotFound(m),
            ErrorKind::Unauthenticated => Error::Unauthenticated(m),
            ErrorKind::Unauthorized => Error::Unauthorized(m),
            ErrorKind::Throttled => Error::Throttled(m),
            ErrorKind::QuotaExceeded => Error::QuotaExceeded(m),
            ErrorKind::Conflict => Error::Conflict(m),
            ErrorKind::Transient => Error::Transient(m),
            ErrorKind::Invalid => Error::Invalid(m),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound(_) => ErrorKind::NotFound,
            Error::BucketNotFound(_) => ErrorKind::BucketNotFound,
            Error::Unauthenticated(_) => ErrorKind::Unauthenticated,
            Error::Unauthorized(_) => ErrorKind::Unauthorized,
            Error::Throttled(_) => ErrorKind::Throttled,
            Error::QuotaExceeded(_) => ErrorKind::QuotaExceeded,
            Error::Conflict(_) => ErrorKind::Conflict,
            Error::Transient(_) => ErrorKind::Transient,
            Error::Invalid(_) => ErrorKind::Invalid,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::NotFound(m)
            | Error::BucketNotFound(m)
            | Error::Unauthenticated(m)
            | Error::Unauthorized(m)
            | Error::Throttled(m)
            | Error::QuotaExceeded(m)
            | Error::Conflict(m)
            | Error::Transient(m)
            | Error::Invalid(m) => m,
        }
    }

    /// Only throttling and transient failures are worth another attempt.
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind(), ErrorKind::Throttled | ErrorKind::Transient)
    }

    /// The same error with every occurrence of the given secrets removed from the message.
    pub(crate) fn scrubbed(self, secrets: &[&str]) -> Self {
        let kind = self.kind();
        let m = redact(self.message(), secrets);
        Error::new(kind, m)
    }

    /// Prefixes the message with what we were doing (`"put b/k: …"`).
    pub(crate) fn context(self, what: impl fmt::Display) -> Self {
        let kind = self.kind();
        Error::new(kind, format!("{what}: {}", self.message()))
    }
}

/// Classification shared by all HTTP-speaking providers.
pub(crate) fn kind_for_status(status: u16, code: &str) -> ErrorKind {
    match code {
        "SlowDown"
        | "ServerBusy"
        | "TooManyRequests"
        | "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "rateLimitExceeded"
        | "userRateLimitExceeded" => {
            return ErrorKind::Throttled;
        }
        "TooManyBuckets" | "AccountLimitExceeded" | "quotaExceeded" => {
            return ErrorKind::QuotaExceeded;
        }
        "NoSuchBucket" | "ContainerNotFound" => return ErrorKind::BucketNotFound,
        "NoSuchKey" | "BlobNotFound" | "NotFound" => return ErrorKind::NotFound,
        "InvalidAccessKeyId"
        | "SignatureDoesNotMatch"
        | "AuthenticationFailed"
        | "ExpiredToken"
        | "InvalidToken"
        | "InvalidClientTokenId" => {
            return ErrorKind::Unauthenticated;
        }
        "AccessDenied"
        | "AuthorizationFailure"
        | "AuthorizationPermissionMismatch"
        | "InsufficientAccountPermissions" => return ErrorKind::Unauthorized,
        "BucketAlreadyExists"
        | "BucketNotEmpty"
        | "ContainerBeingDeleted"
        | "ContainerAlreadyExists"
        | "OperationAborted" => return ErrorKind::Conflict,
        "RequestTimeout" | "InternalError" | "OperationTimedOut" | "ServiceUnavailable" => {
            return ErrorKind::Transient;
        }
        _ => {}
    }
    match status {
        401 => ErrorKind::Unauthenticated,
        403 => ErrorKind::Unauthorized,
        404 => ErrorKind::NotFound,
        409 | 412 => ErrorKind::Conflict,
        408 => ErrorKind::Transient,
        429 | 503 => ErrorKind::Throttled,
        500..=599 => ErrorKind::Transient,
        _ => ErrorKind::Invalid,
    }
}

/// Removes URL query strings (where SAS tokens and signed-URL signatures live) and
/// every non-empty secret from `message`.
pub fn redact(message: &str, secrets: &[&str]) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, word) in message.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        if word.contains("://")
            && let Some(q) = word.find('?')
        {
            out.push_str(&word[..q]);
            out.push_str("?<redacted>");
            continue;
        }
        out.push_str(word);
    }
    for s in secrets {
        if s.len() >= 4 {
            out = out.replace(s, "<redacted>");
        }
    }
    // A SAS fragment outside a URL (e.g. in an SDK debug string) still goes.
    let mut from = 0;
    while let Some(found) = out[from..].find("sig=") {
        let start = from + found + "sig=".len();
        let end = out[start..]
            .find(|c: char| c == '&' || c.is_whitespace() || c == '"' || c == '\'')
            .map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "<redacted>");
        from = start + "<redacted>".len();
    }
    out
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_cuts_queries_secrets_and_signatures() {
        let m = "GET http://h/acct/c?sv=1&sig=abc%2Bdef failed for key SECRETKEY and sig=zzz&x=1";
        let r = redact(m, &["SECRETKEY"]);
        assert!(!r.contains("abc"), "{r}");
        assert!(!r.contains("SECRETKEY"), "{r}");
        assert!(!r.contains("zzz"), "{r}");
        assert!(r.contains("http://h/acct/c?<redacted>"), "{r}");
    }

    #[test]
    fn status_mapping() {
        assert_eq!(kind_for_status(503, "SlowDown"), ErrorKind::Throttled);
        assert_eq!(kind_for_status(500, ""), ErrorKind::Transient);
        assert_eq!(
            kind_for_status(403, "SignatureDoesNotMatch"),
            ErrorKind::Unauthenticated
        );
        assert_eq!(kind_for_status(403, ""), ErrorKind::Unauthorized);
        assert_eq!(
            kind_for_status(404, "NoSuchBucket"),
            ErrorKind::BucketNotFound
        );
        assert_eq!(kind_for_status(429, ""), ErrorKind::Throttled);
        assert_eq!(
            kind_for_status(400, "TooManyBuckets"),
            ErrorKind::QuotaExceeded
        );
    }

    #[test]
    fn labels_and_codes() {
        let e = Error::new(ErrorKind::Unauthenticated, "x");
        assert_eq!(e.kind().label(), "unauthenticated");
        assert!(!e.is_retryable());
        assert!(Error::new(ErrorKind::Throttled, "x").is_retryable());
    }
}

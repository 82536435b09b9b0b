//! GCS V4 signed download URLs (`GOOG4-RSA-SHA256`) from a service-account key.
//!
//! The canonical request, string-to-sign and RSA-SHA256 signature are the GCS client
//! crate's (`gcloud-storage`, already our GCS client); this module supplies what it
//! needs from `serviceaccount.json` (`client_email`, `private_key`) and points the URL
//! at the configured endpoint (an emulator) instead of `storage.googleapis.com`.
//! Signing is local: nothing is contacted.

use std::time::{Duration, SystemTime};

use gcloud_storage::client::{Client, ClientConfig};
use gcloud_storage::sign::{SignBy, SignedURLMethod, SignedURLOptions, URLStyle};

use crate::error::{Error, ErrorKind, Result};

/// Signs GET URLs for objects with one service account's private key.
#[derive(Clone)]
pub struct GcsUrlSigner {
    email: String,
    pem: String,
    /// `host[:port]` the URL names.
    host: String,
    insecure: bool,
}

impl std::fmt::Debug for GcsUrlSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcsUrlSigner")
            .field("email", &self.email)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// GCS's own host, when no endpoint is configured.
const GCS_HOST: &str = "storage.googleapis.com";

impl GcsUrlSigner {
    /// The signer of `serviceaccount.json`; `endpoint` (an emulator's base URL) replaces
    /// `https://storage.googleapis.com`. A key without `client_email` or
    /// `private_key` cannot sign: the error says so and quotes nothing of the key.
    pub fn from_service_account_json(json: &str, endpoint: Option<&str>) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(json).map_err(|_| {
            Error::new(
                ErrorKind::Invalid,
                "secret key `serviceaccount.json` is not valid JSON",
            )
        })?;
        let field = |name: &str| {
            v.get(name)
                .and_then(|s| s.as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Invalid,
                        format!(
                            "signed download URLs need a service account key: secret key `serviceaccount.json` has no `{name}`"
                        ),
                    )
                })
        };
        let email = field("client_email")?;
        let pem = field("private_key")?;
        let (host, insecure) = match endpoint {
            None => (GCS_HOST.to_string(), false),
            Some(e) => {
                let url = url::Url::parse(e).map_err(|_| {
                    Error::new(ErrorKind::Invalid, "secret key `endpoint` is not a URL")
                })?;
                let host = url.host_str().ok_or_else(|| {
                    Error::new(ErrorKind::Invalid, "secret key `endpoint` has no host")
                })?;
                let host = match url.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host.to_string(),
                };
                (host, url.scheme() == "http")
            }
        };
        Ok(GcsUrlSigner {
            email,
            pem,
            host,
            insecure,
        })
    }

    /// A URL that GETs `bucket/key` for `ttl` from `start` (now when `None`).
    pub async fn sign_get(
        &self,
        bucket: &str,
        key: &str,
        ttl: Duration,
        start: Option<SystemTime>,
    ) -> Result<String> {
        // A client only for its signing routine: anonymous, it never sends a request.
        let client = Client::new(ClientConfig::default().anonymous());
        let opts = SignedURLOptions {
            method: SignedURLMethod::GET,
            start_time: start,
            expires: ttl,
            style: Box::new(PathAt(self.host.clone())),
            insecure: self.insecure,
            ..Default::default()
        };
        client
            .signed_url(
                bucket,
                key,
                Some(self.email.clone()),
                Some(SignBy::PrivateKey(self.pem.clone().into_bytes())),
                opts,
            )
            .await
            .map_err(|e| {
                // The crate's messages name the option or the key's format, never its bytes.
                Error::new(
                    ErrorKind::Invalid,
                    format!("signing a download URL for {bucket}/{key}: {e}"),
                )
                .scrubbed(&[self.pem.as_str()])
            })
    }
}

/// Path-style URLs (`host/bucket/key`) on a given host.
struct PathAt(String);

impl URLStyle for PathAt {
    fn host(&self, _bucket: &str) -> String {
        self.0.clone()
    }

    fn path(&self, bucket: &str, object: &str) -> String {
        if object.is_empty() {
            bucket.to_string()
        } else {
            format!("{bucket}/{object}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway key generated for these tests (grants nothing anywhere).
    const KEY: &str = include_str!("../testdata/gcs-test-key.pem");

    fn sa(extra: &str) -> String {
        serde_json::json!({
            "type": "service_account",
            "client_email": "granary-test@example.iam.gserviceaccount.com",
            "private_key": KEY,
            "note": extra,
        })
        .to_string()
    }

    #[tokio::test]
    async fn known_vector() {
        let signer = GcsUrlSigner::from_service_account_json(&sa(""), None).unwrap();
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
        let url = signer
            .sign_get(
                "bkt",
                "velero/backups/b 1/b 1-logs.gz",
                Duration::from_secs(600),
                Some(start),
            )
            .await
            .unwrap();
        // Computed independently (Python: canonical request per the GCS V4 docs, signed
        // with `cryptography`'s RSA PKCS#1 v1.5 / SHA-256).
        assert_eq!(url, include_str!("../testdata/gcs-signed-url.txt").trim());
    }

    #[tokio::test]
    async fn keys_without_a_private_key_say_so() {
        let json = serde_json::json!({"client_email": "a@b"}).to_string();
        let e = GcsUrlSigner::from_service_account_json(&json, None).unwrap_err();
        assert!(e.message().contains("private_key"), "{e}");
        let signer =
            GcsUrlSigner::from_service_account_json(&sa(""), Some("http://127.0.0.1:4443"))
                .unwrap();
        let url = signer
            .sign_get("b", "k", Duration::from_secs(60), None)
            .await
            .unwrap();
        assert!(url.starts_with("http://127.0.0.1:4443/b/k?"), "{url}");
        let bad = GcsUrlSigner {
            pem: "-----BEGIN PRIVATE KEY-----\nSECRETBYTES\n-----END PRIVATE KEY-----\n".into(),
            ..signer
        };
        let e = bad
            .sign_get("b", "k", Duration::from_secs(60), None)
            .await
            .unwrap_err();
        assert!(!e.message().contains("SECRETBYTES"), "{e}");
    }
}

//! Account SAS signing from a storage account key: the official `azure_storage_blob`
//! crate authenticates only with Entra-ID tokens, so for account-key credentials we
//! sign an account SAS (HMAC-SHA256 over the string-to-sign of service version
//! 2020-08-04) and put it in the service URL's query.
//!
//! Download URLs get a service SAS instead ([`BlobReadSas`]): read-only, for one blob,
//! so handing the URL out grants nothing else.
//!
//! Test vectors below were computed independently (Python's `hmac`/`hashlib`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::{Error, ErrorKind, Result};

/// The SAS service version whose string-to-sign we build.
pub const SAS_VERSION: &str = "2020-08-04";
/// read, write, delete, list, add, create.
const PERMISSIONS: &str = "rwdlac";

/// The parameters of one account SAS for the blob service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountSas {
    pub account: String,
    pub start: DateTime<Utc>,
    pub expiry: DateTime<Utc>,
    /// Only https (production); `false` also allows http (emulators).
    pub https_only: bool,
}

impl AccountSas {
    fn protocol(&self) -> &'static str {
        if self.https_only {
            "https"
        } else {
            "https,http"
        }
    }

    /// The string-to-sign of an account SAS (service version 2020-08-04).
    pub fn string_to_sign(&self) -> String {
        format!(
            "{}\n{PERMISSIONS}\nb\nsco\n{}\n{}\n\n{}\n{SAS_VERSION}\n",
            self.account,
            fmt_time(self.start),
            fmt_time(self.expiry),
            self.protocol()
        )
    }

    /// The base64 HMAC-SHA256 signature with the base64 account key.
    pub fn signature(&self, key_b64: &str) -> Result<String> {
        hmac_b64(key_b64, &self.string_to_sign())
    }

    /// The URL query string (`sv=…&sig=…`), form-encoded.
    pub fn query(&self, key_b64: &str) -> Result<String> {
        let sig = self.signature(key_b64)?;
        Ok(url::form_urlencoded::Serializer::new(String::new())
            .append_pair("sv", SAS_VERSION)
            .append_pair("ss", "b")
            .append_pair("srt", "sco")
            .append_pair("sp", PERMISSIONS)
            .append_pair("st", &fmt_time(self.start))
            .append_pair("se", &fmt_time(self.expiry))
            .append_pair("spr", self.protocol())
            .append_pair("sig", &sig)
            .finish())
    }
}

/// A service SAS granting read (`sp=r`) on one blob (`sr=b`) until `expiry`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobReadSas {
    pub account: String,
    pub container: String,
    /// The blob name as stored (not URL-encoded).
    pub blob: String,
    pub start: DateTime<Utc>,
    pub expiry: DateTime<Utc>,
    /// Only https (production); `false` also allows http (emulators).
    pub https_only: bool,
}

impl BlobReadSas {
    fn protocol(&self) -> &'static str {
        if self.https_only {
            "https"
        } else {
            "https,http"
        }
    }

    /// The string-to-sign of a blob service SAS for versions 2018-11-09 up to
    /// 2020-12-06 (no encryption scope): permissions, start, expiry, canonicalized
    /// resource, identifier, IP, protocol, version, resource, snapshot time and the five
    /// response-header overrides, one per line.
    pub fn string_to_sign(&self) -> String {
        format!(
            "r\n{}\n{}\n/blob/{}/{}/{}\n\n\n{}\n{SAS_VERSION}\nb\n\n\n\n\n\n",
            fmt_time(self.start),
            fmt_time(self.expiry),
            self.account,
            self.container,
            self.blob,
            self.protocol()
        )
    }

    /// The URL query string (`sv=…&sig=…`), form-encoded.
    pub fn query(&self, key_b64: &str) -> Result<String> {
        let sig = hmac_b64(key_b64, &self.string_to_sign())?;
        Ok(url::form_urlencoded::Serializer::new(String::new())
            .append_pair("sv", SAS_VERSION)
            .append_pair("sr", "b")
            .append_pair("sp", "r")
            .append_pair("st", &fmt_time(self.start))
            .append_pair("se", &fmt_time(self.expiry))
            .append_pair("spr", self.protocol())
            .append_pair("sig", &sig)
            .finish())
    }
}

/// Base64 HMAC-SHA256 of `text` with the base64 account key.
fn hmac_b64(key_b64: &str, text: &str) -> Result<String> {
    let key = B64.decode(key_b64.trim()).map_err(|_| {
        Error::new(
            ErrorKind::Invalid,
            "secret key `storageKey` is not valid base64",
        )
    })?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| {
        Error::new(
            ErrorKind::Invalid,
            "secret key `storageKey` cannot be used as an HMAC key",
        )
    })?;
    mac.update(text.as_bytes());
    Ok(B64.encode(mac.finalize().into_bytes()))
}

fn fmt_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const AZURITE_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    #[test]
    fn known_vectors() {
        let sas = AccountSas {
            account: "devstoreaccount1".into(),
            start: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            expiry: Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap(),
            https_only: false,
        };
        assert_eq!(
            sas.string_to_sign(),
            "devstoreaccount1\nrwdlac\nb\nsco\n2026-01-01T00:00:00Z\n2026-01-02T00:00:00Z\n\nhttps,http\n2020-08-04\n"
        );
        assert_eq!(
            sas.signature(AZURITE_KEY).unwrap(),
            "4fCBbUTOwctZjVD0uUD/JCQ8i1XNIbfVB2Q3qfBKEZg="
        );
        let q = sas.query(AZURITE_KEY).unwrap();
        assert!(
            q.contains("sig=4fCBbUTOwctZjVD0uUD%2FJCQ8i1XNIbfVB2Q3qfBKEZg%3D"),
            "{q}"
        );
        assert!(q.contains("spr=https%2Chttp"), "{q}");

        let sas = AccountSas {
            account: "myaccount".into(),
            start: Utc.with_ymd_and_hms(2030, 6, 15, 12, 0, 0).unwrap(),
            expiry: Utc.with_ymd_and_hms(2030, 6, 16, 12, 0, 0).unwrap(),
            https_only: true,
        };
        assert_eq!(
            sas.signature("a2V5").unwrap(),
            "hWbQWLCperkbCGJ0Cy1cuF0S0RWLlqNFH6/KBwsAC8A="
        );
    }

    #[test]
    fn blob_read_sas_known_vector() {
        let sas = BlobReadSas {
            account: "devstoreaccount1".into(),
            container: "bkt".into(),
            blob: "backups/b 1/b 1-logs.gz".into(),
            start: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            expiry: Utc.with_ymd_and_hms(2026, 1, 1, 0, 10, 0).unwrap(),
            https_only: false,
        };
        assert_eq!(
            sas.string_to_sign(),
            "r\n2026-01-01T00:00:00Z\n2026-01-01T00:10:00Z\n/blob/devstoreaccount1/bkt/backups/b 1/b 1-logs.gz\n\n\nhttps,http\n2020-08-04\nb\n\n\n\n\n\n"
        );
        let q = sas.query(AZURITE_KEY).unwrap();
        assert!(
            q.contains("sig=HfScGAM4G89%2BhSZj4iqNKJh7mNTPZNFSssG7%2F8nCBIY%3D"),
            "{q}"
        );
        assert!(q.contains("sr=b&sp=r&"), "{q}");
    }

    #[test]
    fn bad_key_names_key_not_value() {
        let sas = AccountSas {
            account: "a".into(),
            start: Utc::now(),
            expiry: Utc::now(),
            https_only: true,
        };
        let e = sas.signature("%%%SECRET").unwrap_err();
        assert!(e.message().contains("storageKey") && !e.message().contains("SECRET"));
    }
}

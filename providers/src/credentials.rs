//! Credentials from Kubernetes Secret data, with exactly Gardener's keys (see
//! docs/operations.md#credentials):
//!
//! | provider | required | optional |
//! |---|---|---|
//! | aws | `accessKeyID`, `secretAccessKey` | `region`, `endpoint`, `s3ForcePathStyle` |
//! | azure | `storageAccount`, `storageKey` | `domain`, `endpoint` |
//! | gcp | `serviceaccount.json` | `endpoint` (anonymous without the JSON) |
//!
//! plus Velero's `cloud` credentials-file format mapped onto the same. Errors name the
//! missing or malformed key, never a value; `Debug` prints no secret.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, ErrorKind, Result};
use crate::store::ProviderKind;

/// Secret data as Kubernetes hands it over.
pub type SecretData = BTreeMap<String, Vec<u8>>;

#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub force_path_style: bool,
    /// The endpoint download URLs are signed for, when clients reach the store by
    /// another address than Granary does (Velero's `publicUrl`; secret key
    /// `publicEndpoint`).
    pub public_endpoint: Option<String>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct AzureCredentials {
    pub storage_account: String,
    /// Base64 account key.
    pub storage_key: String,
    pub domain: String,
    /// Full blob service URL; wins over `domain`.
    pub endpoint: Option<String>,
}

impl AzureCredentials {
    /// The blob service URL without a trailing slash.
    pub fn service_url(&self) -> String {
        match &self.endpoint {
            Some(e) => e.trim_end_matches('/').to_string(),
            None => format!("https://{}.{}", self.storage_account, self.domain),
        }
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct GcpCredentials {
    /// `None` only with an endpoint: anonymous access for emulators.
    pub service_account_json: Option<String>,
    pub endpoint: Option<String>,
}

/// Parsed credentials of one provider.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    Aws(AwsCredentials),
    Azure(AzureCredentials),
    Gcp(GcpCredentials),
    /// The local provider needs none (its root comes from the process).
    Local,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Aws(c) => f
                .debug_struct("Aws")
                .field("access_key_id", &"<redacted>")
                .field("region", &c.region)
                .field("endpoint", &c.endpoint)
                .field("force_path_style", &c.force_path_style)
                .field("public_endpoint", &c.public_endpoint)
                .finish_non_exhaustive(),
            Credentials::Azure(c) => f
                .debug_struct("Azure")
                .field("storage_account", &c.storage_account)
                .field("domain", &c.domain)
                .field("endpoint", &c.endpoint)
                .finish_non_exhaustive(),
            Credentials::Gcp(c) => f
                .debug_struct("Gcp")
                .field(
                    "service_account_json",
                    &c.service_account_json.as_ref().map(|_| "<redacted>"),
                )
                .field("endpoint", &c.endpoint)
                .finish(),
            Credentials::Local => f.write_str("Local"),
        }
    }
}

impl Credentials {
    /// Reads the Secret data of `provider`.
    pub fn from_secret(provider: ProviderKind, data: &SecretData) -> Result<Self> {
        match provider {
            ProviderKind::Local => Ok(Credentials::Local),
            ProviderKind::Aws => Ok(Credentials::Aws(AwsCredentials {
                access_key_id: required(data, "accessKeyID")?,
                secret_access_key: required(data, "secretAccessKey")?,
                region: optional(data, "region")?,
                endpoint: optional_url(data, "endpoint")?,
                force_path_style: optional_bool(data, "s3ForcePathStyle")?,
                public_endpoint: optional_url(data, "publicEndpoint")?,
            })),
            ProviderKind::Azure => {
                let storage_key = required(data, "storageKey")?;
                if base64_len_ok(&storage_key).is_none() {
                    return Err(invalid("secret key `storageKey` is not valid base64"));
                }
                Ok(Credentials::Azure(AzureCredentials {
                    storage_account: required(data, "storageAccount")?,
                    storage_key,
                    domain: optional(data, "domain")?
                        .unwrap_or_else(|| "blob.core.windows.net".to_string()),
                    endpoint: optional_url(data, "endpoint")?,
                }))
            }
            ProviderKind::Gcp => {
                let endpoint = optional_url(data, "endpoint")?;
                let json = if endpoint.is_some() {
                    optional(data, "serviceaccount.json")?
                } else {
                    Some(required(data, "serviceaccount.json")?)
                };
                if let Some(j) = &json {
                    let v: serde_json::Value = serde_json::from_str(j).map_err(|_| {
                        invalid("secret key `serviceaccount.json` is not valid JSON")
                    })?;
                    if !v.is_object() {
                        return Err(invalid(
                            "secret key `serviceaccount.json` is not a JSON object",
                        ));
                    }
                }
                Ok(Credentials::Gcp(GcpCredentials {
                    service_account_json: json,
                    endpoint,
                }))
            }
        }
    }
}

/// Converts Velero's `cloud` credentials file (AWS shared-credentials format) plus the
/// BackupStorageLocation `config` into Secret data with Gardener's keys:
/// `aws_access_key_id`→`accessKeyID`, `aws_secret_access_key`→`secretAccessKey`,
/// config `region`→`region`, `s3Url`→`endpoint`, `s3ForcePathStyle`→`s3ForcePathStyle`,
/// `publicUrl`→`publicEndpoint`.
/// `profile` defaults to `default`.
pub fn velero_aws_secret(
    cloud_file: &[u8],
    profile: Option<&str>,
    bsl_config: &BTreeMap<String, String>,
) -> Result<SecretData> {
    let text = std::str::from_utf8(cloud_file)
        .map_err(|_| invalid("velero credentials file `cloud` is not UTF-8"))?;
    let wanted = profile.unwrap_or("default");
    let mut in_profile = false;
    let mut out = SecretData::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let name = section
                .strip_suffix(']')
                .ok_or_else(|| {
                    invalid(format!(
                        "velero credentials file `cloud`: line {} has an unclosed section",
                        n + 1
                    ))
                })?
                .trim();
            let name = name.strip_prefix("profile ").unwrap_or(name).trim();
            in_profile = name == wanted;
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(invalid(format!(
                "velero credentials file `cloud`: line {} is not `key = value`",
                n + 1
            )));
        };
        if !in_profile {
            continue;
        }
        let target = match k.trim() {
            "aws_access_key_id" => "accessKeyID",
            "aws_secret_access_key" => "secretAccessKey",
            "region" => "region",
            _ => continue,
        };
        out.insert(target.to_string(), v.trim().as_bytes().to_vec());
    }
    for (from, to) in [
        ("region", "region"),
        ("s3Url", "endpoint"),
        ("s3ForcePathStyle", "s3ForcePathStyle"),
        ("publicUrl", "publicEndpoint"),
    ] {
        if let Some(v) = bsl_config.get(from) {
            out.insert(to.to_string(), v.as_bytes().to_vec());
        }
    }
    for key in ["aws_access_key_id", "aws_secret_access_key"] {
        let mapped = if key == "aws_access_key_id" {
            "accessKeyID"
        } else {
            "secretAccessKey"
        };
        if !out.contains_key(mapped) {
            return Err(invalid(format!(
                "velero credentials file `cloud`: profile `{wanted}` has no `{key}`"
            )));
        }
    }
    Ok(out)
}

fn invalid(m: impl Into<String>) -> Error {
    Error::new(ErrorKind::Invalid, m)
}

fn optional(data: &SecretData, key: &str) -> Result<Option<String>> {
    match data.get(key) {
        None => Ok(None),
        Some(v) => {
            let s = std::str::from_utf8(v)
                .map_err(|_| invalid(format!("secret key `{key}` is not UTF-8")))?
                .trim();
            Ok(if s.is_empty() {
                None
            } else {
                Some(s.to_string())
            })
        }
    }
}

fn required(data: &SecretData, key: &str) -> Result<String> {
    optional(data, key)?.ok_or_else(|| invalid(format!("secret key `{key}` is missing or empty")))
}

fn optional_url(data: &SecretData, key: &str) -> Result<Option<String>> {
    let Some(v) = optional(data, key)? else {
        return Ok(None);
    };
    match url::Url::parse(&v) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(Some(v)),
        _ => Err(invalid(format!("secret key `{key}` is not an http(s) URL"))),
    }
}

fn optional_bool(data: &SecretData, key: &str) -> Result<bool> {
    match optional(data, key)?.as_deref() {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(_) => Err(invalid(format!(
            "secret key `{key}` must be \"true\" or \"false\""
        ))),
    }
}

/// Cheap base64 shape check that does not need the base64 crate in every build.
fn base64_len_ok(s: &str) -> Option<()> {
    let ok = !s.is_empty()
        && s.len().is_multiple_of(4)
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=');
    ok.then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> SecretData {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn aws_keys() {
        let c = Credentials::from_secret(
            ProviderKind::Aws,
            &data(&[
                ("accessKeyID", "AKIA1"),
                ("secretAccessKey", "s3cr3t"),
                ("endpoint", "http://127.0.0.1:9000"),
                ("s3ForcePathStyle", "true"),
            ]),
        )
        .unwrap();
        let Credentials::Aws(a) = &c else {
            panic!("aws")
        };
        assert!(a.force_path_style);
        assert!(!format!("{c:?}").contains("s3cr3t"));
        assert!(!format!("{c:?}").contains("AKIA1"));
    }

    #[test]
    fn missing_key_is_named_value_never_echoed() {
        let e = Credentials::from_secret(ProviderKind::Aws, &data(&[("accessKeyID", "AKIAXYZ")]))
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.message().contains("secretAccessKey"), "{e}");
        assert!(!e.message().contains("AKIAXYZ"), "{e}");
        let e = Credentials::from_secret(
            ProviderKind::Aws,
            &data(&[
                ("accessKeyID", "a"),
                ("secretAccessKey", "b"),
                ("s3ForcePathStyle", "yes-s3cr3t"),
            ]),
        )
        .unwrap_err();
        assert!(e.message().contains("s3ForcePathStyle") && !e.message().contains("s3cr3t"));
        let e = Credentials::from_secret(
            ProviderKind::Azure,
            &data(&[("storageAccount", "a"), ("storageKey", "not base64!")]),
        )
        .unwrap_err();
        assert!(
            e.message().contains("storageKey") && !e.message().contains("base64!"),
            "{e}"
        );
    }

    #[test]
    fn gcp_anonymous_only_with_endpoint() {
        let e = Credentials::from_secret(ProviderKind::Gcp, &data(&[])).unwrap_err();
        assert!(e.message().contains("serviceaccount.json"));
        let c = Credentials::from_secret(
            ProviderKind::Gcp,
            &data(&[("endpoint", "http://127.0.0.1:4443")]),
        )
        .unwrap();
        assert_eq!(
            c,
            Credentials::Gcp(GcpCredentials {
                service_account_json: None,
                endpoint: Some("http://127.0.0.1:4443".into())
            })
        );
        let e = Credentials::from_secret(
            ProviderKind::Gcp,
            &data(&[("serviceaccount.json", "{not json PRIVATE")]),
        )
        .unwrap_err();
        assert!(!e.message().contains("PRIVATE"));
    }

    #[test]
    fn azure_endpoint_wins_over_domain() {
        let c = Credentials::from_secret(
            ProviderKind::Azure,
            &data(&[
                ("storageAccount", "acct"),
                ("storageKey", "a2V5"),
                ("endpoint", "http://127.0.0.1:1/devstoreaccount1/"),
            ]),
        )
        .unwrap();
        let Credentials::Azure(a) = c else { panic!() };
        assert_eq!(a.service_url(), "http://127.0.0.1:1/devstoreaccount1");
        let c = Credentials::from_secret(
            ProviderKind::Azure,
            &data(&[("storageAccount", "acct"), ("storageKey", "a2V5")]),
        )
        .unwrap();
        let Credentials::Azure(a) = c else { panic!() };
        assert_eq!(a.service_url(), "https://acct.blob.core.windows.net");
    }

    #[test]
    fn velero_cloud_file() {
        let file = b"[other]\naws_access_key_id=X\n\n[default]\naws_access_key_id = AKIA2\naws_secret_access_key=sec/ret+=\n";
        let cfg = BTreeMap::from([
            ("region".to_string(), "eu-west-1".to_string()),
            ("s3Url".to_string(), "http://127.0.0.1:9000".to_string()),
            ("s3ForcePathStyle".to_string(), "true".to_string()),
            (
                "publicUrl".to_string(),
                "https://s3.example.com".to_string(),
            ),
        ]);
        let d = velero_aws_secret(file, None, &cfg).unwrap();
        assert_eq!(d["accessKeyID"], b"AKIA2");
        assert_eq!(d["secretAccessKey"], b"sec/ret+=");
        assert_eq!(d["endpoint"], b"http://127.0.0.1:9000");
        let c = Credentials::from_secret(ProviderKind::Aws, &d).unwrap();
        let Credentials::Aws(a) = c else { panic!() };
        assert_eq!(a.region.as_deref(), Some("eu-west-1"));
        assert!(a.force_path_style);
        assert_eq!(a.public_endpoint.as_deref(), Some("https://s3.example.com"));

        let e = velero_aws_secret(
            b"[default]\naws_access_key_id=AKIA3\n",
            None,
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(e.message().contains("aws_secret_access_key") && !e.message().contains("AKIA3"));
        let e = velero_aws_secret(b"[default]\nnonsense SECRETVALUE\n", None, &BTreeMap::new())
            .unwrap_err();
        assert!(e.message().contains("line 2") && !e.message().contains("SECRETVALUE"));
    }
}

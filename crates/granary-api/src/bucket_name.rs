//! Bucket names. Granary's shared buckets have the same name on the garden
//! (`BackupBucket`), in the seed (extension `BackupBucket`) and at the provider, and a
//! bucket may later be recreated at another provider, so [`BucketName`] enforces the S3,
//! GCS and Azure container rules all at once (docs/architecture.md#shards-and-quota).
//! [`shard_bucket_name`] builds the name of a pool's shard;
//! [`validate_bucket_name_for_provider`] checks the names of legacy per-shoot buckets,
//! which predate Granary and only have to satisfy their own provider (they usually
//! contain `--`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Shortest name every provider accepts.
pub const BUCKET_NAME_MIN_LEN: usize = 3;
/// Longest name every provider accepts (S3, Azure containers, GCS without dots).
pub const BUCKET_NAME_MAX_LEN: usize = 63;

/// Prefixes some provider reserves (S3: `xn--`, `sthree-`, `amzn-s3-demo-`; GCS: `goog`).
const RESERVED_PREFIXES: &[&str] = &["xn--", "sthree-", "amzn-s3-demo-", "goog"];
/// Suffixes S3 reserves for access-point aliases, object-lambda, directory and table buckets.
const RESERVED_SUFFIXES: &[&str] = &["-s3alias", "--ol-s3", "--x-s3", "--table-s3"];
/// Words GCS refuses anywhere in a name ("google" and its look-alikes).
const FORBIDDEN_WORDS: &[&str] = &["google", "g00gle"];

/// Why a string is not a valid bucket name; the message names the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BucketNameError {
    #[error("bucket name {name:?} must be 3 to 63 characters long, it has {len}")]
    Length { name: String, len: usize },
    #[error("bucket name {name:?} must not be an IP address")]
    IpAddress { name: String },
    #[error("bucket name {name:?} must not start with the reserved prefix {prefix:?}")]
    ReservedPrefix { name: String, prefix: &'static str },
    #[error("bucket name {name:?} must not end with the reserved suffix {suffix:?}")]
    ReservedSuffix { name: String, suffix: &'static str },
    #[error("bucket name {name:?} must not contain {word:?}")]
    ForbiddenWord { name: String, word: &'static str },
    #[error("bucket name {name:?} may only contain {allowed}; {character:?} is not allowed")]
    Character {
        name: String,
        character: char,
        allowed: &'static str,
    },
    #[error("bucket name {name:?} must start and end with a lowercase letter or a digit")]
    Edge { name: String },
    #[error("bucket name {name:?} must not contain {sequence:?}")]
    Sequence {
        name: String,
        sequence: &'static str,
    },
}

/// A name valid as an S3 bucket, a GCS bucket and an Azure blob container at once:
/// 3–63 lowercase letters, digits and single hyphens, starting and ending with a letter
/// or digit, not an IP address, no reserved prefix or suffix, no "google".
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketName(String);

impl BucketName {
    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for BucketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for BucketName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BucketName {
    type Error = BucketNameError;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        check_length(&name)?;
        check_not_ip(&name)?;
        check_reserved(&name, RESERVED_PREFIXES, RESERVED_SUFFIXES)?;
        check_forbidden_words(&name)?;
        check_characters(
            &name,
            |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
            "lowercase letters, digits and hyphens",
        )?;
        check_edges(&name)?;
        check_no_sequence(&name, "--")?;
        Ok(BucketName(name))
    }
}

impl TryFrom<&str> for BucketName {
    type Error = BucketNameError;

    fn try_from(name: &str) -> Result<Self, Self::Error> {
        BucketName::try_from(name.to_string())
    }
}

impl FromStr for BucketName {
    type Err = BucketNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        BucketName::try_from(name.to_string())
    }
}

impl From<BucketName> for String {
    fn from(name: BucketName) -> Self {
        name.0
    }
}

impl Serialize for BucketName {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for BucketName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        BucketName::try_from(name).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for BucketName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BucketName".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A bucket name valid at S3, GCS and Azure: 3-63 lowercase letters, digits and single hyphens."
        })
    }
}

/// Checks a name against the rules of one provider only, for legacy per-shoot buckets
/// (which often contain `--`). `provider` is the Gardener provider type: `aws`, `gcp`,
/// `azure`; any other provider (e.g. `local`) gets the DNS-label rules.
pub fn validate_bucket_name_for_provider(
    provider: &str,
    name: &str,
) -> Result<(), BucketNameError> {
    check_length(name)?;
    match provider {
        "aws" => {
            check_not_ip(name)?;
            check_reserved(
                name,
                &["xn--", "sthree-", "amzn-s3-demo-"],
                RESERVED_SUFFIXES,
            )?;
            check_characters(
                name,
                |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.',
                "lowercase letters, digits, hyphens and dots",
            )?;
            check_edges(name)?;
            check_no_sequence(name, "..")
        }
        "gcp" => {
            check_not_ip(name)?;
            check_reserved(name, &["goog"], &[])?;
            check_forbidden_words(name)?;
            check_characters(
                name,
                |c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'),
                "lowercase letters, digits, hyphens, underscores and dots",
            )?;
            check_edges(name)
        }
        "azure" => {
            check_characters(
                name,
                |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
                "lowercase letters, digits and hyphens",
            )?;
            check_edges(name)?;
            check_no_sequence(name, "--")
        }
        _ => {
            check_characters(
                name,
                |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-',
                "lowercase letters, digits and hyphens",
            )?;
            check_edges(name)
        }
    }
}

/// The name of shard `shard` of the bucket pool of `owner` (a CloudProfile or Seed name)
/// in `region`: `<owner>-<region>-<8 hex>-<shard>` (see
/// docs/architecture.md#shards-and-quota). The 8 hex digits are the start of sha256 over
/// the owner's UID and the region, so two owners that sanitise to the same text still get
/// different names. Owner and region are lowercased and every character no provider
/// allows becomes a hyphen; when the result is longer than 63 characters the owner/region
/// part is cut, the hash and shard stay whole.
pub fn shard_bucket_name(owner: &str, region: &str, owner_uid: &str, shard: u32) -> BucketName {
    let mut hasher = Sha256::new();
    hasher.update(owner_uid.as_bytes());
    // A separator UIDs never contain, so ("ab", "c") and ("a", "bc") hash differently.
    hasher.update(b"/");
    hasher.update(region.as_bytes());
    let digest = hasher.finalize();
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let tail = format!("-{hash}-{shard}");

    let parts: Vec<String> = [owner, region]
        .iter()
        .map(|part| sanitise(part))
        .filter(|part| !part.is_empty())
        .collect();
    let mut head = parts.join("-");
    if head.is_empty() {
        head.push('b');
    }
    if RESERVED_PREFIXES.iter().any(|p| head.starts_with(p)) {
        head.insert_str(0, "b-");
    }
    let budget = BUCKET_NAME_MAX_LEN - tail.len();
    if head.len() > budget {
        // ASCII only after sanitising, so byte truncation is on a char boundary.
        head.truncate(budget);
        while head.ends_with('-') {
            head.pop();
        }
    }
    let name = format!("{head}{tail}");
    BucketName::try_from(name).expect(
        "a sanitised head of [a-z0-9] runs joined by single hyphens, without reserved \
         prefixes or 'google', plus -<hex>-<digits>, is a valid bucket name",
    )
}

/// Lowercases, turns every character outside `[a-z0-9]` into a hyphen, collapses hyphen
/// runs, trims hyphens at both ends and defuses the words GCS refuses.
fn sanitise(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for c in part.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    // Each replacement shortens the string by one character, so this ends.
    while let Some(word) = FORBIDDEN_WORDS.iter().find(|w| out.contains(*w)) {
        // Drop the word's second letter: "google" -> "gogle".
        let defused = format!("{}{}", &word[..1], &word[2..]);
        out = out.replacen(word, &defused, 1);
    }
    out
}

fn check_length(name: &str) -> Result<(), BucketNameError> {
    let len = name.chars().count();
    if (BUCKET_NAME_MIN_LEN..=BUCKET_NAME_MAX_LEN).contains(&len) {
        Ok(())
    } else {
        Err(BucketNameError::Length {
            name: name.to_string(),
            len,
        })
    }
}

fn check_not_ip(name: &str) -> Result<(), BucketNameError> {
    if name.parse::<IpAddr>().is_ok() {
        Err(BucketNameError::IpAddress {
            name: name.to_string(),
        })
    } else {
        Ok(())
    }
}

fn check_reserved(
    name: &str,
    prefixes: &[&'static str],
    suffixes: &[&'static str],
) -> Result<(), BucketNameError> {
    if let Some(prefix) = prefixes.iter().find(|p| name.starts_with(**p)) {
        return Err(BucketNameError::ReservedPrefix {
            name: name.to_string(),
            prefix,
        });
    }
    if let Some(suffix) = suffixes.iter().find(|s| name.ends_with(**s)) {
        return Err(BucketNameError::ReservedSuffix {
            name: name.to_string(),
            suffix,
        });
    }
    Ok(())
}

fn check_forbidden_words(name: &str) -> Result<(), BucketNameError> {
    match FORBIDDEN_WORDS.iter().find(|w| name.contains(**w)) {
        Some(word) => Err(BucketNameError::ForbiddenWord {
            name: name.to_string(),
            word,
        }),
        None => Ok(()),
    }
}

fn check_characters(
    name: &str,
    allowed: impl Fn(char) -> bool,
    description: &'static str,
) -> Result<(), BucketNameError> {
    match name.chars().find(|c| !allowed(*c)) {
        Some(character) => Err(BucketNameError::Character {
            name: name.to_string(),
            character,
            allowed: description,
        }),
        None => Ok(()),
    }
}

fn check_edges(name: &str) -> Result<(), BucketNameError> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if alnum(name.chars().next()) && alnum(name.chars().last()) {
        Ok(())
    } else {
        Err(BucketNameError::Edge {
            name: name.to_string(),
        })
    }
}

fn check_no_sequence(name: &str, sequence: &'static str) -> Result<(), BucketNameError> {
    if name.contains(sequence) {
        Err(BucketNameError::Sequence {
            name: name.to_string(),
            sequence,
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(name: &str) -> String {
        BucketName::try_from(name)
            .expect_err("the name is invalid")
            .to_string()
    }

    #[test]
    fn accepts_names_valid_everywhere() {
        for name in [
            "abc",
            "aws-eu1-eu-west-1-0a1b2c3d-0",
            "6d3a1f0e-1c2b-4a5d-9e8f-0123456789ab",
            &"a".repeat(63),
        ] {
            let parsed: BucketName = name.parse().expect("valid");
            assert_eq!(parsed.as_str(), name);
        }
    }

    #[test]
    fn each_rule_is_named_in_the_error() {
        assert!(err("ab").contains("3 to 63 characters"));
        assert!(err(&"a".repeat(64)).contains("3 to 63 characters"));
        assert!(err("192.168.1.1").contains("IP address"));
        assert!(err("xn--abc").contains("reserved prefix \"xn--\""));
        assert!(err("sthree-abc").contains("reserved prefix \"sthree-\""));
        assert!(err("googbucket").contains("reserved prefix \"goog\""));
        assert!(err("abc-s3alias").contains("reserved suffix \"-s3alias\""));
        assert!(err("abc--ol-s3").contains("reserved suffix \"--ol-s3\""));
        assert!(err("my-google-bucket").contains("must not contain \"google\""));
        assert!(err("My-bucket").contains("'M' is not allowed"));
        assert!(err("my.bucket").contains("'.' is not allowed"));
        assert!(err("my_bucket").contains("'_' is not allowed"));
        assert!(err("-bucket").contains("start and end"));
        assert!(err("bucket-").contains("start and end"));
        assert!(err("shoot--dev--x").contains("must not contain \"--\""));
    }

    #[test]
    fn serde_validates_and_schema_is_a_string() {
        let name: BucketName = serde_json::from_str("\"abc-1\"").expect("valid");
        assert_eq!(
            serde_json::to_string(&name).expect("serializes"),
            "\"abc-1\""
        );
        let bad = serde_json::from_str::<BucketName>("\"a--b\"").expect_err("invalid");
        assert!(bad.to_string().contains("--"));
        let schema = schemars::schema_for!(BucketName);
        assert_eq!(schema.get("type"), Some(&serde_json::json!("string")));
    }

    #[test]
    fn legacy_names_are_checked_per_provider() {
        let legacy = "shoot--dev--example--3ef42";
        assert!(BucketName::try_from(legacy).is_err());
        assert_eq!(validate_bucket_name_for_provider("aws", legacy), Ok(()));
        assert_eq!(validate_bucket_name_for_provider("gcp", legacy), Ok(()));
        assert_eq!(validate_bucket_name_for_provider("local", legacy), Ok(()));
        assert!(
            validate_bucket_name_for_provider("azure", legacy)
                .expect_err("azure forbids --")
                .to_string()
                .contains("\"--\"")
        );
        assert!(validate_bucket_name_for_provider("aws", "my.bucket.name").is_ok());
        assert!(validate_bucket_name_for_provider("aws", "my..bucket").is_err());
        assert!(validate_bucket_name_for_provider("aws", "10.0.0.1").is_err());
        assert!(validate_bucket_name_for_provider("gcp", "my_bucket").is_ok());
        assert!(validate_bucket_name_for_provider("gcp", "google-x").is_err());
        assert!(validate_bucket_name_for_provider("local", "My").is_err());
    }

    #[test]
    fn shard_names_follow_the_design() {
        let name = shard_bucket_name("aws-eu", "eu-west-1", "uid-1", 0);
        let s = name.as_str();
        assert!(s.starts_with("aws-eu-eu-west-1-"), "{s}");
        assert!(s.ends_with("-0"), "{s}");
        let hash = &s["aws-eu-eu-west-1-".len()..s.len() - 2];
        assert_eq!(hash.len(), 8);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
        // Same owner and region, other shard: only the shard differs.
        let next = shard_bucket_name("aws-eu", "eu-west-1", "uid-1", 1);
        assert_eq!(&next.as_str()[..s.len() - 1], &s[..s.len() - 1]);
        // Sanitising and shortening.
        let odd = shard_bucket_name("Google_Cloud.Profile", "US--East", "u", 7);
        assert!(
            odd.as_str().starts_with("gogle-cloud-profile-us-east-"),
            "{odd}"
        );
        let long = shard_bucket_name(&"x".repeat(100), "region", "u", 4_000_000_000);
        assert_eq!(long.as_str().len(), 63);
        assert!(long.as_str().ends_with("-4000000000"));
        assert!(
            shard_bucket_name("goog", "", "u", 0)
                .as_str()
                .starts_with("b-goog-")
        );
        assert!(shard_bucket_name("", "", "u", 0).as_str().starts_with("b-"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn shard_names_are_always_valid(
            owner in "\\PC{0,80}",
            region in "\\PC{0,40}",
            uid in "[a-f0-9-]{0,36}",
            shard in any::<u32>(),
        ) {
            let name = shard_bucket_name(&owner, &region, &uid, shard);
            prop_assert!(BucketName::try_from(name.as_str()).is_ok());
        }

        #[test]
        fn distinct_owners_regions_shards_get_distinct_names(
            a in ("[a-zA-Z0-9 -]{0,70}", "[a-z0-9-]{0,30}", 0u32..5),
            b in ("[a-zA-Z0-9 -]{0,70}", "[a-z0-9-]{0,30}", 0u32..5),
        ) {
            prop_assume!(a != b);
            // Each owner has its own UID, as every Kubernetes object does.
            let name = |(owner, region, shard): &(String, String, u32)| {
                shard_bucket_name(owner, region, &format!("uid-of-{owner}"), *shard)
            };
            prop_assert_ne!(name(&a), name(&b));
        }
    }
}

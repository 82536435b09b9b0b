//! The one place an entry's prefix inside its bucket is computed (see
//! docs/architecture.md#one-entry-prefix). Every delete, list and copy of an entry's
//! objects goes through [`entry_prefix`], so a legacy bucket's root can never be emptied
//! by accident through another path.

/// How a bucket holds its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketLayout {
    /// A shared bucket: every entry is a directory named after the entry.
    Shared,
    /// A legacy per-shoot bucket (`granary.gardener.cloud/pool-kind=legacy`): its one
    /// entry is the whole bucket.
    Legacy,
}

/// A shared-bucket entry whose prefix would be empty, i.e. the whole bucket (e.g. an entry
/// named `source-`). Refused here, in the one place prefixes are made, so no list, copy or
/// delete can ever reach every entry of a shared bucket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "entry {entry:?} would have an empty prefix in a shared bucket, i.e. the whole bucket: refused"
)]
pub struct EmptyPrefix {
    pub entry: String,
}

/// The key prefix of entry `entry_name` in a bucket of `layout`, without a trailing
/// slash: the entry name with a leading `source-` removed (as Gardener does for
/// migration sources) for shared buckets, empty for a legacy bucket. An empty prefix in
/// a shared bucket is an error.
pub fn entry_prefix(layout: BucketLayout, entry_name: &str) -> Result<String, EmptyPrefix> {
    match layout {
        BucketLayout::Legacy => Ok(String::new()),
        BucketLayout::Shared => {
            let prefix = strip_source(entry_name);
            if prefix.is_empty() {
                Err(EmptyPrefix {
                    entry: entry_name.to_string(),
                })
            } else {
                Ok(prefix.to_string())
            }
        }
    }
}

/// The entry name without the `source-` of a migration source (Gardener's convention).
pub fn strip_source(entry_name: &str) -> &str {
    entry_name.strip_prefix("source-").unwrap_or(entry_name)
}

/// The prefix to list or delete under: `<prefix>/` for a shared bucket, so entry `a` never
/// matches entry `ab`; empty for a legacy bucket. Never empty for a shared bucket.
pub fn entry_key_prefix(layout: BucketLayout, entry_name: &str) -> Result<String, EmptyPrefix> {
    let prefix = entry_prefix(layout, entry_name)?;
    Ok(if prefix.is_empty() {
        prefix
    } else {
        format!("{prefix}/")
    })
}

/// The key of Granary's prefix marker (`<prefix>/.granary/entry.json`).
pub fn marker_key(layout: BucketLayout, entry_name: &str) -> Result<String, EmptyPrefix> {
    Ok(format!(
        "{}{ENTRY_MARKER}",
        entry_key_prefix(layout, entry_name)?
    ))
}

/// The prefix marker's key relative to the entry prefix.
pub const ENTRY_MARKER: &str = ".granary/entry.json";

/// The key of the bucket's own record (`.granary/bucket.json` at the bucket root): the
/// layout decided once, when Granary first took the bucket.
pub const BUCKET_RECORD: &str = ".granary/bucket.json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_and_legacy_prefixes() {
        let name = "shoot--dev--a--0a1b";
        assert_eq!(entry_prefix(BucketLayout::Shared, name).unwrap(), name);
        assert_eq!(
            entry_prefix(BucketLayout::Shared, &format!("source-{name}")).unwrap(),
            name
        );
        assert_eq!(
            entry_key_prefix(BucketLayout::Shared, name).unwrap(),
            format!("{name}/")
        );
        assert_eq!(
            marker_key(BucketLayout::Shared, name).unwrap(),
            format!("{name}/.granary/entry.json")
        );
        assert_eq!(entry_prefix(BucketLayout::Legacy, name).unwrap(), "");
        assert_eq!(entry_key_prefix(BucketLayout::Legacy, name).unwrap(), "");
        assert_eq!(
            marker_key(BucketLayout::Legacy, name).unwrap(),
            ".granary/entry.json"
        );
    }

    #[test]
    fn one_entry_prefix_never_covers_another() {
        let a = entry_key_prefix(BucketLayout::Shared, "shoot--p--a--1").unwrap();
        let ab = entry_key_prefix(BucketLayout::Shared, "shoot--p--a--12").unwrap();
        assert!(!ab.starts_with(&a) && !a.starts_with(&ab));
    }

    #[test]
    fn a_shared_prefix_is_never_the_whole_bucket() {
        for name in ["source-", ""] {
            for f in [entry_prefix, entry_key_prefix, marker_key] {
                let e = f(BucketLayout::Shared, name).expect_err(name);
                assert_eq!(e.entry, name);
                assert!(e.to_string().contains("whole bucket"), "{e}");
            }
        }
    }
}

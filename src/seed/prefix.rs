//! The one place an entry's prefix inside its bucket is computed (DESIGN §3.2). Every
//! delete, list and copy of an entry's objects goes through [`entry_prefix`], so a legacy
//! bucket's root can never be emptied by accident through another path.

/// How a bucket holds its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketLayout {
    /// A shared bucket: every entry is a directory named after the entry.
    Shared,
    /// A legacy per-shoot bucket (`granary.gardener.cloud/pool-kind=legacy`): its one
    /// entry is the whole bucket.
    Legacy,
}

/// The key prefix of entry `entry_name` in a bucket of `layout`, without a trailing
/// slash: the entry name with a leading `source-` removed (as Gardener does for
/// migration sources) for shared buckets, empty for a legacy bucket.
pub fn entry_prefix(layout: BucketLayout, entry_name: &str) -> String {
    match layout {
        BucketLayout::Legacy => String::new(),
        BucketLayout::Shared => entry_name
            .strip_prefix("source-")
            .unwrap_or(entry_name)
            .to_string(),
    }
}

/// The prefix to list or delete under: `<prefix>/` for a shared bucket, so entry `a` never
/// matches entry `ab`; empty for a legacy bucket.
pub fn entry_key_prefix(layout: BucketLayout, entry_name: &str) -> String {
    let prefix = entry_prefix(layout, entry_name);
    if prefix.is_empty() {
        prefix
    } else {
        format!("{prefix}/")
    }
}

/// The key of Granary's prefix marker (`<prefix>/.granary/entry.json`).
pub fn marker_key(layout: BucketLayout, entry_name: &str) -> String {
    format!(
        "{}.granary/entry.json",
        entry_key_prefix(layout, entry_name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_and_legacy_prefixes() {
        let name = "shoot--dev--a--0a1b";
        assert_eq!(entry_prefix(BucketLayout::Shared, name), name);
        assert_eq!(
            entry_prefix(BucketLayout::Shared, &format!("source-{name}")),
            name
        );
        assert_eq!(
            entry_key_prefix(BucketLayout::Shared, name),
            format!("{name}/")
        );
        assert_eq!(
            marker_key(BucketLayout::Shared, name),
            format!("{name}/.granary/entry.json")
        );
        assert_eq!(entry_prefix(BucketLayout::Legacy, name), "");
        assert_eq!(entry_key_prefix(BucketLayout::Legacy, name), "");
        assert_eq!(
            marker_key(BucketLayout::Legacy, name),
            ".granary/entry.json"
        );
    }

    #[test]
    fn one_entry_prefix_never_covers_another() {
        let a = entry_key_prefix(BucketLayout::Shared, "shoot--p--a--1");
        let ab = entry_key_prefix(BucketLayout::Shared, "shoot--p--a--12");
        assert!(!ab.starts_with(&a) && !a.starts_with(&ab));
    }
}

//! Every object-store key of a Velero BackupStorageLocation, built in this one place (as
//! Velero's `object_store_layout.go` does; docs/formats.md#velero-object-store-layout).
//! Nobody else formats a key.
//!
//! A location is a bucket plus an optional prefix. Under its root only six top-level
//! directories may exist; any other makes Velero mark the location Unavailable, which is
//! why Granary puts each location under its own prefix.

use std::fmt;

use thiserror::Error;

/// The top-level directories Velero accepts under a location's root.
pub const VALID_TOP_LEVEL_DIRS: [&str; 6] = [
    "backups", "restores", "restic", "metadata", "plugins", "kopia",
];

/// Bucket names starting with this (S3 multi-region access point ARNs) may contain `/`.
const MRAP_ARN_PREFIX: &str = "arn:aws:s3:";

/// A bucket/prefix pair that Velero would refuse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error(
        "backup storage location's bucket name {0:?} must not contain a '/' (if using a prefix, put it in the 'Prefix' field instead)"
    )]
    BucketContainsSlash(String),
    #[error("backup storage location's bucket name must not be empty")]
    EmptyBucket,
    #[error("{kind} name {name:?} cannot be used in an object-store key")]
    InvalidName { kind: &'static str, name: String },
    #[error("backup storage location's prefix {prefix:?} {reason}")]
    InvalidPrefix {
        prefix: String,
        reason: &'static str,
    },
}

/// Why a (trimmed) location prefix is no plain key path, if it is not.
pub fn check_prefix(prefix: &str) -> Result<(), LayoutError> {
    let refuse = |reason| {
        Err(LayoutError::InvalidPrefix {
            prefix: prefix.to_owned(),
            reason,
        })
    };
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.chars().any(char::is_control) {
        return refuse("must not contain control characters");
    }
    if prefix.contains('\\') {
        return refuse("must not contain '\\' (segments are separated by '/')");
    }
    for segment in prefix.split('/') {
        match segment {
            "" => return refuse("must not contain an empty path segment ('//')"),
            "." | ".." => return refuse("must not contain a '.' or '..' path segment"),
            _ => {}
        }
    }
    Ok(())
}

/// The object-store layout of one BackupStorageLocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageLayout {
    bucket: String,
    /// `""` or the trimmed prefix followed by `/`.
    root: String,
}

impl StorageLayout {
    /// Builds the layout from `spec.objectStorage.bucket` and `.prefix`, trimming leading
    /// and trailing `/` from both as Velero does. A prefix must be a plain key path:
    /// no `.` or `..` segment (which would climb out of it on a file system, and which
    /// object stores keep verbatim), no empty segment (`a//b`), no `\\` and no control
    /// character ([`check_prefix`]).
    pub fn new(bucket: &str, prefix: Option<&str>) -> Result<Self, LayoutError> {
        let trimmed_bucket = bucket.trim_matches('/');
        if trimmed_bucket.is_empty() {
            return Err(LayoutError::EmptyBucket);
        }
        if trimmed_bucket.contains('/') && !trimmed_bucket.starts_with(MRAP_ARN_PREFIX) {
            return Err(LayoutError::BucketContainsSlash(bucket.to_owned()));
        }
        let prefix = prefix.unwrap_or("").trim_matches('/');
        check_prefix(prefix)?;
        let root = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        Ok(Self {
            bucket: trimmed_bucket.to_owned(),
            root,
        })
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The trimmed prefix without its trailing `/` (`""` for the bucket root).
    pub fn prefix(&self) -> &str {
        self.root.trim_end_matches('/')
    }

    /// The root under which the six top-level directories live: `""` or `prefix/`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `<root><dir>/` for one of the valid top-level directories.
    pub fn top_level_dir(&self, dir: TopLevelDir) -> String {
        format!("{}{}/", self.root, dir.as_str())
    }

    /// `<root>backups/`, the prefix listed to find backups.
    pub fn backups_dir(&self) -> String {
        self.top_level_dir(TopLevelDir::Backups)
    }

    /// `<root>restores/`.
    pub fn restores_dir(&self) -> String {
        self.top_level_dir(TopLevelDir::Restores)
    }

    /// `<root>kopia/<repo>/`, the unified repository of a volume namespace.
    pub fn kopia_repo_dir(&self, repo: &str) -> Result<String, LayoutError> {
        check_name("repository", repo)?;
        Ok(format!("{}kopia/{repo}/", self.root))
    }

    /// The keys of one backup (`<root>backups/<name>/…`).
    pub fn backup(&self, name: &str) -> Result<BackupKeys, LayoutError> {
        check_name("backup", name)?;
        Ok(BackupKeys {
            dir: format!("{}{name}/", self.backups_dir()),
            name: name.to_owned(),
        })
    }

    /// The keys of one restore (`<root>restores/<name>/…`).
    pub fn restore(&self, name: &str) -> Result<RestoreKeys, LayoutError> {
        check_name("restore", name)?;
        Ok(RestoreKeys {
            dir: format!("{}{name}/", self.restores_dir()),
            name: name.to_owned(),
        })
    }

    /// Backup names from the common prefixes of a `ListCommonPrefixes(backups/, "/")`
    /// call: each prefix minus `<root>backups/` and its trailing `/`. Prefixes outside
    /// the backups directory and empty names are skipped.
    pub fn backup_names_from_prefixes<'a, I, S>(&self, prefixes: I) -> Vec<String>
    where
        I: IntoIterator<Item = &'a S>,
        S: AsRef<str> + ?Sized + 'a,
    {
        let dir = self.backups_dir();
        names_under(&dir, prefixes)
    }

    /// Restore names from the common prefixes under `<root>restores/`.
    pub fn restore_names_from_prefixes<'a, I, S>(&self, prefixes: I) -> Vec<String>
    where
        I: IntoIterator<Item = &'a S>,
        S: AsRef<str> + ?Sized + 'a,
    {
        let dir = self.restores_dir();
        names_under(&dir, prefixes)
    }

    /// Velero's `IsValid`: given the common prefixes of a `ListCommonPrefixes(root, "/")`
    /// call, any top-level directory other than the six valid ones makes the location
    /// invalid. Loose objects at the root are not checked (they are no common prefixes).
    pub fn check_top_level<'a, I, S>(&self, prefixes: I) -> Result<(), InvalidTopLevel>
    where
        I: IntoIterator<Item = &'a S>,
        S: AsRef<str> + ?Sized + 'a,
    {
        let invalid: Vec<String> = prefixes
            .into_iter()
            .map(|p| {
                let p = p.as_ref();
                let p = p.strip_prefix(self.root.as_str()).unwrap_or(p);
                p.strip_suffix('/').unwrap_or(p).to_owned()
            })
            .filter(|dir| TopLevelDir::parse(dir).is_none())
            .collect();
        if invalid.is_empty() {
            Ok(())
        } else {
            Err(InvalidTopLevel { dirs: invalid })
        }
    }
}

fn names_under<'a, I, S>(dir: &str, prefixes: I) -> Vec<String>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + ?Sized + 'a,
{
    prefixes
        .into_iter()
        .filter_map(|p| p.as_ref().strip_prefix(dir))
        .map(|rest| rest.strip_suffix('/').unwrap_or(rest))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .map(str::to_owned)
        .collect()
}

/// Names become one key segment: they must be non-empty, without `/`, and not `.`/`..`
/// (Velero cleans paths with `path.Join`, which would resolve those elsewhere).
fn check_name(kind: &'static str, name: &str) -> Result<(), LayoutError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(LayoutError::InvalidName {
            kind,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// One of the six valid top-level directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TopLevelDir {
    Backups,
    Restores,
    Restic,
    Metadata,
    Plugins,
    Kopia,
}

impl TopLevelDir {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Backups => "backups",
            Self::Restores => "restores",
            Self::Restic => "restic",
            Self::Metadata => "metadata",
            Self::Plugins => "plugins",
            Self::Kopia => "kopia",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "backups" => Self::Backups,
            "restores" => Self::Restores,
            "restic" => Self::Restic,
            "metadata" => Self::Metadata,
            "plugins" => Self::Plugins,
            "kopia" => Self::Kopia,
            _ => return None,
        })
    }
}

/// Top-level directories that make a location invalid. Its message has the shape of
/// Velero's, which users will search for: at most three names, then `...`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct InvalidTopLevel {
    pub dirs: Vec<String>,
}

impl fmt::Display for InvalidTopLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dirs.len() > 3 {
            write!(
                f,
                "Backup store contains {} invalid top-level directories: [{} ...]",
                self.dirs.len(),
                self.dirs[..3].join(" ")
            )
        } else {
            write!(
                f,
                "Backup store contains invalid top-level directories: [{}]",
                self.dirs.join(" ")
            )
        }
    }
}

/// The keys of one backup, all under `<root>backups/<name>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupKeys {
    dir: String,
    name: String,
}

impl BackupKeys {
    /// `<root>backups/<name>/`: list and delete everything under it to delete the backup.
    pub fn dir(&self) -> &str {
        &self.dir
    }
    fn file(&self, suffix: &str) -> String {
        format!("{}{}{suffix}", self.dir, self.name)
    }
    /// The Backup object as pretty JSON; its existence means the backup exists.
    pub fn metadata(&self) -> String {
        format!("{}velero-backup.json", self.dir)
    }
    /// The resource tarball.
    pub fn contents(&self) -> String {
        self.file(".tar.gz")
    }
    pub fn logs(&self) -> String {
        self.file("-logs.gz")
    }
    pub fn pod_volume_backups(&self) -> String {
        self.file("-podvolumebackups.json.gz")
    }
    pub fn volume_snapshots(&self) -> String {
        self.file("-volumesnapshots.json.gz")
    }
    pub fn item_operations(&self) -> String {
        self.file("-itemoperations.json.gz")
    }
    pub fn resource_list(&self) -> String {
        self.file("-resource-list.json.gz")
    }
    pub fn results(&self) -> String {
        self.file("-results.gz")
    }
    pub fn volume_info(&self) -> String {
        self.file("-volumeinfo.json.gz")
    }
    /// Legacy CSI file, read only (no longer written since Velero 1.17).
    pub fn csi_volume_snapshots(&self) -> String {
        self.file("-csi-volumesnapshots.json.gz")
    }
    /// Legacy CSI file, read only (no longer written since Velero 1.17).
    pub fn csi_volume_snapshot_contents(&self) -> String {
        self.file("-csi-volumesnapshotcontents.json.gz")
    }
    /// Legacy CSI file, read only (no longer written since Velero 1.18).
    pub fn csi_volume_snapshot_classes(&self) -> String {
        self.file("-csi-volumesnapshotclasses.json.gz")
    }
    /// Granary's addition, the backup manifest (docs/formats.md#backup-manifest). Velero
    /// ignores it.
    pub fn manifest(&self) -> String {
        format!("{}manifest.json.gz", self.dir)
    }
    /// Granary's addition, the signed integrity record (docs/formats.md#integrity-record).
    /// Velero never reads inside a backup's directory but for the files it names, so it
    /// ignores this one.
    pub fn integrity(&self) -> String {
        self.file("-integrity.json")
    }
}

/// The keys of one restore, all under `<root>restores/<name>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreKeys {
    dir: String,
    name: String,
}

impl RestoreKeys {
    pub fn dir(&self) -> &str {
        &self.dir
    }
    fn prefixed(&self, suffix: &str) -> String {
        format!("{}restore-{}{suffix}", self.dir, self.name)
    }
    /// Granary's addition, the signed integrity record of the restore's files.
    pub fn integrity(&self) -> String {
        self.prefixed("-integrity.json")
    }
    pub fn logs(&self) -> String {
        self.prefixed("-logs.gz")
    }
    pub fn results(&self) -> String {
        self.prefixed("-results.gz")
    }
    pub fn resource_list(&self) -> String {
        self.prefixed("-resource-list.json.gz")
    }
    pub fn item_operations(&self) -> String {
        self.prefixed("-itemoperations.json.gz")
    }
    /// The one restore file without the `restore-` prefix, as Velero names it.
    pub fn volume_info(&self) -> String {
        format!("{}{}-volumeinfo.json.gz", self.dir, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_that_are_no_plain_key_path_are_refused() {
        for bad in [
            "../../x",
            "..",
            "velero/../other",
            "./velero",
            "velero/.",
            "velero//seed",
            "velero\\seed",
            "velero/\u{7f}",
        ] {
            let e = StorageLayout::new("bucket", Some(bad)).expect_err(bad);
            assert!(matches!(e, LayoutError::InvalidPrefix { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("prefix"), "{e}");
        }
        for good in [
            "velero/seed-a",
            "/velero/",
            "a.b/..c/...",
            "ns/team-a.prefix",
        ] {
            StorageLayout::new("bucket", Some(good)).expect(good);
        }
    }

    #[test]
    fn bucket_and_prefix_are_trimmed() {
        let l = StorageLayout::new("/bucket/", Some("/velero/seed-a/")).expect("valid");
        assert_eq!(l.bucket(), "bucket");
        assert_eq!(l.prefix(), "velero/seed-a");
        assert_eq!(l.root(), "velero/seed-a/");
        assert_eq!(l.backups_dir(), "velero/seed-a/backups/");
        let bare = StorageLayout::new("bucket", None).expect("valid");
        assert_eq!(bare.root(), "");
        assert_eq!(bare.backups_dir(), "backups/");
        assert_eq!(
            StorageLayout::new("bucket", Some("///"))
                .expect("valid")
                .root(),
            ""
        );
    }

    #[test]
    fn bucket_with_slash_is_refused_except_mrap_arns() {
        let err = StorageLayout::new("bucket/prefix", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "backup storage location's bucket name \"bucket/prefix\" must not contain a '/' (if using a prefix, put it in the 'Prefix' field instead)"
        );
        let arn = "arn:aws:s3::123456789012:accesspoint/mfzwi23gnjvgw.mrap";
        assert_eq!(
            StorageLayout::new(arn, None).expect("MRAP ARN").bucket(),
            arn
        );
        assert_eq!(
            StorageLayout::new("//", None),
            Err(LayoutError::EmptyBucket)
        );
    }

    #[test]
    fn every_backup_key() {
        let l = StorageLayout::new("b", Some("p")).expect("valid");
        let k = l.backup("nightly").expect("valid name");
        assert_eq!(k.dir(), "p/backups/nightly/");
        assert_eq!(k.metadata(), "p/backups/nightly/velero-backup.json");
        assert_eq!(k.contents(), "p/backups/nightly/nightly.tar.gz");
        assert_eq!(k.logs(), "p/backups/nightly/nightly-logs.gz");
        assert_eq!(
            k.pod_volume_backups(),
            "p/backups/nightly/nightly-podvolumebackups.json.gz"
        );
        assert_eq!(
            k.volume_snapshots(),
            "p/backups/nightly/nightly-volumesnapshots.json.gz"
        );
        assert_eq!(
            k.item_operations(),
            "p/backups/nightly/nightly-itemoperations.json.gz"
        );
        assert_eq!(
            k.resource_list(),
            "p/backups/nightly/nightly-resource-list.json.gz"
        );
        assert_eq!(k.results(), "p/backups/nightly/nightly-results.gz");
        assert_eq!(
            k.volume_info(),
            "p/backups/nightly/nightly-volumeinfo.json.gz"
        );
        assert_eq!(
            k.csi_volume_snapshots(),
            "p/backups/nightly/nightly-csi-volumesnapshots.json.gz"
        );
        assert_eq!(
            k.csi_volume_snapshot_contents(),
            "p/backups/nightly/nightly-csi-volumesnapshotcontents.json.gz"
        );
        assert_eq!(
            k.csi_volume_snapshot_classes(),
            "p/backups/nightly/nightly-csi-volumesnapshotclasses.json.gz"
        );
        assert_eq!(k.manifest(), "p/backups/nightly/manifest.json.gz");
    }

    #[test]
    fn every_restore_key_including_the_unprefixed_volume_info() {
        let l = StorageLayout::new("b", None).expect("valid");
        let k = l.restore("r1").expect("valid name");
        assert_eq!(k.dir(), "restores/r1/");
        assert_eq!(k.logs(), "restores/r1/restore-r1-logs.gz");
        assert_eq!(k.results(), "restores/r1/restore-r1-results.gz");
        assert_eq!(
            k.resource_list(),
            "restores/r1/restore-r1-resource-list.json.gz"
        );
        assert_eq!(
            k.item_operations(),
            "restores/r1/restore-r1-itemoperations.json.gz"
        );
        assert_eq!(k.volume_info(), "restores/r1/r1-volumeinfo.json.gz");
    }

    #[test]
    fn names_that_would_escape_their_directory_are_refused() {
        let l = StorageLayout::new("b", None).expect("valid");
        for bad in ["", ".", "..", "a/b"] {
            assert!(l.backup(bad).is_err(), "{bad:?}");
            assert!(l.restore(bad).is_err(), "{bad:?}");
        }
        assert_eq!(l.kopia_repo_dir("ns1").expect("valid"), "kopia/ns1/");
        assert_eq!(l.top_level_dir(TopLevelDir::Plugins), "plugins/");
    }

    #[test]
    fn backup_names_come_from_common_prefixes() {
        let l = StorageLayout::new("b", Some("velero/seed")).expect("valid");
        let prefixes = [
            "velero/seed/backups/a/",
            "velero/seed/backups/b-2/",
            "velero/other/backups/c/",
            "velero/seed/backups/",
        ];
        assert_eq!(l.backup_names_from_prefixes(&prefixes), ["a", "b-2"]);
        let restores = ["velero/seed/restores/r/"];
        assert_eq!(l.restore_names_from_prefixes(&restores), ["r"]);
    }

    #[test]
    fn top_level_check_matches_velero() {
        let l = StorageLayout::new("b", Some("p")).expect("valid");
        let ok: Vec<String> = VALID_TOP_LEVEL_DIRS
            .iter()
            .map(|d| format!("p/{d}/"))
            .collect();
        assert_eq!(l.check_top_level(&ok), Ok(()));

        let one = ["p/backups/", "p/etcd/"];
        let err = l.check_top_level(&one).unwrap_err();
        assert_eq!(err.dirs, ["etcd"]);
        assert_eq!(
            err.to_string(),
            "Backup store contains invalid top-level directories: [etcd]"
        );

        let many = ["p/a/", "p/b/", "p/c/", "p/d/", "p/kopia/"];
        let err = l.check_top_level(&many).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Backup store contains 4 invalid top-level directories: [a b c ...]"
        );
    }
}

//! The Velero-compatible controllers that run in every seed (`granary seed`) and alone on
//! any cluster (`granary server`): locations, the backup queue, backups, and later sync,
//! garbage collection, deletion, schedules, downloads and restores (DESIGN §4
//! "Velero-compatible"). They use the format library in [`crate::velero`], which holds no
//! Kubernetes client; the decisions they make are pure functions in files of their own,
//! tested beside them.
//!
//! - [`settings`]: the `velero:` configuration section and `granary server`'s file;
//! - [`location`] (pure) and [`context`]: from a BackupStorageLocation to a store;
//! - [`locations`]: the `backup-storage-location` controller;
//! - [`namespaces`] and [`queue`] (pure) and [`queue_controller`]: the backup queue;
//! - [`backup`]: the backup runner (collection, tarball, Velero's files);
//! - [`backup_deletion`]: DeleteBackupRequests (the `backup-deletion` controller);
//! - [`backup_sync`]: backups in object storage brought into the cluster (`backup-sync`);
//! - [`gc`]: expired backups get a DeleteBackupRequest (the `gc` controller);
//! - [`schedules`]: backups taken on a schedule (the `schedule` controller);
//! - [`restore`] (the runner and its pure decisions) and [`restore_controller`]: restores;
//! - [`download`] (pure), [`download_controller`] and [`download_server`]: download
//!   URLs for DownloadRequests (the `download-request` controller);
//! - [`nonadmin`]: OADP's NonAdminBackup and NonAdminRestore for namespace owners;
//! - [`server`]: running the controllers, and `granary server`.

pub mod backup;
pub mod backup_controller;
pub mod backup_deletion;
pub mod backup_prepare;
pub mod backup_sync;
pub mod context;
pub mod download;
pub mod download_controller;
pub mod download_server;
pub mod gc;
pub mod location;
pub mod locations;
pub mod metrics;
pub mod namespaces;
pub mod nonadmin;
pub mod queue;
pub mod queue_controller;
pub mod restore;
pub mod restore_controller;
pub mod schedules;
pub mod server;
pub mod settings;
pub mod thread;
pub mod watch;

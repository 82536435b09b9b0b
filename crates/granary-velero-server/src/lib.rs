//! The Velero-compatible server: Velero's controllers for the `velero.io/v1` objects of
//! one namespace — backup storage locations, the backup queue, backups, deletion, garbage
//! collection, sync, schedules, restores and download requests — plus OADP's non-admin
//! controllers. `granary seed` runs them in every seed and `granary server` alone on any
//! cluster (docs/architecture.md#velero-compatible-server). They write Velero 1.18's
//! files through [`granary_velero`], which holds no Kubernetes client; the decisions they
//! make are pure functions in files of their own, tested beside them. Each controller's
//! driver and triggers: docs/controllers.md#velero-compatible-controllers.
//!
//! - [`settings`]: the `velero:` configuration section and `granary server`'s file;
//! - [`location`] (pure) and [`context`]: from a BackupStorageLocation to a store;
//! - [`locations`]: the `backup-storage-location` controller;
//! - [`namespaces`] and [`queue`] (pure) and [`queue_controller`]: the backup queue;
//! - [`backup_prepare`] (pure) and [`backup_controller`]: a `ReadyToStart` backup
//!   prepared and validated as Velero does, then run (the `backup` controller);
//! - [`backup`]: the backup runner (collection, tarball, Velero's files);
//! - [`backup_deletion`]: DeleteBackupRequests (the `backup-deletion` controller);
//! - [`backup_sync`]: backups in object storage brought into the cluster (`backup-sync`);
//! - [`integrity`]: the signing keys, records written beside what is stored, and
//!   backups checked against theirs;
//! - [`backup_verification`]: the scrubber and restore rehearsals (`backup-verification`);
//! - [`gc`]: expired backups get a DeleteBackupRequest (the `gc` controller);
//! - [`schedules`]: backups taken on a schedule (the `schedule` controller);
//! - [`restore`] (the runner and its pure decisions) and [`restore_controller`]: restores;
//! - [`download`] (pure), [`download_controller`] and [`download_server`]: download
//!   URLs for DownloadRequests (the `download-request` controller);
//! - [`server_status`]: ServerStatusRequests answered with the server's version and
//!   plugins (the `server-status-request` controller: `velero version`, `velero plugin
//!   get`);
//! - [`nonadmin`]: OADP's non-admin API for namespace owners (backups, restores, their
//!   own locations, download requests);
//! - [`metrics`]: Velero's metric names; [`watch`]: the one watch loop; [`thread`]: the
//!   runners' non-`Send` futures on a thread of their own;
//! - [`server`]: running the controllers under the Velero namespace's Lease, and
//!   `granary server`.

pub mod backup;
pub mod backup_controller;
pub mod backup_deletion;
pub mod backup_prepare;
pub mod backup_sync;
pub mod backup_verification;
pub mod context;
pub mod download;
pub mod download_controller;
pub mod download_server;
pub mod gc;
pub mod integrity;
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
pub mod server_status;
pub mod settings;
pub mod thread;
pub mod watch;

//! A namespace owner whose own backup location is on the `local` provider controls the
//! files of their directory in the bucket, and nothing else: a backup tarball they
//! replace with a symbolic link to the seed's admin kubeconfig, or a backup directory
//! they replace with a link to a directory outside (another tenant's files), is not
//! served through a NonAdminDownloadRequest. A request made after the swap gets no URL
//! (the backup no longer verifies); a URL handed out before the swap (the request names
//! the owner's own, verified backup) refuses to serve: nothing of the link's target
//! reaches the owner. Set up as tests/e2e/nonadmin_locations.rs does.

use granary_api::oadp::{NonAdminBackup, NonAdminDownloadRequest};
use granary_api::velero::DownloadTargetKind;
use granary_test_support::worlds::nonadmin_locations::{
    TENANTS, created_download, nab, nabsl, nadr, start, uuid_of,
};
use granary_velero::layout::StorageLayout;
use kube::api::{Api, PostParams};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const KUBECONFIG: &[u8] = b"apiVersion: v1\nkind: Config\nusers:\n- name: seed-admin\n  user:\n    token: SEED-ADMIN-TOKEN\n";
const OTHER_TENANT: &[u8] = b"OTHER-TENANT-BACKUP-LOG";

/// The file of `key` in bucket `bucket` of the local store at `data`: segments as they
/// are (the keys here hold no `%`), the object suffix `%f` on the last.
fn object_file(data: &Path, bucket: &str, key: &str) -> PathBuf {
    let mut p = data.join(bucket).join(key);
    let name = format!("{}%f", p.file_name().unwrap().to_string_lossy());
    p.set_file_name(name);
    p
}

/// Fetches a download URL; returns the status and the body.
async fn fetch(url: &str) -> (u16, Vec<u8>) {
    let r = reqwest::get(url).await.expect("get download URL");
    let status = r.status().as_u16();
    (status, r.bytes().await.expect("body").to_vec())
}

fn url_of(request: &NonAdminDownloadRequest) -> String {
    request
        .status
        .clone()
        .and_then(|s| s.velero)
        .and_then(|v| v.status)
        .and_then(|s| s.download_url)
        .expect("download URL")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_link_in_an_owners_location_is_never_served() {
    let w = start(|_| {}).await;
    let pp = PostParams::default();
    let nabs_a: Api<NonAdminBackup> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let nadrs_a: Api<NonAdminDownloadRequest> = Api::namespaced(w.owner_a.clone(), "ns-a");
    let mine = w
        .own_location(&nabsl("mine", TENANTS, Some("team"), "creds"))
        .await;
    assert!(!uuid_of(&mine).is_empty());
    nabs_a
        .create(&pp, &nab("b1", Some("mine")))
        .await
        .expect("nab");
    granary_test_support::worlds::nonadmin::wait_backed_up(&nabs_a, "b1").await;
    let vb = nabs_a
        .get("b1")
        .await
        .expect("nab")
        .velero_backup_name()
        .expect("velero backup")
        .to_string();
    let keys = StorageLayout::new(TENANTS, Some("ns-a/team"))
        .expect("layout")
        .backup(&vb)
        .expect("keys");
    let data = w.data.path();

    // Outside the data directory: the seed's kubeconfig, and another tenant's files
    // named like b1's.
    let outside = tempfile::tempdir().expect("outside");
    let kubeconfig = outside.path().join("admin.kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let other = outside.path().join("other-tenant");
    std::fs::create_dir_all(&other).unwrap();
    let log_file = object_file(data, TENANTS, &keys.logs());
    std::fs::write(other.join(log_file.file_name().unwrap()), OTHER_TENANT).unwrap();

    // The tarball replaced with a link to the kubeconfig.
    let tarball = object_file(data, TENANTS, &keys.contents());
    assert!(
        tarball.is_file(),
        "{} is where b1's tarball is",
        tarball.display()
    );
    let original_tarball = std::fs::read(&tarball).unwrap();
    // The URL is handed out while the backup verifies; the swap comes after.
    created_download(
        &nadrs_a,
        nadr("leak", DownloadTargetKind::BackupContents, "b1"),
    )
    .await;
    let url = url_of(&nadrs_a.get("leak").await.expect("nadr"));
    std::fs::remove_file(&tarball).unwrap();
    symlink(&kubeconfig, &tarball).unwrap();
    let (status, body) = fetch(&url).await;
    assert!(
        !contains(&body, b"SEED-ADMIN-TOKEN") && !contains(&body, b"kind: Config"),
        "the kubeconfig was served through {url}: {}",
        String::from_utf8_lossy(&body)
    );
    assert_ne!(status, 200, "a link was served as b1's tarball");

    // b1's directory replaced with a link to the other tenant's directory.
    // The tarball's link goes again (b1 must verify for the next URL).
    std::fs::remove_file(&tarball).unwrap();
    std::fs::write(&tarball, &original_tarball).unwrap();
    let dir = log_file.parent().unwrap().to_path_buf();
    created_download(&nadrs_a, nadr("cross", DownloadTargetKind::BackupLog, "b1")).await;
    let url = url_of(&nadrs_a.get("cross").await.expect("nadr"));
    std::fs::remove_dir_all(&dir).unwrap();
    symlink(&other, &dir).unwrap();
    let (status, body) = fetch(&url).await;
    assert!(
        !contains(&body, OTHER_TENANT),
        "another tenant's file was served through {url}"
    );
    assert_ne!(
        status, 200,
        "a file behind a linked directory was served as b1's log"
    );

    // The targets are as they were.
    assert_eq!(std::fs::read(&kubeconfig).unwrap(), KUBECONFIG);
    assert_eq!(
        std::fs::read(other.join(log_file.file_name().unwrap())).unwrap(),
        OTHER_TENANT
    );
}

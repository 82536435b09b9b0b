//! The `local` store never follows a symbolic link below its data directory: whoever
//! can plant links in a bucket directory (a tenant whose location is on the `local`
//! provider) reaches nothing but their own bucket's files. Every operation is tried
//! against a link to a file outside the data directory (the seed's kubeconfig), a link
//! to another bucket's object, a link to a directory outside, a symlinked intermediate
//! directory, and a bucket directory that is itself a link; the targets must never be
//! read, listed, written, copied or deleted. A data directory reached through a link
//! above the bucket directories works as before.
#![cfg(all(unix, feature = "local"))]

use bytes::Bytes;
use futures::StreamExt;
use granary_providers::{
    BucketOptions, ErrorKind, ListEntry, LocalStore, ObjectStore, get_bytes, list_all,
};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

const SECRET: &[u8] = b"apiVersion: v1\nkind: Config\n# the seed's admin kubeconfig\n";
const THEIRS: &[u8] = b"another tenant's backup";
const OUTSIDE: &[u8] = b"a file outside the data directory";

/// A data directory with buckets `b` (holding object `real`) and `other` (holding
/// `theirs`), next to a directory `outside` holding the kubeconfig and a directory
/// `dir` whose files are named like objects (`obj%f`, `sub/obj%f`).
struct World {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    outside: PathBuf,
    store: LocalStore,
}

impl World {
    async fn new() -> World {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("dir/sub")).unwrap();
        std::fs::write(outside.join("kubeconfig"), SECRET).unwrap();
        std::fs::write(outside.join("dir/obj%f"), OUTSIDE).unwrap();
        std::fs::write(outside.join("dir/sub/obj%f"), OUTSIDE).unwrap();
        let store = LocalStore::new(&data).expect("store");
        for b in ["b", "other"] {
            store
                .ensure_bucket(b, &BucketOptions::default())
                .await
                .expect("bucket");
        }
        store
            .put("b", "real", Bytes::from_static(b"mine"))
            .await
            .unwrap();
        store
            .put("other", "theirs", Bytes::from_static(THEIRS))
            .await
            .unwrap();
        World {
            _tmp: tmp,
            data,
            outside,
            store,
        }
    }

    /// Plants a link at `rel` (a path below the data directory) pointing at `target`.
    fn plant(&self, rel: &str, target: &Path) {
        let at = self.data.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        symlink(target, &at).unwrap_or_else(|e| panic!("plant {rel}: {e}"));
    }

    /// The planted links of every kind, in bucket `b`:
    /// - `leak` → the kubeconfig, `cross` → bucket `other`'s object;
    /// - `d` → the outside directory (so key `d/obj` would be its `obj%f`);
    /// - `x` → the outside root (so key `x/dir/obj` goes through a linked intermediate).
    fn plant_all(&self) {
        self.plant("b/leak%f", &self.outside.join("kubeconfig"));
        self.plant("b/cross%f", &self.data.join("other/theirs%f"));
        self.plant("b/d", &self.outside.join("dir"));
        self.plant("b/x", &self.outside);
    }

    /// Nothing outside the bucket changed: the targets are all there, as they were, and
    /// nothing new appeared outside.
    fn targets_intact(&self) {
        assert_eq!(
            std::fs::read(self.outside.join("kubeconfig")).unwrap(),
            SECRET
        );
        assert_eq!(
            std::fs::read(self.data.join("other/theirs%f")).unwrap(),
            THEIRS
        );
        assert_eq!(
            std::fs::read(self.outside.join("dir/obj%f")).unwrap(),
            OUTSIDE
        );
        assert_eq!(
            std::fs::read(self.outside.join("dir/sub/obj%f")).unwrap(),
            OUTSIDE
        );
        let mut outside: Vec<String> = walk(&self.outside);
        outside.sort();
        assert_eq!(
            outside,
            ["dir/obj%f", "dir/sub/obj%f", "kubeconfig"],
            "nothing was written outside the data directory"
        );
    }
}

/// Every file below `dir`, relative, without following links.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

async fn keys(store: &LocalStore, bucket: &str, prefix: &str) -> Vec<String> {
    list_all(store, bucket, prefix, None)
        .await
        .unwrap_or_else(|e| panic!("list {bucket}/{prefix}: {e}"))
        .into_iter()
        .map(|e| e.name().to_string())
        .collect()
}

/// Every key that reaches a target through a link.
const LINKED_KEYS: [&str; 5] = ["leak", "cross", "d/obj", "d/sub/obj", "x/dir/obj"];

#[tokio::test]
async fn get_and_head_never_follow_a_link() {
    let w = World::new().await;
    w.plant_all();
    for key in LINKED_KEYS {
        let e = match w.store.get("b", key).await {
            Ok(mut s) => {
                let mut got = Vec::new();
                while let Some(c) = s.next().await {
                    got.extend_from_slice(&c.unwrap());
                }
                panic!(
                    "get b/{key} followed a link and served {:?}",
                    String::from_utf8_lossy(&got)
                )
            }
            Err(e) => e,
        };
        assert_ne!(e.kind(), ErrorKind::Transient, "b/{key}: {e}");
        assert!(e.message().contains(key), "the error names the key: {e}");
        let e = w
            .store
            .head("b", key)
            .await
            .expect_err(&format!("head b/{key} followed a link"));
        assert!(e.message().contains(key), "the error names the key: {e}");
    }
    // A link is refused as such, not reported missing.
    assert_eq!(
        w.store.get("b", "leak").await.err().unwrap().kind(),
        ErrorKind::Conflict
    );
    assert_eq!(
        get_bytes(&w.store, "b", "real").await.unwrap(),
        Bytes::from_static(b"mine")
    );
    w.targets_intact();
}

#[tokio::test]
async fn a_listing_never_shows_or_walks_into_a_link() {
    let w = World::new().await;
    w.plant_all();
    assert_eq!(keys(&w.store, "b", "").await, ["real"]);
    for prefix in [
        "d/",
        "d/sub/",
        "d/o",
        "x/",
        "x/dir/",
        "x/dir/sub/",
        "le",
        "cross",
    ] {
        assert!(
            keys(&w.store, "b", prefix).await.is_empty(),
            "listing b/{prefix} showed what is behind a link"
        );
    }
    let rolled = list_all(&w.store, "b", "", Some("/")).await.unwrap();
    assert!(
        matches!(&rolled[..], [ListEntry::Object(m)] if m.key == "real"),
        "a link is neither an object nor a common prefix: {rolled:?}"
    );
    w.targets_intact();
}

#[tokio::test]
async fn a_delete_removes_a_link_at_most_never_its_target() {
    let w = World::new().await;
    w.plant_all();
    // A link at the key itself: the link goes (it is the bucket's own file), the target
    // stays.
    w.store
        .delete_many("b", &["leak".to_string(), "cross".to_string()])
        .await
        .expect("delete the links themselves");
    assert!(std::fs::symlink_metadata(w.data.join("b/leak%f")).is_err());
    assert!(std::fs::symlink_metadata(w.data.join("b/cross%f")).is_err());
    w.targets_intact();
    // Through a linked directory: refused, naming the key.
    for key in ["d/obj", "d/sub/obj", "x/dir/obj"] {
        let e = w
            .store
            .delete_many("b", &[key.to_string()])
            .await
            .expect_err(&format!("delete b/{key} went through a link"));
        assert!(e.message().contains(key), "{e}");
        w.targets_intact();
    }
    // A prefix delete lists first: nothing behind a link is listed, so nothing goes.
    for prefix in ["d/", "x/", ""] {
        w.store.delete_prefix("b", prefix).await.expect("prefix");
        w.targets_intact();
    }
    // Deleting the bucket whole removes the links, never what they point at.
    w.plant("b/leak%f", &w.outside.join("kubeconfig"));
    w.store
        .delete_bucket("b", true)
        .await
        .expect("delete bucket");
    assert!(std::fs::symlink_metadata(w.data.join("b")).is_err());
    w.targets_intact();
}

#[tokio::test]
async fn a_copy_never_reads_or_writes_through_a_link() {
    let w = World::new().await;
    w.plant_all();
    for key in LINKED_KEYS {
        w.store
            .copy("b", key, "b", "copied")
            .await
            .expect_err(&format!("copy from b/{key} followed a link"));
        w.store
            .copy("b", key, "other", "copied")
            .await
            .expect_err(&format!("copy from b/{key} followed a link"));
    }
    assert!(keys(&w.store, "b", "copied").await.is_empty());
    assert!(keys(&w.store, "other", "copied").await.is_empty());
    for dst in ["d/new", "d/sub/new", "x/dir/new"] {
        let e = w
            .store
            .copy("b", "real", "b", dst)
            .await
            .expect_err(&format!("copy to b/{dst} wrote through a link"));
        assert!(e.message().contains(dst), "{e}");
    }
    w.targets_intact();
}

#[tokio::test]
async fn a_write_under_a_linked_directory_is_refused() {
    let w = World::new().await;
    w.plant_all();
    for key in ["d/new", "d/sub/new", "d/obj", "x/dir/new", "x/new/deeper/k"] {
        let e = w
            .store
            .put("b", key, Bytes::from_static(b"written"))
            .await
            .expect_err(&format!("put b/{key} wrote through a link"));
        assert!(e.message().contains(key), "{e}");
        let reader = Box::pin(std::io::Cursor::new(b"written".to_vec()));
        w.store
            .put_reader("b", key, reader)
            .await
            .expect_err(&format!("put_reader b/{key} wrote through a link"));
        w.targets_intact();
    }
    // A put to a key that is a link replaces the link, never writes its target.
    w.store
        .put("b", "leak", Bytes::from_static(b"replaced"))
        .await
        .expect("put over a link");
    assert_eq!(
        get_bytes(&w.store, "b", "leak").await.unwrap(),
        Bytes::from_static(b"replaced")
    );
    assert!(
        std::fs::symlink_metadata(w.data.join("b/leak%f"))
            .unwrap()
            .is_file()
    );
    w.targets_intact();
    // No temp file is left behind by the refused writes.
    assert!(walk(&w.data.join(".tmp")).is_empty());
}

#[tokio::test]
async fn a_bucket_directory_that_is_a_link_is_refused() {
    let w = World::new().await;
    // A link planted in the data directory as a bucket: to a directory outside, and to
    // another bucket.
    w.plant("evil", &w.outside.join("dir"));
    w.plant("alias", &w.data.join("other"));
    for bucket in ["evil", "alias"] {
        let e = w
            .store
            .ensure_bucket(bucket, &BucketOptions::default())
            .await
            .expect_err(&format!("bucket {bucket} is a link"));
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        assert!(e.message().contains(bucket), "{e}");
        for key in ["obj", "theirs"] {
            assert!(w.store.get(bucket, key).await.is_err(), "{bucket}/{key}");
            assert!(w.store.head(bucket, key).await.is_err(), "{bucket}/{key}");
        }
        assert!(
            list_all(&w.store, bucket, "", None).await.is_err(),
            "list {bucket}"
        );
        assert!(
            w.store
                .put(bucket, "new", Bytes::from_static(b"x"))
                .await
                .is_err()
        );
        assert!(
            w.store
                .delete_many(bucket, &["obj".to_string(), "theirs".to_string()])
                .await
                .is_err()
        );
        assert!(w.store.copy("b", "real", bucket, "new").await.is_err());
        assert!(w.store.copy(bucket, "theirs", "b", "new").await.is_err());
        assert!(w.store.delete_bucket(bucket, true).await.is_err());
        assert!(w.store.delete_bucket(bucket, false).await.is_err());
        w.targets_intact();
    }
    assert_eq!(keys(&w.store, "other", "").await, ["theirs"]);
}

#[tokio::test]
async fn a_data_directory_reached_through_a_link_works() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real-data");
    std::fs::create_dir_all(&real).unwrap();
    let linked = tmp.path().join("data");
    symlink(&real, &linked).unwrap();
    let store = LocalStore::new(&linked).expect("store");
    store
        .ensure_bucket("b", &BucketOptions::default())
        .await
        .expect("bucket");
    store
        .put("b", "p/k", Bytes::from_static(b"v"))
        .await
        .unwrap();
    store.copy("b", "p/k", "b", "p/k2").await.unwrap();
    assert_eq!(
        get_bytes(&store, "b", "p/k2").await.unwrap(),
        Bytes::from_static(b"v")
    );
    assert_eq!(store.head("b", "p/k").await.unwrap().size, 1);
    assert_eq!(keys(&store, "b", "p/").await, ["p/k", "p/k2"]);
    store.delete_prefix("b", "p/").await.unwrap();
    assert!(keys(&store, "b", "").await.is_empty());
    store.delete_bucket("b", false).await.unwrap();
    assert!(!real.join("b").exists());
}

//! One behavioural suite, written once against `Arc<dyn ObjectStore>` and run on every
//! backend: `local` on a temp dir, S3 on moto, Azure Blob on Azurite, GCS on
//! fake-gcs-server. Sizes are the smallest that cross each boundary: 250 keys with a
//! page size of 100 (3 pages), a streamed object of 2 × 5 MiB + a tail (3 parts at S3's
//! real minimum part size), and on S3 2,001 keys for delete-prefix so it crosses S3's
//! real 1,000-key DeleteObjects limit twice.

mod support;

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use granary_providers::{
    BucketOptions, ErrorKind, ListEntry, ObjectStore, StoreOptions, get_bytes, list_all,
};
use support::{Backend, PART, bucket, put_many};

type Store = Arc<dyn ObjectStore>;

async fn create_twice(s: Store, _: Backend) {
    let b = bucket("twice");
    let first = s
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("first create");
    assert!(first.created);
    let second = s
        .ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("second create");
    assert!(!second.created, "second ensure must find the bucket");
    s.delete_bucket(&b, true).await.expect("cleanup");
}

async fn delete_non_empty_bucket(s: Store, _: Backend) {
    let b = bucket("nonempty");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    s.put(&b, "dir/obj", Bytes::from_static(b"x"))
        .await
        .expect("put");
    let e = s
        .delete_bucket(&b, false)
        .await
        .expect_err("non-empty delete must fail");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(s.head(&b, "dir/obj").await.expect("still there").size, 1);
    s.delete_bucket(&b, true).await.expect("emptying delete");
    let e = s.head(&b, "dir/obj").await.expect_err("gone");
    assert!(
        matches!(e.kind(), ErrorKind::NotFound | ErrorKind::BucketNotFound),
        "{e}"
    );
    // Deleting an absent bucket is success.
    s.delete_bucket(&b, false)
        .await
        .expect("absent bucket delete");
}

fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect::<Vec<u8>>()
        .into()
}

async fn round_trip(s: Store, _: Backend) {
    let b = bucket("rt");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    s.put(&b, "small", Bytes::from_static(b"hello"))
        .await
        .expect("put");
    assert_eq!(
        get_bytes(s.as_ref(), &b, "small").await.expect("get"),
        "hello"
    );
    assert_eq!(s.head(&b, "small").await.expect("head").size, 5);
    // Overwrite.
    s.put(&b, "small", Bytes::from_static(b"hi"))
        .await
        .expect("overwrite");
    assert_eq!(get_bytes(s.as_ref(), &b, "small").await.expect("get"), "hi");

    // Streaming below one part: single request path.
    let little = pattern(1000);
    let n = s
        .put_reader(&b, "little", Box::pin(std::io::Cursor::new(little.clone())))
        .await
        .expect("put_reader small");
    assert_eq!(n, 1000);
    assert_eq!(
        get_bytes(s.as_ref(), &b, "little").await.expect("get"),
        little
    );

    // Streaming across part boundaries: 3 parts.
    let big = pattern(2 * PART + 12_345);
    let n = s
        .put_reader(
            &b,
            "big/object.tar",
            Box::pin(std::io::Cursor::new(big.clone())),
        )
        .await
        .expect("put_reader big");
    assert_eq!(n as usize, big.len());
    assert_eq!(
        s.head(&b, "big/object.tar").await.expect("head").size as usize,
        big.len()
    );
    let mut stream = s.get(&b, "big/object.tar").await.expect("get big");
    let mut got = Vec::with_capacity(big.len());
    while let Some(chunk) = stream.try_next().await.expect("chunk") {
        got.extend_from_slice(&chunk);
    }
    assert!(got == big[..], "streamed object differs");
    // Exactly one part: the boundary case of the last read returning nothing.
    let exact = pattern(PART);
    s.put_reader(&b, "exact", Box::pin(std::io::Cursor::new(exact.clone())))
        .await
        .expect("put exact");
    assert_eq!(
        get_bytes(s.as_ref(), &b, "exact").await.expect("get exact"),
        exact
    );
    s.delete_bucket(&b, true).await.expect("cleanup");
}

async fn list_pages(s: Store, _: Backend) {
    let b = bucket("list");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    // 150 "directories" with one key each + 100 plain keys = 250 under p/, plus keys
    // outside the prefix.
    let mut keys: Vec<String> = (0..150).map(|i| format!("p/d{i:03}/x")).collect();
    keys.extend((0..100).map(|i| format!("p/f{i:03}")));
    let outside = vec!["q/1".to_string(), "p".to_string(), "o/p/x".to_string()];
    put_many(s.as_ref(), &b, &keys).await;
    put_many(s.as_ref(), &b, &outside).await;

    let flat = list_all(s.as_ref(), &b, "p/", None)
        .await
        .expect("flat list");
    let names: Vec<&str> = flat.iter().map(ListEntry::name).collect();
    let mut want: Vec<&str> = keys.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(names, want, "flat listing over 3 pages");
    assert!(
        flat.iter()
            .all(|e| matches!(e, ListEntry::Object(m) if m.size > 0))
    );

    let tree = list_all(s.as_ref(), &b, "p/", Some("/"))
        .await
        .expect("delimited list");
    let prefixes: Vec<&str> = tree
        .iter()
        .filter(|e| matches!(e, ListEntry::Prefix(_)))
        .map(ListEntry::name)
        .collect();
    let objects: Vec<&str> = tree
        .iter()
        .filter(|e| matches!(e, ListEntry::Object(_)))
        .map(ListEntry::name)
        .collect();
    assert_eq!(prefixes.len(), 150, "common prefixes");
    assert_eq!(prefixes[0], "p/d000/");
    assert_eq!(objects.len(), 100, "objects at the top level");
    assert_eq!(objects[0], "p/f000");

    let one = list_all(s.as_ref(), &b, "p/d042/", Some("/"))
        .await
        .expect("one dir");
    assert_eq!(
        one.iter().map(ListEntry::name).collect::<Vec<_>>(),
        vec!["p/d042/x"]
    );
    let none = list_all(s.as_ref(), &b, "zzz/", None)
        .await
        .expect("empty list");
    assert!(none.is_empty());
    s.delete_bucket(&b, true).await.expect("cleanup");
}

async fn delete_prefix(s: Store, backend: Backend) {
    let b = bucket("delpfx");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    // S3: 2,001 keys cross the real 1,000-key DeleteObjects limit twice. The others
    // delete with bounded parallelism in rounds of 100 (options below): 250 keys.
    let n = if backend == Backend::S3 { 2001 } else { 250 };
    let keys: Vec<String> = (0..n).map(|i| format!("del/{}/{i:04}", i % 7)).collect();
    let outside = vec![
        "del".to_string(),
        "dek/x".to_string(),
        "de/l".to_string(),
        "x/del/1".to_string(),
    ];
    put_many(s.as_ref(), &b, &keys).await;
    put_many(s.as_ref(), &b, &outside).await;
    let report = s.delete_prefix(&b, "del/").await.expect("delete prefix");
    assert_eq!(report.deleted, n as u64);
    if backend == Backend::S3 {
        assert_eq!(report.requests, 3, "S3 deletes 1000 keys per request");
    }
    assert!(
        list_all(s.as_ref(), &b, "del/", None)
            .await
            .expect("list")
            .is_empty(),
        "nothing left behind"
    );
    let rest: Vec<String> = list_all(s.as_ref(), &b, "", None)
        .await
        .expect("list rest")
        .into_iter()
        .map(|e| e.name().to_string())
        .collect();
    let mut want = outside.clone();
    want.sort();
    assert_eq!(rest, want, "nothing outside the prefix touched");
    // Idempotent.
    assert_eq!(s.delete_prefix(&b, "del/").await.expect("again").deleted, 0);
    s.delete_bucket(&b, true).await.expect("cleanup");
}

async fn copy(s: Store, _: Backend) {
    let b = bucket("copy");
    let b2 = bucket("copy2");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    s.ensure_bucket(&b2, &BucketOptions::default())
        .await
        .expect("create 2");
    let body = pattern(70_000);
    s.put(&b, "src/a", body.clone()).await.expect("put");
    s.copy(&b, "src/a", &b, "dst/a")
        .await
        .expect("copy in bucket");
    s.copy(&b, "src/a", &b2, "other/a")
        .await
        .expect("copy across buckets");
    assert_eq!(get_bytes(s.as_ref(), &b, "dst/a").await.expect("get"), body);
    assert_eq!(
        get_bytes(s.as_ref(), &b2, "other/a").await.expect("get"),
        body
    );
    assert_eq!(
        get_bytes(s.as_ref(), &b, "src/a")
            .await
            .expect("source kept"),
        body
    );
    let e = s
        .copy(&b, "src/missing", &b, "dst/missing")
        .await
        .expect_err("missing source");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    s.delete_bucket(&b, true).await.expect("cleanup");
    s.delete_bucket(&b2, true).await.expect("cleanup 2");
}

async fn not_found(s: Store, _: Backend) {
    let b = bucket("nf");
    let missing = bucket("nf-missing");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    let e = s
        .get(&b, "nope")
        .await
        .err()
        .expect("get missing must fail");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = s.head(&b, "nope").await.expect_err("head missing");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = s
        .get(&missing, "nope")
        .await
        .err()
        .expect("get in missing bucket must fail");
    assert_eq!(e.kind(), ErrorKind::BucketNotFound, "{e}");
    let e = s
        .put(&missing, "k", Bytes::from_static(b"x"))
        .await
        .expect_err("put in missing bucket");
    assert_eq!(e.kind(), ErrorKind::BucketNotFound, "{e}");
    let e = list_all(s.as_ref(), &missing, "", None)
        .await
        .expect_err("list missing bucket");
    assert_eq!(e.kind(), ErrorKind::BucketNotFound, "{e}");
    // Deleting absent keys is not an error.
    let r = s
        .delete_many(&b, &["nope".to_string(), "also/nope".to_string()])
        .await
        .expect("delete absent");
    assert_eq!(r.deleted, 2);
    s.delete_bucket(&b, true).await.expect("cleanup");
}

async fn odd_keys(s: Store, _: Backend) {
    let b = bucket("keys");
    s.ensure_bucket(&b, &BucketOptions::default())
        .await
        .expect("create");
    let keys = [
        "with space/and more.txt",
        "ünïcödé/日本語/ключ",
        "plus+sign+",
        "percent%20not-a-space%2F",
        "query?x=1&y=2#frag",
        "tilde~star*quote'paren()",
    ];
    for k in keys {
        s.put(&b, k, Bytes::from(k.as_bytes().to_vec()))
            .await
            .unwrap_or_else(|e| panic!("put {k:?}: {e}"));
    }
    for k in keys {
        assert_eq!(
            get_bytes(s.as_ref(), &b, k)
                .await
                .unwrap_or_else(|e| panic!("get {k:?}: {e}")),
            k.as_bytes()
        );
        assert_eq!(
            s.head(&b, k)
                .await
                .unwrap_or_else(|e| panic!("head {k:?}: {e}"))
                .size as usize,
            k.len()
        );
    }
    let mut want: Vec<&str> = keys.to_vec();
    want.sort();
    let listed = list_all(s.as_ref(), &b, "", None).await.expect("list");
    assert_eq!(listed.iter().map(ListEntry::name).collect::<Vec<_>>(), want);
    let listed = list_all(s.as_ref(), &b, "ünïcödé/", Some("/"))
        .await
        .expect("list unicode prefix");
    assert_eq!(
        listed.iter().map(ListEntry::name).collect::<Vec<_>>(),
        vec!["ünïcödé/日本語/"]
    );
    s.copy(&b, keys[1], &b, "copied/ü+ %")
        .await
        .expect("copy odd key");
    assert_eq!(
        get_bytes(s.as_ref(), &b, "copied/ü+ %")
            .await
            .expect("get copy"),
        keys[1].as_bytes()
    );
    let all: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    s.delete_many(&b, &all).await.expect("delete odd keys");
    let left = list_all(s.as_ref(), &b, "", None).await.expect("list");
    assert_eq!(
        left.iter().map(ListEntry::name).collect::<Vec<_>>(),
        vec!["copied/ü+ %"]
    );
    s.delete_bucket(&b, true).await.expect("cleanup");
}

fn options_for(backend: Backend) -> StoreOptions {
    let mut o = support::options();
    if backend != Backend::S3 {
        o.delete_batch_size = 100;
    }
    o
}

async fn run<F, Fut>(backend: Backend, behaviour: F)
where
    F: FnOnce(Store, Backend) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some((store, _guard)) = support::open(backend, options_for(backend)).await else {
        return;
    };
    behaviour(store, backend).await;
}

macro_rules! suite {
    ($($backend:ident => $variant:ident),* ; $behaviours:tt) => {
        $( suite!(@one $backend $variant $behaviours); )*
    };
    (@one $backend:ident $variant:ident [$($b:ident),*]) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $b() {
                    super::run(super::Backend::$variant, super::$b).await;
                }
            )*
        }
    };
}

suite!(local => Local, s3 => S3, azure => Azure, gcs => Gcs;
    [create_twice, delete_non_empty_bucket, round_trip, list_pages, delete_prefix, copy, not_found, odd_keys]);

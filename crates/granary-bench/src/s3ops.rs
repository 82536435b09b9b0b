//! Which S3 operation a path-style request is, and the tally the counting proxy keeps of
//! them, so Granary's requests and its peers' are counted by one rule. Pure.

use std::collections::BTreeMap;

use serde::Serialize;

/// An S3 operation, as told by method, path (`/bucket` or `/bucket/key`), query and
/// whether an `x-amz-copy-source` header is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum S3Op {
    ListObjects,
    DeleteObjects,
    DeleteObject,
    CopyObject,
    PutObject,
    /// A part of a multipart upload (its body is data like a PutObject's).
    UploadPart,
    /// Create/complete/abort of a multipart upload.
    Multipart,
    GetObject,
    HeadObject,
    /// Any other request on a bucket (HEAD, create, location, versioning, …).
    Bucket,
    /// Anything else (the service root, …).
    Other,
}

/// Query parameter names (`a=1&b` → `a`, `b`).
fn query_names(query: &str) -> impl Iterator<Item = &str> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split('=').next().unwrap_or(p))
}

/// Splits a path-style path into bucket and key (`None`: no key).
pub fn split_path(path: &str) -> (&str, Option<&str>) {
    let p = path.trim_start_matches('/');
    match p.split_once('/') {
        Some((b, k)) if !k.is_empty() => (b, Some(k)),
        Some((b, _)) => (b, None),
        None => (p, None),
    }
}

pub fn classify(method: &str, path: &str, query: &str, copy_source: bool) -> S3Op {
    let (bucket, key) = split_path(path);
    let has = |name: &str| query_names(query).any(|q| q == name);
    if bucket.is_empty() {
        return S3Op::Other;
    }
    match (method, key) {
        ("GET", None) => {
            // A listing carries no subresource, or only listing parameters.
            let listing = query_names(query).all(|q| {
                matches!(
                    q,
                    "list-type"
                        | "prefix"
                        | "delimiter"
                        | "max-keys"
                        | "continuation-token"
                        | "start-after"
                        | "marker"
                        | "encoding-type"
                        | "fetch-owner"
                )
            });
            if listing {
                S3Op::ListObjects
            } else {
                S3Op::Bucket
            }
        }
        ("POST", None) if has("delete") => S3Op::DeleteObjects,
        (_, None) => S3Op::Bucket,
        ("PUT", Some(_)) if has("uploadId") && has("partNumber") => S3Op::UploadPart,
        ("PUT", Some(_)) if copy_source => S3Op::CopyObject,
        ("PUT", Some(_)) => S3Op::PutObject,
        ("POST", Some(_)) => S3Op::Multipart,
        ("DELETE", Some(_)) if has("uploadId") => S3Op::Multipart,
        ("DELETE", Some(_)) => S3Op::DeleteObject,
        ("GET", Some(_)) => S3Op::GetObject,
        ("HEAD", Some(_)) => S3Op::HeadObject,
        _ => S3Op::Other,
    }
}

/// What went through the proxy since the last reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub requests: u64,
    pub by_operation: BTreeMap<S3Op, u64>,
    /// Object bytes that travelled through the client: PutObject/UploadPart bodies sent
    /// and GetObject bodies received, for keys that are data (not Granary's own
    /// `.granary/` bookkeeping objects).
    pub object_data_bytes: u64,
    /// The same for Granary's own `.granary/` objects (e.g. a migration's manifest).
    pub bookkeeping_bytes: u64,
}

impl Tally {
    /// Records one request: its operation, key and the bytes of its request body (PUT)
    /// or response body (GET).
    pub fn record(&mut self, op: S3Op, key: Option<&str>, request_body: u64, response_body: u64) {
        self.requests += 1;
        *self.by_operation.entry(op).or_default() += 1;
        let bytes = match op {
            S3Op::PutObject | S3Op::UploadPart => request_body,
            S3Op::GetObject => response_body,
            _ => 0,
        };
        if key.is_some_and(|k| k.contains(".granary/")) {
            self.bookkeeping_bytes += bytes;
        } else {
            self.object_data_bytes += bytes;
        }
    }

    pub fn count(&self, op: S3Op) -> u64 {
        self.by_operation.get(&op).copied().unwrap_or(0)
    }
}

/// The fewest requests that delete `n` objects under a prefix on S3: list pages of 1,000
/// keys and DeleteObjects of 1,000 keys.
pub fn minimal_delete_requests(n: u64) -> u64 {
    n.div_ceil(1000).max(1) + n.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_of_path_style_requests() {
        assert_eq!(
            classify("GET", "/b", "list-type=2&prefix=p%2F", false),
            S3Op::ListObjects
        );
        assert_eq!(classify("GET", "/b/", "", false), S3Op::ListObjects);
        assert_eq!(
            classify("GET", "/b", "prefix=p&marker=x", false),
            S3Op::ListObjects
        );
        assert_eq!(classify("GET", "/b", "location", false), S3Op::Bucket);
        assert_eq!(classify("POST", "/b", "delete", false), S3Op::DeleteObjects);
        assert_eq!(
            classify("POST", "/b/", "delete=", false),
            S3Op::DeleteObjects
        );
        assert_eq!(classify("DELETE", "/b/k/x", "", false), S3Op::DeleteObject);
        assert_eq!(classify("PUT", "/b/k", "", true), S3Op::CopyObject);
        assert_eq!(
            classify("PUT", "/b/k", "x-id=PutObject", false),
            S3Op::PutObject
        );
        assert_eq!(
            classify("PUT", "/b/k", "partNumber=1&uploadId=u", false),
            S3Op::UploadPart
        );
        assert_eq!(classify("POST", "/b/k", "uploads", false), S3Op::Multipart);
        assert_eq!(
            classify("DELETE", "/b/k", "uploadId=u", false),
            S3Op::Multipart
        );
        assert_eq!(classify("GET", "/b/k", "", false), S3Op::GetObject);
        assert_eq!(classify("HEAD", "/b/k", "", false), S3Op::HeadObject);
        assert_eq!(classify("HEAD", "/b", "", false), S3Op::Bucket);
        assert_eq!(classify("PUT", "/b", "", false), S3Op::Bucket);
        assert_eq!(classify("GET", "/", "", false), S3Op::Other);
    }

    #[test]
    fn data_bytes_count_object_bodies_only_and_bookkeeping_apart() {
        let mut t = Tally::default();
        t.record(S3Op::PutObject, Some("data/a"), 10, 0);
        t.record(S3Op::GetObject, Some("data/a"), 0, 7);
        t.record(S3Op::CopyObject, Some("data/b"), 0, 300);
        t.record(S3Op::ListObjects, None, 0, 5000);
        t.record(
            S3Op::PutObject,
            Some("data/.granary/migration-x.json.gz"),
            99,
            0,
        );
        assert_eq!(t.object_data_bytes, 17);
        assert_eq!(t.bookkeeping_bytes, 99);
        assert_eq!(t.requests, 5);
        assert_eq!(t.count(S3Op::PutObject), 2);
        assert_eq!(t.count(S3Op::DeleteObjects), 0);
    }

    #[test]
    fn minimal_delete_is_one_list_page_and_one_batch_per_thousand() {
        assert_eq!(minimal_delete_requests(10_000), 20);
        assert_eq!(minimal_delete_requests(10_001), 22);
        assert_eq!(minimal_delete_requests(20), 2);
        assert_eq!(minimal_delete_requests(0), 1);
    }
}

//! Metadata-only responses (`Accept: application/json;as=PartialObjectMetadata…`), as
//! kube-apiserver gives them: get, list and watch answer with the objects' metadata only,
//! so a client that only needs to notice changes (e.g. to Secrets) never receives data.

use bytes::Bytes;
use serde_json::{Value, json};

use super::list::ListPage;

const API_VERSION: &str = "meta.k8s.io/v1";

/// Whether an Accept header asks for metadata only.
pub(crate) fn wanted(accept: &str) -> bool {
    accept.contains("as=PartialObjectMetadata")
}

/// `obj` as a PartialObjectMetadata.
pub(crate) fn object(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": API_VERSION,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A list page as a PartialObjectMetadataList.
pub(crate) fn list(page: &ListPage) -> Value {
    let mut meta = json!({ "resourceVersion": page.resource_version.to_string() });
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
        if let Some(r) = page.remaining {
            meta["remainingItemCount"] = json!(r);
        }
    }
    let items: Vec<Value> = page
        .items
        .iter()
        .filter_map(|item| serde_json::from_slice::<Value>(item).ok())
        .map(|obj| object(&obj))
        .collect();
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": API_VERSION,
        "metadata": meta,
        "items": items,
    })
}

/// One watch line with its object reduced to metadata (bookmarks and errors unchanged).
pub(crate) fn watch_line(chunk: Bytes) -> Bytes {
    let Ok(mut ev) = serde_json::from_slice::<Value>(&chunk) else {
        return chunk;
    };
    if !matches!(ev["type"].as_str(), Some("ADDED" | "MODIFIED" | "DELETED")) {
        return chunk;
    }
    ev["object"] = object(&ev["object"]);
    let mut out = ev.to_string().into_bytes();
    out.push(b'\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_metadata_leaves() {
        let secret = json!({"kind": "Secret", "metadata": {"name": "s", "resourceVersion": "7"},
                            "data": {"key": "c2VjcmV0"}});
        let partial = object(&secret);
        assert_eq!(partial["kind"], "PartialObjectMetadata");
        assert_eq!(partial["metadata"]["name"], "s");
        assert!(partial.get("data").is_none());
        let line = Bytes::from(json!({"type": "MODIFIED", "object": secret}).to_string());
        let out: Value = serde_json::from_slice(&watch_line(line)).unwrap();
        assert!(out["object"].get("data").is_none());
        assert_eq!(out["object"]["metadata"]["resourceVersion"], "7");
        let bookmark = Bytes::from(r#"{"type":"BOOKMARK","object":{"metadata":{}}}"#);
        assert_eq!(watch_line(bookmark.clone()), bookmark);
        assert!(wanted(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        ));
        assert!(!wanted("application/json"));
    }
}

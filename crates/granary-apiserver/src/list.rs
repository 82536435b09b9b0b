//! The list verb: selectors, `limit`/`continue` paging and `resourceVersion` semantics.

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::registry::ResourceInfo;
use super::selectors::{FieldSelector, LabelSelector};
use super::state::{State, to_served};
use super::store::ObjectKey;

/// The query parameters of a list or watch.
#[derive(Debug, Default, Clone)]
pub(crate) struct ListQuery {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

impl ListQuery {
    pub(crate) fn parse(info: &ResourceInfo, q: &[(String, String)]) -> Result<Self, ApiError> {
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        Ok(ListQuery {
            label_selector: LabelSelector::parse(get("labelSelector").unwrap_or_default())?,
            field_selector: FieldSelector::parse(
                get("fieldSelector").unwrap_or_default(),
                &info.field_selector_fields(),
            )?,
            limit: match get("limit") {
                Some(l) if !l.is_empty() => Some(
                    l.parse::<usize>()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
                )
                .filter(|l| *l > 0),
                _ => None,
            },
            continue_token: get("continue").filter(|c| !c.is_empty()).map(String::from),
            resource_version: get("resourceVersion")
                .filter(|c| !c.is_empty())
                .map(String::from),
            resource_version_match: get("resourceVersionMatch")
                .filter(|c| !c.is_empty())
                .map(String::from),
        })
    }

    /// Whether a stored object is selected (parses it only when a selector needs to).
    pub(crate) fn selects(&self, obj: &Value) -> bool {
        self.label_selector.matches_object(obj) && self.field_selector.matches(obj)
    }

    pub(crate) fn has_selectors(&self) -> bool {
        !self.label_selector.is_empty() || !self.field_selector.is_empty()
    }
}

/// One page of a list.
pub(crate) struct ListPage {
    /// Items as JSON, already at the served version.
    pub items: Vec<Bytes>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [key.0, key.1]}).to_string();
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// A continue token's list resourceVersion (that of the list's first page) and the key
/// the next page starts after.
fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let bad = || {
        ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion")
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_array).ok_or_else(bad)?;
    match (
        start.first().and_then(Value::as_str),
        start.get(1).and_then(Value::as_str),
    ) {
        (Some(ns), Some(name)) => Ok((rv, (ns.to_string(), name.to_string()))),
        _ => Err(bad()),
    }
}

impl State {
    pub(crate) fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        q: &ListQuery,
    ) -> Result<ListPage, ApiError> {
        let continued = q
            .continue_token
            .as_deref()
            .map(decode_continue)
            .transpose()?;
        let convert = info.converts();
        let needs_parse = convert || q.has_selectors();
        // Without selectors or conversion every object is an item: only the page is
        // copied out, the rest is counted.
        let take = match q.limit {
            Some(l) if !needs_parse => l,
            _ => usize::MAX,
        };
        // Every page of a list is read at the resourceVersion of its first page, as
        // kube-apiserver serves them from etcd's revision: one consistent snapshot, and
        // a watch from that resourceVersion replays exactly what changed since.
        let wanted =
            match q.resource_version.as_deref() {
                None | Some("0") => None,
                Some(v) => Some(v.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {v:?}"))
                })?),
            };
        let exact = q.resource_version_match.as_deref() == Some("Exact");
        // `Exact` reads the collection as it was then, from the recent history.
        let at = wanted.filter(|_| exact && continued.is_none());
        let (raw, uncopied, current) = match (&continued, at) {
            (None, Some(at)) => self
                .store
                .list_page_at(&info.gr(), ns, None, take, at)
                .map_err(|oldest| {
                    ApiError::expired(format!(
                        "The resourceVersion for the provided list is too old (requested \
                         {at}, oldest kept {oldest})"
                    ))
                })?,
            (None, None) => self.store.list_page(&info.gr(), ns, None, take),
            (Some((at, key)), _) => self
                .store
                .list_page_at(&info.gr(), ns, Some(key), take, *at)
                .map_err(|_| {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent \
                         list result. You can start a new list without the continue \
                         parameter.",
                    )
                })?,
        };
        // A resourceVersion this server has not reached: kube-apiserver waits a moment
        // for it, then answers 504. One server's versions never run ahead of it, so
        // there is nothing to wait for.
        if let Some(want) = wanted
            && want > current
        {
            return Err(ApiError::too_large_resource_version(want, current));
        }
        let rv = match (&continued, at) {
            (Some((rv, _)), _) => *rv,
            (None, Some(at)) => at,
            (None, None) => current,
        };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut more = uncopied > 0;
        let mut remaining = uncopied;
        for (key, data) in raw {
            let selected = if needs_parse {
                let obj: Value = serde_json::from_slice(&data)
                    .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?;
                // Selectors name the served form's fields.
                let obj = if convert { to_served(info, obj) } else { obj };
                if !q.selects(&obj) {
                    continue;
                }
                if convert {
                    Bytes::from(
                        serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?,
                    )
                } else {
                    data
                }
            } else {
                data
            };
            if q.limit.is_some_and(|l| items.len() >= l) {
                more = true;
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(selected);
        }
        let continue_token = match (more, last_key) {
            (true, Some(k)) => Some(encode_continue(rv, &k)),
            _ => None,
        };
        Ok(ListPage {
            items,
            resource_version: rv,
            continue_token,
            remaining: more.then_some(remaining),
        })
    }
}

/// Serialises a page as `<Kind>List` without re-parsing its items.
pub(crate) fn list_body(info: &ResourceInfo, page: &ListPage) -> Bytes {
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
        if let Some(r) = page.remaining {
            meta["remainingItemCount"] = json!(r);
        }
    }
    let head = json!({"apiVersion": info.api_version(), "kind": format!("{}List", info.kind), "metadata": meta})
        .to_string();
    let mut out =
        Vec::with_capacity(head.len() + page.items.iter().map(|i| i.len() + 1).sum::<usize>() + 16);
    // Replace the closing brace of the head with the items array.
    out.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let k = ("ns".to_string(), "a".to_string());
        assert_eq!(decode_continue(&encode_continue(5, &k)).unwrap(), (5, k));
        assert_eq!(decode_continue("!!").unwrap_err().code, 400);
    }
}

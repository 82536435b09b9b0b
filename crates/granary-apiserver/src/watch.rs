//! The watch verb: a stream of JSON lines (`{"type": ..., "object": ...}`) that starts
//! from a snapshot or from a resourceVersion, filters by namespace and selectors, sends
//! BOOKMARKs when asked, ends at `timeoutSeconds`, and is closed when the watcher falls
//! behind the bounded broadcast buffer (the client then re-watches or re-lists).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::errors::ApiError;
use super::list::ListQuery;
use super::registry::ResourceInfo;
use super::state::{State, to_served};
use super::store::{EventType, GroupResource, StoreEvent, WatchFrom};

/// Watch-specific query parameters.
pub(crate) struct WatchParams {
    pub list: ListQuery,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
    pub send_initial_events: bool,
}

impl WatchParams {
    pub(crate) fn parse(list: ListQuery, q: &[(String, String)]) -> Self {
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        WatchParams {
            list,
            bookmarks: matches!(get("allowWatchBookmarks"), Some("true" | "1")),
            timeout: get("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .filter(|t| *t > 0)
                .map(Duration::from_secs),
            send_initial_events: matches!(get("sendInitialEvents"), Some("true" | "1")),
        }
    }
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn error_line(e: &ApiError) -> Bytes {
    line("ERROR", e.to_status().to_string().as_bytes())
}

fn bookmark(info: &ResourceInfo, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": meta});
    line("BOOKMARK", obj.to_string().as_bytes())
}

/// Filters and converts one event for this watcher; `None` when it is not selected.
struct Filter {
    info: Arc<ResourceInfo>,
    /// `info.gr()`, made once: every store event is compared with it.
    gr: GroupResource,
    namespace: Option<String>,
    query: ListQuery,
}

impl Filter {
    fn render(&self, data: &Bytes) -> Option<Bytes> {
        if !self.info.converts() {
            return Some(data.clone());
        }
        let obj: Value = serde_json::from_slice(data).ok()?;
        serde_json::to_vec(&to_served(&self.info, obj))
            .ok()
            .map(Bytes::from)
    }

    /// Selectors name the served form's fields.
    fn selects(&self, data: &Bytes) -> bool {
        if !self.query.has_selectors() {
            return true;
        }
        serde_json::from_slice::<Value>(data).is_ok_and(|o| {
            let o = if self.info.converts() {
                to_served(&self.info, o)
            } else {
                o
            };
            self.query.selects(&o)
        })
    }

    fn event(&self, e: &StoreEvent) -> Option<Bytes> {
        if e.gr != self.gr || self.namespace.as_ref().is_some_and(|ns| *ns != e.namespace) {
            return None;
        }
        let now = self.selects(&e.object);
        let before = e.old.as_ref().is_some_and(|o| self.selects(o));
        let kind = match (e.kind, before, now) {
            (EventType::Added, _, true) => EventType::Added,
            (EventType::Deleted, _, true) => EventType::Deleted,
            (EventType::Modified, true, true) => EventType::Modified,
            (EventType::Modified, false, true) => EventType::Added,
            (EventType::Modified, true, false) => EventType::Deleted,
            _ => return None,
        };
        Some(line(kind.as_str(), &self.render(&e.object)?))
    }
}

/// Sends `e` to the watcher when it is new to it and selected; false once the watcher is
/// gone.
async fn deliver(
    filter: &Filter,
    tx: &mpsc::Sender<Bytes>,
    last_rv: &mut u64,
    e: &StoreEvent,
) -> bool {
    if e.rv <= *last_rv {
        return true;
    }
    *last_rv = e.rv;
    match filter.event(e) {
        Some(l) => tx.send(l).await.is_ok(),
        None => true,
    }
}

/// Starts a watch; the returned receiver yields the body's chunks.
pub(crate) fn start(
    state: Arc<State>,
    info: Arc<ResourceInfo>,
    namespace: Option<String>,
    params: WatchParams,
) -> mpsc::Receiver<Bytes> {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let from = match params.list.resource_version.as_deref() {
        _ if params.send_initial_events => Ok(WatchFrom::Snapshot),
        None | Some("0") => Ok(WatchFrom::Snapshot),
        Some(rv) => rv
            .parse::<u64>()
            .map(WatchFrom::After)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}"))),
    };
    let start = from.and_then(|from| state.store.watch(&info.gr(), namespace.as_deref(), from));
    let filter = Filter {
        gr: info.gr(),
        info: info.clone(),
        namespace,
        query: params.list.clone(),
    };
    tokio::spawn(async move {
        let start = match start {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(error_line(&e)).await;
                return;
            }
        };
        let mut last_rv = start.rv;
        for data in &start.initial {
            if filter.selects(data)
                && let Some(obj) = filter.render(data)
                && tx.send(line("ADDED", &obj)).await.is_err()
            {
                return;
            }
        }
        if params.send_initial_events && tx.send(bookmark(&info, last_rv, true)).await.is_err() {
            return;
        }
        for e in &start.replay {
            last_rv = last_rv.max(e.rv);
            if let Some(l) = filter.event(e)
                && tx.send(l).await.is_err()
            {
                return;
            }
        }
        let mut receiver = start.receiver;
        let deadline = params.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(state.bookmark_interval);
        ticker.tick().await;
        loop {
            let sleep_until = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = tx.closed() => return,
                _ = sleep_until => return,
                _ = ticker.tick(), if params.bookmarks => {
                    // The store's progress, as kube-apiserver's bookmarks carry it (the
                    // channel has this resource's events only). Every event of this
                    // resource up to it is on the channel already (sent under the
                    // store's write lock): those go out first.
                    let progress = state.store.current_rv();
                    loop {
                        match receiver.try_recv() {
                            Ok(e) => {
                                if !deliver(&filter, &tx, &mut last_rv, &e).await {
                                    return;
                                }
                            }
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(_) => return,
                        }
                    }
                    last_rv = last_rv.max(progress);
                    if tx.send(bookmark(&info, last_rv, false)).await.is_err() {
                        return;
                    }
                }
                ev = receiver.recv() => match ev {
                    Ok(e) => {
                        if !deliver(&filter, &tx, &mut last_rv, &e).await {
                            return;
                        }
                    }
                    // Fell behind the bounded buffer: close the stream, as kube-apiserver
                    // closes an unresponsive watcher; the client re-watches from its last
                    // resourceVersion, which the history still holds for a while.
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::debug!(resource = %filter.gr.resource, missed, last_rv, "closing a watcher that fell behind");
                        return;
                    }
                    // The store is gone.
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    });
    rx
}

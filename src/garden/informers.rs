//! One watch and one cache per kind for all garden controllers (issue 19). Each kind is
//! listed and watched once; its reflector store is what the reconciles read *and* what
//! the kind's own controller looks objects up in, and every change fans out, as one
//! shared `Arc`, to the streams that trigger controllers (the kind's own controller and
//! those of other kinds that follow it). Before, every controller kept a watch and a
//! store of its own beside these caches: two lists, two watches and two copies in memory
//! of every Shoot and BackupEntry.
//!
//! A change is sent only after the store has it, so a reconcile never reads an older
//! state than the event that woke it. Objects are stored without `managedFields`, which
//! no garden controller reads (every write is a merge patch, never a replace).

use std::future::{Future, ready};
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::runtime::backoff::WatchBackoff;

/// One change the cache has taken in.
#[derive(Debug)]
pub struct Change<K> {
    pub object: Arc<K>,
    /// The object is gone (the event carries its last state).
    pub deleted: bool,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        Change {
            object: self.object.clone(),
            deleted: self.deleted,
        }
    }
}

/// The changes of one kind, as a stream.
pub type Changes<K> = UnboundedReceiverStream<Change<K>>;

/// The cache of one kind: the store, the future that fills it, a flag set once its
/// initial list is complete, the objects applied (for the kind's own controller:
/// `Controller::for_shared_stream`) and `N` streams of every change (for the triggers
/// of other controllers).
pub struct Informer<K: Resource<DynamicType = ()> + 'static, Fill, const N: usize> {
    pub store: Store<K>,
    pub fill: Fill,
    pub ready: tokio::sync::watch::Receiver<bool>,
    pub applied: UnboundedReceiverStream<Arc<K>>,
    pub changes: [Changes<K>; N],
}

/// Starts nothing: returns the [`Informer`] of `K`, whose `fill` future does the watch.
/// `observe` sees every watcher event right after the store applied it (the entry index
/// follows the same events).
pub fn informer<K, const N: usize>(
    api: Api<K>,
    config: watcher::Config,
    observe: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> Informer<K, impl Future<Output = ()> + Send, N>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(false);
    let (applied_tx, applied_rx) = unbounded_channel::<Arc<K>>();
    let mut senders: Vec<UnboundedSender<Change<K>>> = Vec::with_capacity(N);
    let changes: [Changes<K>; N] = std::array::from_fn(|_| {
        let (s, r) = unbounded_channel();
        senders.push(s);
        UnboundedReceiverStream::new(r)
    });
    let events = watcher(api, config)
        .modify(|o| o.meta_mut().managed_fields = None)
        .backoff(WatchBackoff::default());
    let fill = reflector::reflector(writer, events).for_each(move |event| {
        let change = match event {
            Ok(event) => {
                observe(&event);
                match event {
                    watcher::Event::InitDone => {
                        ready_tx.send_replace(true);
                        None
                    }
                    watcher::Event::Init => None,
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some(Change {
                        object: Arc::new(o),
                        deleted: false,
                    }),
                    watcher::Event::Delete(o) => Some(Change {
                        object: Arc::new(o),
                        deleted: true,
                    }),
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "cache watch error; retrying");
                None
            }
        };
        if let Some(change) = change {
            if !change.deleted {
                let _ = applied_tx.send(change.object.clone());
            }
            for s in &senders {
                let _ = s.send(change.clone());
            }
        }
        ready(())
    });
    Informer {
        store,
        fill,
        ready: ready_rx,
        applied: UnboundedReceiverStream::new(applied_rx),
        changes,
    }
}

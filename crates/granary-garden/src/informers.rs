//! One watch and one cache per kind for all garden controllers (see
//! docs/controllers.md#kube-runtime-controller). Each kind is listed and watched once;
//! its reflector store is what the reconciles read *and* what the kind's own controller
//! looks objects up in, and every change fans out, as one shared `Arc`, to the streams
//! that trigger controllers (the kind's own controller and those of other kinds that
//! follow it). Before, every controller kept a watch and a store of its own beside these
//! caches: two lists, two watches and two copies in memory of every Shoot and
//! BackupEntry.
//!
//! A change is sent only after the store has it, so a reconcile never reads an older
//! state than the event that woke it. Objects are stored without `managedFields`, which
//! no garden controller reads (every write is a merge patch, never a replace); the
//! garden's own kinds are decoded without them too ([`Watched`], [`Lean`]).

use std::future::{Future, ready};
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_stream::wrappers::UnboundedReceiverStream;

use granary_api::core::{BackupBucket, BackupEntry, CloudProfile, Seed, Shoot};
use granary_api::lean::Lean;
use granary_runtime::backoff::WatchBackoff;
use k8s_openapi::api::coordination::v1::Lease;

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

/// How the store takes in the initial list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstList {
    /// As kube's reflector does: the store shows the list once it is complete.
    Whole,
    /// Each object is in the store as soon as its page is read, so its controller can
    /// start on it while later pages are still coming. The store (and kube's
    /// `Store::wait_until_ready`, which holds a controller's runner) is ready from the
    /// start; the informer's own `ready` flag still waits for the complete list. Only
    /// the first list is taken in this way: a list that starts over, and every relist,
    /// is swapped in whole, so an object deleted meanwhile leaves the store.
    AsItComes,
}

/// How a kind comes over the watch. The garden's own kinds come as [`Lean`], without
/// their managedFields (never read here; see [`granary_api::lean`]); others as they are.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static
{
    type Wire: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static;
    fn from_wire(wire: Self::Wire) -> Self;
}

macro_rules! watched_lean {
    ($($kind:ty),*) => {$(
        impl Watched for $kind {
            type Wire = Lean<$kind>;
            fn from_wire(wire: Lean<$kind>) -> Self {
                wire.0
            }
        }
    )*};
}

watched_lean!(Shoot, BackupEntry, BackupBucket, Seed, CloudProfile);

impl Watched for Lease {
    type Wire = Lease;
    fn from_wire(wire: Lease) -> Self {
        wire
    }
}

fn from_wire<K: Watched>(event: watcher::Event<K::Wire>) -> watcher::Event<K> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(K::from_wire(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(K::from_wire(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(K::from_wire(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Starts nothing: returns the [`Informer`] of `K`, whose `fill` future does the watch.
/// `observe` sees every watcher event right after the store applied it (the entry index
/// follows the same events).
pub fn informer<K: Watched, const N: usize>(
    api: Api<K::Wire>,
    config: watcher::Config,
    first_list: FirstList,
    observe: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> Informer<K, impl Future<Output = ()> + Send, N> {
    let (store, mut writer, mut incremental) = store_for::<K>(first_list);
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
    let fill = events.for_each(move |event| {
        let event = event.map(|event| apply(&mut writer, &mut incremental, from_wire(event)));
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

/// An index kept from one kind's watcher events ([`Following`]).
pub trait Follows<K>: Default {
    /// Records the object's current version.
    fn follow_apply(&mut self, object: &K);
    /// Forgets the object.
    fn follow_delete(&mut self, object: &K);
}

/// An index that follows the watcher's events as the reflector store does: a relist
/// (`Init` … `InitApply` … `InitDone`) builds a fresh index that replaces the live one
/// at `InitDone`; `Apply` and `Delete` change the live one. Fed from an informer's
/// `observe` callback, right after the store applied the event.
pub struct Following<I> {
    inner: std::sync::RwLock<(I, Option<I>)>,
}

impl<I: Default> Default for Following<I> {
    fn default() -> Self {
        Following {
            inner: std::sync::RwLock::new((I::default(), None)),
        }
    }
}

impl<I: Default> Following<I> {
    /// Follows one watcher event.
    pub fn observe<K>(&self, event: &watcher::Event<K>)
    where
        I: Follows<K>,
    {
        let mut inner = self.inner.write().unwrap_or_else(|p| p.into_inner());
        let (live, next) = &mut *inner;
        match event {
            watcher::Event::Init => *next = Some(I::default()),
            watcher::Event::InitApply(o) => {
                if let Some(next) = next.as_mut() {
                    next.follow_apply(o);
                }
            }
            watcher::Event::InitDone => {
                if let Some(fresh) = next.take() {
                    *live = fresh;
                }
            }
            watcher::Event::Apply(o) => live.follow_apply(o),
            watcher::Event::Delete(o) => live.follow_delete(o),
        }
    }

    /// Runs `f` on one consistent view of the live index.
    pub fn read<T>(&self, f: impl FnOnce(&I) -> T) -> T {
        let inner = self.inner.read().unwrap_or_else(|p| p.into_inner());
        f(&inner.0)
    }
}

/// Where an informer taking its first list in as it comes ([`FirstList::AsItComes`]) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Incremental {
    /// The first list has not started.
    Before,
    /// The first list is being read: its objects go into the store one by one.
    Reading,
    /// Every later list is swapped in whole (as kube's reflector does).
    Off,
}

/// A store, its writer and the state [`apply`] keeps. Taking the first list in as it
/// comes, the store is ready (and empty) at once.
fn store_for<K>(first_list: FirstList) -> (Store<K>, Writer<K>, Incremental)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (store, mut writer) = reflector::store::<K>();
    let state = match first_list {
        FirstList::Whole => Incremental::Off,
        FirstList::AsItComes => {
            writer.apply_watcher_event(&watcher::Event::InitDone);
            Incremental::Before
        }
    };
    (store, writer, state)
}

/// Applies one watcher event to the store, and gives it back.
fn apply<K>(
    writer: &mut Writer<K>,
    state: &mut Incremental,
    event: watcher::Event<K>,
) -> watcher::Event<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match (*state, event) {
        (Incremental::Before, watcher::Event::Init) => {
            *state = Incremental::Reading;
            watcher::Event::Init
        }
        (Incremental::Reading, watcher::Event::InitApply(o)) => {
            let event = watcher::Event::Apply(o);
            writer.apply_watcher_event(&event);
            let watcher::Event::Apply(o) = event else {
                unreachable!("built as Apply above")
            };
            watcher::Event::InitApply(o)
        }
        // The store has the whole list already (a swap would empty it).
        (Incremental::Reading, watcher::Event::InitDone) => {
            *state = Incremental::Off;
            watcher::Event::InitDone
        }
        (current, event) => {
            // A first list that starts over (its objects so far are in the store) is
            // swapped in whole, which removes what the new list no longer has.
            if current == Incremental::Reading && matches!(event, watcher::Event::Init) {
                *state = Incremental::Off;
            }
            writer.apply_watcher_event(&event);
            event
        }
    }
}

#[cfg(test)]
mod tests;

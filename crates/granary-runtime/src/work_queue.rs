//! A small work queue for controllers: keys are scheduled (now or at a time),
//! deduplicated, and handed to a bounded number of workers; a key is never worked on
//! twice at once, and a key triggered while it is being worked on runs again afterwards.
//!
//! kube-runtime's `Controller` reconciles only objects still in its cache, but the mirror
//! must also act on objects that left its label selection (a hand-over) or vanished, so
//! the seed drives its reconcilers with this queue and raw watch events.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug)]
struct State<K> {
    /// Keys waiting, with the earliest time they may run.
    due: HashMap<K, Instant>,
    /// Keys being worked on now.
    running: HashSet<K>,
}

/// A shared queue of keys. Cloning shares it.
#[derive(Debug)]
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            state: self.state.clone(),
            notify: self.notify.clone(),
        }
    }
}

/// What a worker wants done with the key after it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing more until something triggers the key again.
    Done,
    /// Run again after this long (a scheduled time, a retry back-off or a resync).
    After(Duration),
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue; nothing runs until [`WorkQueue::run`].
    pub fn new() -> Self {
        WorkQueue {
            state: Arc::new(Mutex::new(State {
                due: HashMap::new(),
                running: HashSet::new(),
            })),
            notify: Arc::new(Notify::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // The state is plain data, consistent after any panic of a holder.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `key` as soon as possible.
    pub fn trigger(&self, key: K) {
        self.schedule(key, Instant::now());
    }

    /// Runs `key` at `at`, unless it is already due earlier.
    pub fn schedule(&self, key: K, at: Instant) {
        {
            let mut state = self.lock();
            let entry = state.due.entry(key).or_insert(at);
            if at < *entry {
                *entry = at;
            }
        }
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// Takes the next due key that is not running, or says how long to wait.
    fn take(&self) -> Result<K, Option<Instant>> {
        let mut state = self.lock();
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut pick: Option<(K, Instant)> = None;
        for (key, at) in &state.due {
            if state.running.contains(key) {
                continue;
            }
            if *at <= now {
                if pick.as_ref().is_none_or(|(_, best)| at < best) {
                    pick = Some((key.clone(), *at));
                }
            } else if next.is_none_or(|n| *at < n) {
                next = Some(*at);
            }
        }
        match pick {
            Some((key, _)) => {
                state.due.remove(&key);
                state.running.insert(key.clone());
                Ok(key)
            }
            None => Err(next),
        }
    }

    fn finish(&self, key: &K, next: Next) {
        {
            let mut state = self.lock();
            state.running.remove(key);
            if let Next::After(d) = next {
                let at = Instant::now() + d;
                let entry = state.due.entry(key.clone()).or_insert(at);
                if at < *entry {
                    *entry = at;
                }
            }
        }
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// Runs `workers` workers calling `work` for each due key, forever (cancel by dropping
    /// the future).
    pub async fn run<F, Fut>(&self, workers: usize, work: F)
    where
        F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Next> + Send + 'static,
    {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..workers.max(1) {
            let queue = self.clone();
            let work = work.clone();
            tasks.spawn(async move {
                loop {
                    let notified = queue.notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    match queue.take() {
                        Ok(key) => {
                            let next = work(key.clone()).await;
                            queue.finish(&key, next);
                        }
                        Err(Some(at)) => {
                            tokio::select! {
                                _ = notified => {}
                                _ = tokio::time::sleep_until(at) => {}
                            }
                        }
                        Err(None) => notified.await,
                    }
                }
            });
        }
        // Workers never end; a panicking reconcile is a bug, reported by the runtime.
        while let Some(Err(e)) = tasks.join_next().await {
            tracing::error!(error = %e, "seed worker stopped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn runs_each_key_once_per_trigger_and_honours_requeues() {
        let queue: WorkQueue<String> = WorkQueue::new();
        let runs = Arc::new(AtomicUsize::new(0));
        queue.trigger("a".into());
        queue.trigger("a".into());
        let counter = runs.clone();
        let q = queue.clone();
        let handle = tokio::spawn(async move {
            q.run(2, move |_key: String| {
                let counter = counter.clone();
                async move {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    if n == 0 {
                        Next::After(Duration::from_millis(20))
                    } else {
                        Next::Done
                    }
                }
            })
            .await
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while runs.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < deadline, "requeue ran");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "deduplicated, then requeued once"
        );
        handle.abort();
    }
}

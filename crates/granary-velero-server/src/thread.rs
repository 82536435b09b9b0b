//! Running work whose future is not `Send` (the backup and restore runners borrow
//! across their own tasks) on a thread of its own, with a current-thread runtime, and
//! awaiting its result from the controller's runtime.

/// Runs `work` on a new thread named `name`; `work` gets the thread's runtime to block
/// on. An error says the thread or its runtime could not be started, or that it died.
pub async fn on_own_thread<T, W>(name: String, work: W) -> Result<T, String>
where
    T: Send + 'static,
    W: FnOnce(&tokio::runtime::Runtime) -> T + Send + 'static,
{
    let what = name.clone();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name(name).spawn(move || {
        let result = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|runtime| work(&runtime))
            .map_err(|e| format!("cannot start the runtime of {what}: {e}"));
        let _ = done_tx.send(result);
    });
    match spawned {
        Ok(_) => done_rx
            .await
            .unwrap_or_else(|_| Err("its thread stopped".to_string())),
        Err(e) => Err(format!("cannot start a thread: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_its_own_thread() {
        let here = std::thread::current().id();
        let (id, v) = on_own_thread("t".into(), |rt| {
            (std::thread::current().id(), rt.block_on(async { 41 + 1 }))
        })
        .await
        .expect("ran");
        assert_ne!(id, here);
        assert_eq!(v, 42);
    }
}

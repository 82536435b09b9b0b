//! Fault tests: a loopback proxy between a provider and its emulator injects 503
//! SlowDown, 500, connection resets and latency on a deterministic schedule. Operations
//! complete with retries counted; a persistent fault ends as Throttled or Transient
//! after the configured attempts. For GCS the proxy also plays a server that rejects
//! credentials (401/403), which fake-gcs-server never does.

mod support;

use std::time::Duration;

use bytes::Bytes;
use granary_providers::{BucketOptions, ErrorKind, RetryPolicy};
use support::proxy::{Fault, FaultProxy, Schedule};
use support::{Backend, open_at, workload};

fn opts(attempts: usize) -> granary_providers::StoreOptions {
    granary_providers::StoreOptions {
        retry: RetryPolicy::fast(attempts),
        ..support::options()
    }
}

/// Runs the workload through a proxy with `fault` on `schedule` and checks that it
/// completed and that every injected fault (except latency) cost exactly one retry.
async fn survives(backend: Backend, fault: Fault, schedule: Schedule) {
    let Some(upstream) = support::endpoint(backend) else {
        return;
    };
    let proxy = FaultProxy::start(&upstream, fault, schedule).await;
    let store = open_at(backend, &proxy.url_for(&upstream), opts(6)).await;
    workload(store.as_ref(), "fault")
        .await
        .unwrap_or_else(|e| panic!("{backend:?} {fault:?}: {e}"));
    let faults = proxy.faults();
    assert!(faults > 0, "the schedule injected nothing");
    let retries = store.retry_stats().retries();
    if matches!(fault, Fault::Latency(_)) {
        assert_eq!(retries, 0, "latency alone must not cause retries");
    } else {
        assert_eq!(retries, faults, "one retry per injected fault");
    }
    assert_eq!(store.retry_stats().gave_up(), 0);
}

/// Every request fails: the operation gives up as `want` after `attempts` tries.
async fn gives_up(backend: Backend, fault: Fault, want: ErrorKind) {
    let Some(upstream) = support::endpoint(backend) else {
        return;
    };
    let proxy = FaultProxy::start(&upstream, fault, Schedule::Always).await;
    let store = open_at(backend, &proxy.url_for(&upstream), opts(3)).await;
    let e = store
        .ensure_bucket(&support::bucket("giveup"), &BucketOptions::default())
        .await
        .expect_err("must fail");
    assert_eq!(e.kind(), want, "{e}");
    assert_eq!(store.retry_stats().retries(), 2, "3 attempts = 2 retries");
    assert_eq!(store.retry_stats().gave_up(), 1);
    assert_eq!(
        proxy
            .counters
            .requests
            .load(std::sync::atomic::Ordering::SeqCst),
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_slowdown_every_third_request() {
    survives(Backend::S3, Fault::SlowDown, Schedule::EveryNth(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_internal_error_every_second_request() {
    survives(Backend::S3, Fault::Internal, Schedule::EveryNth(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_connection_reset_every_fourth_request() {
    survives(Backend::S3, Fault::Reset, Schedule::EveryNth(4)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_seeded_schedule() {
    survives(
        Backend::S3,
        Fault::SlowDown,
        Schedule::Seeded {
            seed: 42,
            percent: 25,
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_latency_needs_no_retry() {
    survives(
        Backend::S3,
        Fault::Latency(Duration::from_millis(30)),
        Schedule::EveryNth(5),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_persistent_slowdown_is_throttled() {
    gives_up(Backend::S3, Fault::SlowDown, ErrorKind::Throttled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_persistent_reset_is_transient() {
    gives_up(Backend::S3, Fault::Reset, ErrorKind::Transient).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_internal_error_every_third_request() {
    survives(Backend::Azure, Fault::Internal, Schedule::EveryNth(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_persistent_503_is_throttled() {
    gives_up(Backend::Azure, Fault::Status(503), ErrorKind::Throttled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_503_every_third_request() {
    survives(Backend::Gcs, Fault::Status(503), Schedule::EveryNth(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_persistent_500_is_transient() {
    gives_up(Backend::Gcs, Fault::Internal, ErrorKind::Transient).await;
}

/// fake-gcs-server accepts anything; the proxy answers as GCS does to a bad token (401)
/// and to a token without permission (403). Neither is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_rejected_credentials() {
    let Some(upstream) = support::endpoint(Backend::Gcs) else {
        return;
    };
    for (status, want) in [
        (401, ErrorKind::Unauthenticated),
        (403, ErrorKind::Unauthorized),
    ] {
        let proxy = FaultProxy::start(&upstream, Fault::Status(status), Schedule::Always).await;
        let store = open_at(Backend::Gcs, &proxy.url_for(&upstream), opts(4)).await;
        let e = store
            .ensure_bucket(&support::bucket("gauth"), &BucketOptions::default())
            .await
            .expect_err("rejected");
        assert_eq!(e.kind(), want, "{e}");
        let e = store
            .put("any-bucket", "k", Bytes::from_static(b"x"))
            .await
            .expect_err("rejected");
        assert_eq!(e.kind(), want, "{e}");
        assert_eq!(
            store.retry_stats().retries(),
            0,
            "auth failures are not retried"
        );
    }
}

/// A peer that accepts connections and never answers must not hang a GCS call: the
/// client's read timeout ends each attempt, and the call gives up as Transient.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_silent_peer_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let options = granary_providers::StoreOptions {
        request_timeout: Duration::from_millis(300),
        ..opts(2)
    };
    let store = open_at(Backend::Gcs, &format!("http://{addr}"), options).await;
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(30), store.head("bucket", "key"))
        .await
        .expect("the call ends instead of hanging")
        .expect_err("nothing answers");
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the timeouts"
    );
    silent.abort();
}

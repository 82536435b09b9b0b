//! The health and metrics endpoint of every long-running subcommand: `/healthz` (the
//! process serves requests), `/readyz` (caches synced and leader or healthy standby, as
//! reported through [`ReadinessFlag`]) and `/metrics` (Prometheus text).

use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::net::TcpListener;

/// Set once the process is ready to do its work; `/readyz` answers 200 only then.
#[derive(Clone, Debug, Default)]
pub struct ReadinessFlag {
    own: Arc<AtomicBool>,
    /// Further flags that must be set too (see [`ReadinessFlag::and`]).
    also: Vec<ReadinessFlag>,
}

impl ReadinessFlag {
    pub fn set(&self, ready: bool) {
        self.own.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.own.load(Ordering::Acquire) && self.also.iter().all(ReadinessFlag::is_ready)
    }

    /// A flag that is ready when this one and `other` both are (one process serving
    /// two things behind one `/readyz`). Setting it sets this one.
    pub fn and(&self, other: ReadinessFlag) -> ReadinessFlag {
        let mut also = self.also.clone();
        also.push(other);
        ReadinessFlag {
            own: self.own.clone(),
            also,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("--metrics-bind-address {0:?}: expected host:port or :port")]
    Address(String),
    #[error("--metrics-bind-address {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

/// Parses a bind address the way Go programs take it: `:8085` means every interface.
pub fn parse_bind_address(address: &str) -> Result<SocketAddr, HealthError> {
    let full = if address.starts_with(':') {
        format!("0.0.0.0{address}")
    } else {
        address.to_string()
    };
    full.parse()
        .map_err(|_| HealthError::Address(address.to_string()))
}

#[derive(Clone)]
struct AppState {
    metrics: Metrics,
    ready: ReadinessFlag,
}

/// A running health/metrics server.
pub struct HealthServer {
    pub local_addr: SocketAddr,
    shutdown: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl HealthServer {
    /// Binds `address` and serves until [`HealthServer::shutdown`].
    pub async fn start(
        address: &str,
        metrics: Metrics,
        ready: ReadinessFlag,
    ) -> Result<Self, HealthError> {
        let addr = parse_bind_address(address)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HealthError::Bind {
                address: address.to_string(),
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| HealthError::Bind {
            address: address.to_string(),
            source,
        })?;
        let app = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics_text))
            .with_state(AppState { metrics, ready });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "health server stopped");
            }
        });
        Ok(HealthServer {
            local_addr,
            shutdown: tx,
            task,
        })
    }

    /// Stops serving and waits for the server task.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(());
        let _ = self.task.await;
    }
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.ready.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("server listens");
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("request sent");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("response read");
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let metrics = Metrics::new();
        metrics.reconciles.with_label_values(&["test"]).inc();
        let ready = ReadinessFlag::default();
        let server = HealthServer::start("127.0.0.1:0", metrics, ready.clone())
            .await
            .expect("binds");
        let addr = server.local_addr;
        assert_eq!(http_get(addr, "/healthz").await.0, 200);
        assert_eq!(http_get(addr, "/readyz").await.0, 503);
        ready.set(true);
        assert_eq!(http_get(addr, "/readyz").await.0, 200);
        let (status, body) = http_get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("granary_reconcile_total{controller=\"test\"} 1"),
            "{body}"
        );
        server.shutdown().await;
    }

    #[test]
    fn a_combined_flag_is_ready_when_every_part_is() {
        let (controllers, webhook) = (ReadinessFlag::default(), ReadinessFlag::default());
        let both = controllers.and(webhook.clone());
        controllers.set(true);
        assert!(controllers.is_ready() && !both.is_ready());
        webhook.set(true);
        assert!(both.is_ready());
        both.set(false);
        assert!(
            !controllers.is_ready(),
            "setting the combined flag sets its own part"
        );
    }

    #[test]
    fn bind_addresses_like_go() {
        assert_eq!(
            parse_bind_address(":8085").expect("valid").to_string(),
            "0.0.0.0:8085"
        );
        assert_eq!(parse_bind_address("127.0.0.1:0").expect("valid").port(), 0);
        assert!(
            parse_bind_address("8085")
                .unwrap_err()
                .to_string()
                .contains("--metrics-bind-address")
        );
    }
}

//! A counting HTTP proxy on 127.0.0.1 in front of the S3 emulator: every client of a
//! benchmark (Granary and its peers) talks to the emulator through it, so their requests
//! and the object bytes they move are counted by one rule ([`super::s3ops`]).
//! Forwarding adds the same small cost to every client; it is not part of any ratio's
//! asymmetry.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderName, StatusCode};

use super::s3ops::{Tally, classify, split_path};

/// Request bodies larger than this are refused (the benchmarks write small objects).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Hop-by-hop headers (and those the forwarding client sets itself) are not forwarded.
fn forwarded(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "content-length"
            | "expect"
            | "proxy-connection"
            | "upgrade"
            | "te"
            | "trailer"
    )
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    client: reqwest::Client,
    tally: Arc<Mutex<Tally>>,
}

/// The running proxy; stops when dropped.
pub struct CountingProxy {
    /// `http://127.0.0.1:<port>`, the endpoint clients are given.
    pub url: String,
    tally: Arc<Mutex<Tally>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CountingProxy {
    /// Starts a proxy to `upstream` (e.g. `http://127.0.0.1:5000`) on a free loopback port.
    pub async fn start(upstream: &str) -> anyhow::Result<CountingProxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let tally = Arc::new(Mutex::new(Tally::default()));
        let shared = Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            // No proxy from the environment: the emulator is on loopback.
            client: reqwest::Client::builder()
                .no_proxy()
                .pool_max_idle_per_host(64)
                .build()?,
            tally: tally.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("benchmark proxy stopped: {e}");
            }
        });
        Ok(CountingProxy {
            url: format!("http://{addr}"),
            tally,
            task,
        })
    }

    /// What went through since the last call, and starts counting afresh.
    pub fn take(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

fn bad_gateway(e: impl std::fmt::Display) -> Response {
    let mut r = Response::new(Body::from(format!("benchmark proxy: {e}")));
    *r.status_mut() = StatusCode::BAD_GATEWAY;
    r
}

async fn forward(State(s): State<Shared>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let op = classify(
        parts.method.as_str(),
        &path,
        &query,
        parts.headers.contains_key("x-amz-copy-source"),
    );
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return bad_gateway(e),
    };
    let request_bytes = body.len() as u64;
    let url = if query.is_empty() {
        format!("{}{path}", s.upstream)
    } else {
        format!("{}{path}?{query}", s.upstream)
    };
    let mut out = s.client.request(parts.method.clone(), url);
    for (name, value) in parts.headers.iter().filter(|(n, _)| forwarded(n)) {
        out = out.header(name, value);
    }
    let upstream = match out.body(body).send().await {
        Ok(r) => r,
        Err(e) => return bad_gateway(e),
    };
    let status = upstream.status();
    let headers = upstream.headers().clone();
    let bytes = match upstream.bytes().await {
        Ok(b) => b,
        Err(e) => return bad_gateway(e),
    };
    let (_, key) = split_path(&path);
    s.tally.lock().unwrap_or_else(|p| p.into_inner()).record(
        op,
        key,
        request_bytes,
        bytes.len() as u64,
    );
    let head = parts.method == http::Method::HEAD;
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    for (name, value) in headers.iter() {
        // A HEAD answer keeps the object's Content-Length; otherwise the body sets it.
        if forwarded(name) || (head && name.as_str() == "content-length") {
            response.headers_mut().append(name, value.clone());
        }
    }
    response
}

//! A loopback HTTP fault proxy: forwards requests to an upstream emulator and, on a
//! deterministic schedule (every Nth request, or a seeded pseudo-random choice), answers
//! with a fault instead: a 503 SlowDown, a 500, a 401/403, a dropped connection, or an
//! added delay before forwarding. Counts requests and injected faults.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 503 with an S3-style SlowDown body.
    SlowDown,
    /// 500 InternalError.
    Internal,
    /// An HTTP status with an empty JSON error body (e.g. 401, 403 for GCS).
    Status(u16),
    /// Close the connection without answering.
    Reset,
    /// Forward, but only after this delay.
    Latency(Duration),
}

#[derive(Debug, Clone, Copy)]
pub enum Schedule {
    /// Requests number n, 2n, 3n, … (1-based) get the fault.
    EveryNth(u64),
    /// Every request gets the fault.
    Always,
    /// Each request gets the fault with probability `percent`, from a seeded generator.
    Seeded { seed: u64, percent: u64 },
}

#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub faults: AtomicU64,
}

pub struct FaultProxy {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// The proxy's base URL with the path of `upstream` (e.g. Azure's account segment).
    pub fn url_for(&self, upstream: &str) -> String {
        let u = url::Url::parse(upstream).expect("upstream URL");
        format!("http://{}{}", self.addr, u.path().trim_end_matches('/'))
    }

    pub fn faults(&self) -> u64 {
        self.counters.faults.load(Ordering::SeqCst)
    }

    pub async fn start(upstream: &str, fault: Fault, schedule: Schedule) -> FaultProxy {
        let up = url::Url::parse(upstream).expect("upstream URL");
        let authority = format!(
            "{}:{}",
            up.host_str().expect("host"),
            up.port_or_known_default().expect("port")
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let counters = Arc::new(Counters::default());
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let c2 = counters.clone();
        let rng = Arc::new(std::sync::Mutex::new(match schedule {
            Schedule::Seeded { seed, .. } => seed | 1,
            _ => 1,
        }));
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let client = client.clone();
                let counters = c2.clone();
                let authority = authority.clone();
                let rng = rng.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let client = client.clone();
                        let counters = counters.clone();
                        let authority = authority.clone();
                        let rng = rng.clone();
                        async move {
                            let n = counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
                            let hit = match schedule {
                                Schedule::EveryNth(k) => n % k == 0,
                                Schedule::Always => true,
                                Schedule::Seeded { percent, .. } => {
                                    let mut s = rng.lock().expect("rng");
                                    // xorshift64: deterministic for a seed and request order.
                                    *s ^= *s << 13;
                                    *s ^= *s >> 7;
                                    *s ^= *s << 17;
                                    *s % 100 < percent
                                }
                            };
                            let (parts, body) = req.into_parts();
                            // Always drain the request body so the client sees a clean answer.
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            if hit {
                                counters.faults.fetch_add(1, Ordering::SeqCst);
                                match fault {
                                    Fault::SlowDown => {
                                        return Ok(canned(
                                            503,
                                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
                                            "application/xml",
                                        ));
                                    }
                                    Fault::Internal => {
                                        return Ok(canned(
                                            500,
                                            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code><Message>injected</Message></Error>",
                                            "application/xml",
                                        ));
                                    }
                                    Fault::Status(s) => {
                                        return Ok(canned(
                                            s,
                                            "{\"error\":{\"code\":0,\"message\":\"injected\"}}",
                                            "application/json",
                                        ));
                                    }
                                    Fault::Reset => {
                                        return Err(std::io::Error::other("injected reset"));
                                    }
                                    Fault::Latency(d) => tokio::time::sleep(d).await,
                                }
                            }
                            let pq = parts
                                .uri
                                .path_and_query()
                                .map(|p| p.as_str())
                                .unwrap_or("/");
                            let uri: hyper::Uri =
                                format!("http://{authority}{pq}").parse().expect("uri");
                            let mut fwd = Request::from_parts(parts, Full::new(body));
                            *fwd.uri_mut() = uri;
                            match client.request(fwd).await {
                                Ok(resp) => {
                                    let (p, b) = resp.into_parts();
                                    let b =
                                        b.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                                    Ok::<_, std::io::Error>(Response::from_parts(p, Full::new(b)))
                                }
                                Err(_) => Ok(canned(502, "", "text/plain")),
                            }
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        FaultProxy {
            addr,
            counters,
            task,
        }
    }
}

fn canned(status: u16, body: &'static str, ct: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = StatusCode::from_u16(status).expect("status");
    r.headers_mut()
        .insert("content-type", ct.parse().expect("content type"));
    r
}

//! A TCP pass-through on 127.0.0.1 in front of an API server, which a test can cut and
//! restore to make that server unreachable for one client while it keeps running.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

pub struct Proxy {
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    /// Cancelled to drop every connection passing now; replaced on each cut.
    connections: Arc<std::sync::Mutex<CancellationToken>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().expect("proxy address");
        let open = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(std::sync::Mutex::new(CancellationToken::new()));
        let (o, c) = (open.clone(), connections.clone());
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                if !o.load(Ordering::SeqCst) {
                    drop(inbound); // refused: the peer sees the connection closed
                    continue;
                }
                let cut = c.lock().unwrap_or_else(|p| p.into_inner()).clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let mut inbound = inbound;
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.cancelled() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            open,
            connections,
            task,
        }
    }

    /// Drops every connection and refuses new ones until [`Proxy::restore`].
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        let mut token = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        token.cancel();
        *token = CancellationToken::new();
    }

    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel();
    }
}

//! A bounded pipe from the (blocking) tarball writer to the object store's
//! `put_reader`: the writer's bytes are uploaded while items are still being collected,
//! and at most `capacity` bytes wait in between, so memory does not grow with the backup.
//!
//! The read side reports end-of-stream only after the writer has called
//! [`PipeWriter::finish`]: a writer that fails or is dropped half-way makes the upload
//! fail instead of storing a truncated tarball as if it were whole.

use std::io::{self, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// Bytes per chunk sent through the pipe.
const CHUNK: usize = 64 * 1024;

/// The write end, for a blocking thread.
pub struct PipeWriter {
    buf: Vec<u8>,
    tx: mpsc::Sender<Bytes>,
    complete: Arc<AtomicBool>,
}

/// The read end, for `put_reader`.
pub struct PipeReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
    complete: Arc<AtomicBool>,
}

/// A pipe holding at most about `capacity` bytes in flight (in chunks of 64 KiB). The
/// writer must be used from a blocking context (`spawn_blocking`).
pub fn pipe(capacity: usize) -> (PipeWriter, PipeReader) {
    let (tx, rx) = mpsc::channel((capacity / CHUNK).max(1));
    let complete = Arc::new(AtomicBool::new(false));
    (
        PipeWriter {
            buf: Vec::with_capacity(CHUNK),
            tx,
            complete: Arc::clone(&complete),
        },
        PipeReader {
            rx,
            current: Bytes::new(),
            complete,
        },
    )
}

fn broken() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the upload of the tarball stopped",
    )
}

impl PipeWriter {
    fn send_buffer(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(chunk).map_err(|_| broken())
    }

    /// Marks the stream complete and closes it: the reader sees a clean end.
    pub fn finish(mut self) -> io::Result<()> {
        self.send_buffer()?;
        self.complete.store(true, Ordering::SeqCst);
        Ok(())
    }
}

impl Write for PipeWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.tx.is_closed() {
            return Err(broken());
        }
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= CHUNK {
            self.send_buffer()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_buffer()
    }
}

impl AsyncRead for PipeReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        while self.current.is_empty() {
            match self.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(chunk)) => self.current = chunk,
                Poll::Ready(None) if self.complete.load(Ordering::SeqCst) => {
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(None) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the tarball writer stopped before the end of the backup",
                    )));
                }
            }
        }
        let n = self.current.len().min(buf.remaining());
        let chunk = self.current.split_to(n);
        buf.put_slice(&chunk);
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_finished_stream_ends_cleanly_and_is_bounded() {
        let (mut w, mut r) = pipe(1024);
        let writer = tokio::task::spawn_blocking(move || {
            for i in 0..1000u32 {
                w.write_all(&i.to_le_bytes()).expect("write");
            }
            w.finish().expect("finish");
        });
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.expect("clean end");
        writer.await.expect("writer");
        assert_eq!(out.len(), 4000);
        assert_eq!(&out[4..8], &1u32.to_le_bytes());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_writer_is_an_error_not_an_end() {
        let (mut w, mut r) = pipe(64);
        let writer = tokio::task::spawn_blocking(move || {
            w.write_all(b"half a tarball").expect("write");
            drop(w);
        });
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).await.expect_err("truncated");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        writer.await.expect("writer");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_reader_fails_the_writer() {
        let (mut w, r) = pipe(16);
        drop(r);
        let res = tokio::task::spawn_blocking(move || w.write_all(&[0u8; 200_000]))
            .await
            .expect("join");
        assert!(res.is_err());
    }
}

//! What a guest writes (stdout, stderr, the `log` interface), kept up to a cap per call.
//!
//! Writes past the cap are dropped, never an error: a chatty guest must not fail because of it.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// A capped, shared buffer of guest output.
#[derive(Debug, Clone)]
pub struct GuestLog {
    inner: Arc<Mutex<LogBuffer>>,
}

#[derive(Debug)]
struct LogBuffer {
    cap: usize,
    text: Vec<u8>,
    dropped: usize,
}

impl GuestLog {
    /// An empty log that keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        GuestLog {
            inner: Arc::new(Mutex::new(LogBuffer {
                cap,
                text: Vec::new(),
                dropped: 0,
            })),
        }
    }

    /// Append bytes, keeping what fits under the cap.
    pub fn append(&self, bytes: &[u8]) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = buf.cap.saturating_sub(buf.text.len());
        let take = room.min(bytes.len());
        buf.text.extend_from_slice(&bytes[..take]);
        buf.dropped += bytes.len() - take;
    }

    /// What was kept, as lossy UTF-8, and how many bytes were dropped past the cap.
    pub fn contents(&self) -> (String, usize) {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (String::from_utf8_lossy(&buf.text).into_owned(), buf.dropped)
    }

    /// The last `max` bytes of the log (where a panic message ends up), trimmed.
    pub fn tail(&self, max: usize) -> String {
        let (text, _) = self.contents();
        let start = text.len().saturating_sub(max);
        let start = (start..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].trim().to_owned()
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always accept: excess is dropped in `append`, so the guest never blocks or fails.
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_past_the_cap_are_dropped_and_counted() {
        let log = GuestLog::new(4);
        log.append(b"abc");
        log.append(b"def");
        assert_eq!(log.contents(), ("abcd".to_owned(), 2));
    }
}

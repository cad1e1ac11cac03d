//! What a guest writes (stdout, stderr, the `log` interface), kept up to a cap per call.
//!
//! Writes past the cap are dropped, never an error: a chatty guest must not fail because of it.
//! Besides that head, the log keeps a small ring of the most recent bytes, so the end of the
//! output (where a panic message lands) survives however much was dropped before it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Most recent bytes kept besides the head (never more than the cap): what a trap's message
/// shows of the guest's output.
pub const TAIL_BYTES: usize = 2048;

/// A capped, shared buffer of guest output.
#[derive(Debug, Clone)]
pub struct GuestLog {
    inner: Arc<Mutex<LogBuffer>>,
}

#[derive(Debug)]
struct LogBuffer {
    cap: usize,
    /// The first `cap` bytes written.
    text: Vec<u8>,
    dropped: usize,
    /// The last `recent_cap` bytes written, whether or not the head kept them.
    recent: VecDeque<u8>,
    recent_cap: usize,
    /// Bytes written in all.
    written: usize,
}

impl GuestLog {
    /// An empty log that keeps at most `cap` bytes from the start, and the last
    /// `min(cap, TAIL_BYTES)` bytes.
    pub fn new(cap: usize) -> Self {
        let recent_cap = cap.min(TAIL_BYTES);
        GuestLog {
            inner: Arc::new(Mutex::new(LogBuffer {
                cap,
                text: Vec::new(),
                dropped: 0,
                // Grown on first write: most calls print nothing.
                recent: VecDeque::new(),
                recent_cap,
                written: 0,
            })),
        }
    }

    /// Append bytes, keeping what fits under the cap, and the newest bytes in the ring.
    pub fn append(&self, bytes: &[u8]) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = buf.cap.saturating_sub(buf.text.len());
        let take = room.min(bytes.len());
        buf.text.extend_from_slice(&bytes[..take]);
        buf.dropped += bytes.len() - take;
        buf.written += bytes.len();
        let newest = &bytes[bytes.len() - bytes.len().min(buf.recent_cap)..];
        let excess = (buf.recent.len() + newest.len()).saturating_sub(buf.recent_cap);
        buf.recent.drain(..excess);
        buf.recent.extend(newest);
    }

    /// What the head kept, as lossy UTF-8, and how many bytes were dropped past the cap.
    pub fn contents(&self) -> (String, usize) {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (String::from_utf8_lossy(&buf.text).into_owned(), buf.dropped)
    }

    /// The end of what was dropped past the cap (at most [`TAIL_BYTES`]), trimmed: the part of
    /// the ring the head does not already hold. Empty when nothing was dropped.
    pub fn dropped_end(&self) -> String {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = buf.dropped.min(buf.recent.len());
        let cut = buf.dropped > n;
        text_of(buf.recent.range(buf.recent.len() - n..), cut)
    }

    /// The last `max` bytes of everything written (at most [`TAIL_BYTES`], and never more than
    /// the cap), trimmed: where a panic message ends up, even after a flood of output.
    pub fn tail(&self, max: usize) -> String {
        let buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(buf.recent.len());
        let cut = buf.written > n;
        text_of(buf.recent.range(buf.recent.len() - n..), cut)
    }
}

/// `bytes` as lossy UTF-8, trimmed. When they were `cut` from a longer output, a character split
/// at the start is skipped rather than shown as a replacement character.
fn text_of<'a>(bytes: impl Iterator<Item = &'a u8>, cut: bool) -> String {
    let bytes: Vec<u8> = bytes.copied().collect();
    // UTF-8 continuation bytes are 0b10xx_xxxx; a character has at most three of them.
    let skip = if cut {
        bytes
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xc0 == 0x80)
            .count()
    } else {
        0
    };
    String::from_utf8_lossy(&bytes[skip..]).trim().to_owned()
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

    #[test]
    fn the_tail_is_the_end_of_everything_written_not_of_the_head() {
        let log = GuestLog::new(4);
        log.append(b"abc");
        log.append(b"def");
        log.append(b"ghi");
        assert_eq!(log.contents(), ("abcd".to_owned(), 5));
        // The ring is no bigger than the cap: the last 4 bytes.
        assert_eq!(log.tail(TAIL_BYTES), "fghi");
        assert_eq!(log.tail(2), "hi");
        assert_eq!(log.dropped_end(), "fghi");
    }

    #[test]
    fn a_panic_after_a_flood_is_at_the_end_of_the_tail() {
        let log = GuestLog::new(64 << 10);
        let line = format!("{}\n", "x".repeat(1023));
        for _ in 0..1024 {
            log.append(line.as_bytes());
        }
        log.append(b"thread '<unnamed>' panicked at src/lib.rs:1:1:\nthe last words\n");
        let (head, dropped) = log.contents();
        assert_eq!(head.len(), 64 << 10);
        assert!(!head.contains("the last words"));
        assert_eq!(dropped, (1 << 20) + 62 - (64 << 10));
        let tail = log.tail(TAIL_BYTES);
        assert!(tail.ends_with("the last words"), "{tail}");
        assert!(tail.len() <= TAIL_BYTES);
        assert!(log.dropped_end().ends_with("the last words"));
    }

    #[test]
    fn a_short_log_is_all_tail_and_drops_nothing() {
        let log = GuestLog::new(64 << 10);
        log.append(b"  one line\n");
        assert_eq!(log.tail(TAIL_BYTES), "one line");
        assert_eq!(log.dropped_end(), "");
    }

    #[test]
    fn a_character_cut_at_the_start_of_the_tail_is_skipped() {
        let log = GuestLog::new(64 << 10);
        // "é" is two bytes; keeping the last 4 of "aébc" cuts nothing, the last 3 cuts it.
        log.append("aébc".as_bytes());
        assert_eq!(log.tail(4), "ébc");
        assert_eq!(log.tail(3), "bc");
    }
}

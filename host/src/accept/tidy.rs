//! A connection's stream that runs a hook after each write that went through
//! (`ThreadHooks::after_write`): the server's choreography (`threads/`) hands one in that, on a
//! connection thread, resets the store of the call just answered and makes the next instance
//! right after the answer's `writev`, before the next request is read (`runtime/retire.rs`).
//! Elsewhere it costs one thread-local read a write.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `I`, running a hook after each write that went through.
pub(super) struct TidyAfterWrites<I> {
    io: I,
    after_write: Option<fn()>,
}

impl<I> TidyAfterWrites<I> {
    /// `io`, running `after_write` (if any) after each write that went through.
    pub(super) fn new(io: I, after_write: Option<fn()>) -> Self {
        TidyAfterWrites { io, after_write }
    }

    /// `written`, after the hook if bytes went out.
    fn tidied(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let (Poll::Ready(Ok(n)), Some(after_write)) = (&written, self.after_write)
            && *n > 0
        {
            after_write();
        }
        written
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for TidyAfterWrites<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TidyAfterWrites<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.tidied(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.tidied(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

//! A connection's stream that lets its thread tidy after each write: on a connection thread,
//! the store of the call just answered is reset and the next instance made right after the
//! answer's `writev`, before the next request is read (`runtime/retire.rs`, `after_write`).
//! Elsewhere the check is one thread-local read a write.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `I`, tidying after each write that went through.
pub(super) struct TidyAfterWrites<I>(pub I);

/// `written`, after tidying if bytes went out.
fn tidied(written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
    if let Poll::Ready(Ok(n)) = written
        && n > 0
    {
        crate::runtime::retire::after_write();
    }
    written
}

impl<I: AsyncRead + Unpin> AsyncRead for TidyAfterWrites<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TidyAfterWrites<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        tidied(Pin::new(&mut self.0).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        tidied(Pin::new(&mut self.0).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

//! A deadline on a connection's opening: the TLS handshake (timed apart, in `handshake`) and then
//! the bytes the protocol is told by (the HTTP/2 preface, or the start of an HTTP/1.1 request)
//! must come within the header timeout of the connection being accepted. Without it a client
//! that finishes its handshake and then says nothing would hold a connection until the idle
//! timeout, as hyper's own header timer starts only once HTTP/1.1 has been detected.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Bytes that tell HTTP/2 (its preface) from HTTP/1.1.
const DETECTION_BYTES: usize = 24;

/// `I`, whose reads fail with `TimedOut` when its first bytes have not arrived by a deadline.
pub(super) struct OpeningDeadline<I> {
    io: I,
    /// Until the detection bytes have been read; `None` after.
    deadline: Option<Pin<Box<Sleep>>>,
    still_to_read: usize,
}

impl<I> OpeningDeadline<I> {
    /// `io`, whose first bytes must arrive by `deadline`.
    pub(super) fn new(io: I, deadline: Instant) -> Self {
        OpeningDeadline {
            io,
            deadline: Some(Box::pin(tokio::time::sleep_until(deadline))),
            still_to_read: DETECTION_BYTES,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for OpeningDeadline<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Some(deadline) = &mut this.deadline {
            match &read {
                Poll::Ready(Ok(())) => {
                    let n = buf.filled().len() - before;
                    this.still_to_read = this.still_to_read.saturating_sub(n);
                    // The end of the stream also ends the wait.
                    if this.still_to_read == 0 || n == 0 {
                        this.deadline = None;
                    }
                }
                Poll::Ready(Err(_)) => {}
                Poll::Pending => {
                    if deadline.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the request did not start within the header timeout",
                        )));
                    }
                }
            }
        }
        read
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for OpeningDeadline<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
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

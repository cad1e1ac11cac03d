//! HTTP bodies both ways, shared by the server and the client so that neither imports the other:
//! one read into one buffer as its frames arrive ([`gather`]: the client reads answers this way,
//! and the server (`wasmrpc-host`) call bodies), and one sent as the buffers it already is
//! ([`Chunks`]: every request the client sends, so a binary infer's tensors go out where they
//! are; the server's binary infer answers). Only the `http-body` traits: no client, no server.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;

/// Room made at the start for a body's declared length, at most: a client that declares much
/// and sends little gets no more than this set aside for it (the buffer grows past it as data
/// arrives).
pub const PREALLOCATED_MAX: usize = 64 << 20;

/// The body's data in one buffer, copied frame by frame as the frames arrive, with room for
/// `expected` bytes (up to [`PREALLOCATED_MAX`]) made at the start. Each frame is copied while it
/// is still in the cache and then dropped, so the connection's read buffer can take its memory
/// back for the next frames, instead of every frame being kept until the end and copied then. A
/// body of one frame is that frame, not copied.
///
/// # Errors
/// The body's own error, when a frame cannot be read.
pub async fn gather<B>(mut body: B, expected: usize) -> Result<Bytes, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    let mut first: Option<Bytes> = None;
    let mut joined: Option<bytes::BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue; // trailers: not part of the data
        };
        if let Some(joined) = &mut joined {
            joined.extend_from_slice(&data);
        } else if let Some(head) = first.take() {
            let mut buffer = bytes::BytesMut::with_capacity(
                expected.min(PREALLOCATED_MAX).max(head.len() + data.len()),
            );
            buffer.extend_from_slice(&head);
            buffer.extend_from_slice(&data);
            joined = Some(buffer);
        } else {
            first = Some(data);
        }
    }
    Ok(joined.map_or_else(|| first.unwrap_or_default(), bytes::BytesMut::freeze))
}

/// A body of buffers sent one after another without joining them, with its exact length known
/// up front (so it goes out with a `Content-Length`, not chunked): the server's binary infer
/// answers, and the client's requests (a binary infer's small JSON header, then each tensor's
/// bytes where they already are).
#[derive(Clone, Debug)]
pub struct Chunks {
    chunks: VecDeque<Bytes>,
    remaining: u64,
}

impl Chunks {
    /// How many bytes are left to send.
    pub fn len(&self) -> u64 {
        self.remaining
    }

    /// Whether nothing is left to send.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }

    /// The buffers left to send, in order (none of them empty).
    pub fn buffers(&self) -> impl ExactSizeIterator<Item = &Bytes> {
        self.chunks.iter()
    }

    /// The body made of `chunks`, in order.
    pub fn new(chunks: Vec<Bytes>) -> Self {
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Chunks {
            chunks: chunks.into_iter().filter(|c| !c.is_empty()).collect(),
            remaining,
        }
    }
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let next = self.chunks.pop_front();
        if let Some(chunk) = &next {
            self.remaining -= chunk.len() as u64;
        }
        Poll::Ready(next.map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

impl From<Bytes> for Chunks {
    fn from(bytes: Bytes) -> Self {
        Chunks::new(vec![bytes])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    use http::HeaderMap;
    use http_body::Frame;

    /// A body of these frames, in order.
    struct Frames(std::collections::VecDeque<Frame<Bytes>>);

    impl http_body::Body for Frames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            std::task::Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn frames(frames: Vec<Frame<Bytes>>) -> Frames {
        Frames(frames.into())
    }

    #[tokio::test]
    async fn a_body_of_one_frame_is_that_frame_not_a_copy() {
        let only = Bytes::from(vec![7u8; 1000]);
        let body = frames(vec![Frame::data(only.clone())]);
        let read = gather(body, 1000).await.unwrap();
        assert_eq!(read, only);
        assert_eq!(read.as_ptr(), only.as_ptr());
    }

    #[tokio::test]
    async fn frames_are_joined_in_order_and_trailers_left_out() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "1".parse().unwrap());
        let body = frames(vec![
            Frame::data(Bytes::from_static(b"ab")),
            Frame::data(Bytes::from_static(b"")),
            Frame::data(Bytes::from_static(b"cde")),
            Frame::data(Bytes::from_static(b"f")),
            Frame::trailers(trailers),
        ]);
        // Whatever length was declared: too small, or none.
        assert_eq!(&gather(body, 2).await.unwrap()[..], b"abcdef");
        let empty = frames(vec![]);
        assert!(gather(empty, 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn chunks_go_out_in_order_with_their_exact_length_and_no_empty_frames() {
        let body = Chunks::new(vec![
            Bytes::from_static(b"{\"inputs\":[]}"),
            Bytes::new(),
            Bytes::from_static(&[1, 2, 3, 4]),
        ]);
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(17));
        let mut body = body;
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(frames.len(), 2, "the empty buffer sends no frame");
        assert_eq!(&frames[1][..], &[1, 2, 3, 4]);
        assert!(http_body::Body::is_end_stream(&body));
        let one = Chunks::from(Bytes::from_static(b"abc"));
        assert_eq!(http_body::Body::size_hint(&one).exact(), Some(3));
    }
}

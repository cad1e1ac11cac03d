//! Reading an HTTP body into one buffer as its frames arrive: the client reads answers this
//! way, and the server (`wasmrpc-host`) call bodies.

use bytes::Bytes;
use http_body_util::BodyExt;

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
}

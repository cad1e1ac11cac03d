//! `ModelInfer` framed by the server itself rather than by tonic, so that a large tensor costs
//! no more copies than over HTTP: the request is decoded straight from the bytes the gate read
//! (its raw tensors stay slices of them, where tonic would first copy the message into a buffer
//! of its own), and the answer goes out as a small head followed by the outputs' own buffers
//! (where tonic would copy every output into one encoded message). Only the framing differs: the
//! call is [`super::inference::infer`], as for tonic, which still serves every other method and
//! any `ModelInfer` request that is compressed.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use bytes::{BufMut as _, Bytes, BytesMut};
use prost::Message as _;
use wasmrpc_proto::Code;
use wasmrpc_proto::grpc as pb;

use super::gate::Gated;
use super::{inference, status};
use crate::api::AppState;
use crate::api::error::ApiError;

/// The protobuf tag of `ModelInferResponse.raw_output_contents` (field 6, length-delimited).
const RAW_OUTPUT_TAG: u8 = 6 << 3 | 2;

/// The one message of a request body the gate read, when this module can take it: uncompressed
/// (no `grpc-encoding` but `identity`), and exactly one whole frame. `None` leaves the request
/// to tonic, which answers anything else (and its errors) as usual.
pub fn one_message(headers: &HeaderMap, body: &Bytes) -> Option<Bytes> {
    let encoding = headers.get("grpc-encoding");
    if encoding.is_some_and(|e| e.as_bytes() != b"identity") {
        return None;
    }
    let (&[flag, a, b, c, d], message) = body.split_first_chunk::<5>()?;
    let length = u32::from_be_bytes([a, b, c, d]) as usize;
    (flag == 0 && message.len() == length).then(|| body.slice(5..))
}

/// Answer a `ModelInfer` request whose message is `message`.
pub async fn serve(state: &AppState, gated: &Gated, message: Bytes) -> Response {
    let request = match pb::ModelInferRequest::decode(message) {
        Ok(request) => request,
        Err(e) => {
            return status::response(ApiError::new(
                Code::InvalidArgument,
                format!("the ModelInfer request is not a valid protobuf message: {e}"),
            ));
        }
    };
    match inference::infer(state, gated, request).await {
        Ok(response) => match framed(response) {
            Ok(response) => response,
            Err(e) => status::response(e),
        },
        Err(e) => status::response(e),
    }
}

/// A successful answer: the message in one gRPC frame, the outputs' bytes not copied, then the
/// `grpc-status: 0` trailer.
fn framed(mut response: pb::ModelInferResponse) -> Result<Response, ApiError> {
    let raw = std::mem::take(&mut response.raw_output_contents);
    let head_length = response.encoded_len();
    let fields: Vec<(Vec<u8>, Bytes)> = raw
        .into_iter()
        .map(|bytes| {
            let mut prefix = Vec::with_capacity(11);
            prefix.push(RAW_OUTPUT_TAG);
            prost::encoding::encode_varint(bytes.len() as u64, &mut prefix);
            (prefix, bytes)
        })
        .collect();
    let length = fields
        .iter()
        .fold(head_length as u64, |sum, (prefix, bytes)| {
            sum + prefix.len() as u64 + bytes.len() as u64
        });
    let length = u32::try_from(length).map_err(|_| {
        ApiError::new(
            Code::ResourceExhausted,
            format!(
                "the answer is {length} bytes, over the 4 GiB a gRPC message can carry: ask for \
                 fewer outputs, or call over HTTP"
            ),
        )
    })?;
    let mut head = BytesMut::with_capacity(5 + head_length);
    head.put_u8(0);
    head.put_u32(length);
    // Into a buffer of the exact length: encoding cannot run out of room.
    response
        .encode(&mut head)
        .map_err(|e| ApiError::internal(format!("encoding a ModelInfer answer: {e}")))?;
    let mut chunks = VecDeque::with_capacity(1 + 2 * fields.len());
    chunks.push_back(head.freeze());
    for (prefix, bytes) in fields {
        chunks.push_back(Bytes::from(prefix));
        if !bytes.is_empty() {
            chunks.push_back(bytes);
        }
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let mut answer = Response::new(Body::new(Framed {
        chunks,
        trailers: Some(trailers),
    }));
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    Ok(answer)
}

/// A gRPC answer's body: its buffers as they are, then its trailers.
struct Framed {
    chunks: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for Framed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.chunks.pop_front() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
        }
        Poll::Ready(
            this.trailers
                .take()
                .map(|t| Ok(http_body::Frame::trailers(t))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    #[test]
    fn only_one_whole_uncompressed_frame_is_taken() {
        let none = HeaderMap::new();
        let frame = Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1]);
        assert_eq!(one_message(&none, &frame).unwrap(), &[8, 1][..]);
        // Compressed, by flag or by header; short; two frames.
        assert!(one_message(&none, &Bytes::from_static(&[1, 0, 0, 0, 2, 8, 1])).is_none());
        let mut gzip = HeaderMap::new();
        gzip.insert("grpc-encoding", HeaderValue::from_static("gzip"));
        assert!(one_message(&gzip, &frame).is_none());
        assert!(one_message(&none, &Bytes::from_static(&[0, 0, 0, 0, 3, 8, 1])).is_none());
        assert!(one_message(&none, &Bytes::from_static(&[0, 0, 0])).is_none());
        let two = Bytes::from_static(&[0, 0, 0, 0, 1, 8, 0, 0, 0, 0, 1, 8]);
        assert!(one_message(&none, &two).is_none());
    }

    #[tokio::test]
    async fn an_answer_framed_by_hand_decodes_as_the_message_it_stands_for() {
        let response = pb::ModelInferResponse {
            model_name: "add".into(),
            model_version: "1".into(),
            id: "7".into(),
            outputs: vec![Default::default(), Default::default()],
            raw_output_contents: vec![Bytes::from(vec![7u8; 300]), Bytes::new()],
            ..Default::default()
        };
        let answer = framed(response.clone()).unwrap();
        let collected = answer.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        assert_eq!(trailers["grpc-status"], "0");
        let bytes = collected.to_bytes();
        let length = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!((bytes[0], length), (0, bytes.len() - 5));
        let decoded = pb::ModelInferResponse::decode(bytes.slice(5..)).unwrap();
        assert_eq!(decoded, response);
    }
}

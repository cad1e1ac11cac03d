//! `ModelInfer` framed by the client itself rather than by tonic, so that a large tensor costs no
//! more copies over gRPC than over HTTP binary v2 (docs/benchmarks.md, issue 34, row G2).
//!
//! tonic's prost codec encodes a request into one buffer, a copy of every tensor; here the
//! message's small fields are encoded with prost and each large `raw_input_contents` entry goes
//! out as its own buffer after its tag and length, as the server frames its answers
//! (`host/src/grpc/frames.rs`). The request also declares its `content-length`, so the server
//! reads the body into one buffer made at the start rather than one grown as the frames arrive.
//!
//! The answer is read as the HTTP layers read theirs: its frames copied, as they arrive, into
//! one buffer the length the gRPC frame declares (or, when the message came in one DATA frame,
//! that frame itself), then decoded by prost with its raw tensors left as slices of that buffer.

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt as _;
use prost::Message as _;

use super::{ModelInferRequest, ModelInferResponse};
use crate::connection::Received;

/// The protobuf tag of `ModelInferRequest.raw_input_contents` (field 7, length-delimited).
const RAW_INPUT_TAG: u8 = 7 << 3 | 2;

/// The gRPC frame's prefix: a compression flag and the message's length.
const PREFIX: usize = 5;

/// Tensors up to this size are copied in with the message's other fields: a buffer (and an HTTP/2
/// DATA frame) of their own would cost more than copying them.
const INLINE_MAX: usize = 16 << 10;

/// A request's gRPC frame as buffers to send one after another, and their total length.
pub struct Framed {
    pub buffers: Vec<Bytes>,
    pub length: u64,
}

/// `message` as one uncompressed gRPC frame: the prefix and the small fields in one buffer, each
/// large tensor's bytes as they are (not copied).
///
/// # Errors
/// RESOURCE_EXHAUSTED when the message is over the 4 GiB a gRPC frame can declare.
pub fn request(mut message: ModelInferRequest) -> Result<Framed, tonic::Status> {
    let raw = std::mem::take(&mut message.raw_input_contents);
    let head = message.encoded_len();
    let prefix_of = |bytes: &Bytes| 1 + prost::encoding::encoded_len_varint(bytes.len() as u64);
    let length = raw.iter().fold(head as u64, |sum, bytes| {
        sum + prefix_of(bytes) as u64 + bytes.len() as u64
    });
    let Ok(declared) = u32::try_from(length) else {
        return Err(tonic::Status::resource_exhausted(format!(
            "the request is {length} bytes, over the 4 GiB a gRPC message can carry: send \
             smaller tensors, or call over HTTP"
        )));
    };
    // Room for everything that is copied, so the buffer is never grown.
    let inline = |bytes: &Bytes| {
        if bytes.len() <= INLINE_MAX {
            bytes.len()
        } else {
            0
        }
    };
    let copied = raw.iter().fold(PREFIX + head, |sum, bytes| {
        sum + prefix_of(bytes) + inline(bytes)
    });
    let mut small = BytesMut::with_capacity(copied);
    small.put_u8(0);
    small.put_u32(declared);
    message
        .encode(&mut small)
        .map_err(|e| tonic::Status::internal(format!("encoding the request: {e}")))?;
    let mut buffers = Vec::with_capacity(1 + 2 * raw.len());
    for bytes in raw {
        small.put_u8(RAW_INPUT_TAG);
        prost::encoding::encode_varint(bytes.len() as u64, &mut small);
        if bytes.len() <= INLINE_MAX {
            small.put_slice(&bytes);
        } else {
            // What is written so far goes first; the rest of the room stays for what follows.
            buffers.push(small.split().freeze());
            buffers.push(bytes);
        }
    }
    if !small.is_empty() {
        buffers.push(small.freeze());
    }
    Ok(Framed {
        buffers,
        length: PREFIX as u64 + length,
    })
}

/// The message of a unary `ModelInfer` answer, or its error status.
///
/// # Errors
/// The answer's gRPC status when it is not OK (in its trailers, or in its headers for an answer
/// of trailers only); UNKNOWN, or a code from the HTTP status, when it carries none, as tonic
/// gives; INTERNAL for an answer that is not one whole uncompressed message of its kind.
pub async fn answer(
    response: http::Response<Received>,
) -> Result<ModelInferResponse, tonic::Status> {
    let (parts, mut body) = response.into_parts();
    let mut message = OneMessage::default();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| tonic::Status::from_error(Box::new(e)))?;
        match frame.into_data() {
            Ok(data) => message.push(data)?,
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    check_status(parts.status, &parts.headers, trailers.as_ref())?;
    let Some(message) = message.finish()? else {
        return Err(tonic::Status::internal("the answer carries no message"));
    };
    ModelInferResponse::decode(message).map_err(|e| {
        tonic::Status::internal(format!("the answer is not a ModelInferResponse: {e}"))
    })
}

/// The answer's gRPC status, from its trailers or, for an answer of trailers only, its headers;
/// without one, a code from the HTTP status (the mapping tonic and gRPC's own clients use).
fn check_status(
    http_status: StatusCode,
    headers: &HeaderMap,
    trailers: Option<&HeaderMap>,
) -> Result<(), tonic::Status> {
    let status = trailers
        .and_then(tonic::Status::from_header_map)
        .or_else(|| tonic::Status::from_header_map(headers));
    if let Some(status) = status {
        return if status.code() == tonic::Code::Ok {
            Ok(())
        } else {
            Err(status)
        };
    }
    let code = match http_status {
        StatusCode::OK => {
            return Err(tonic::Status::unknown(
                "protocol error: the answer ended without a grpc-status",
            ));
        }
        StatusCode::BAD_REQUEST => tonic::Code::Internal,
        StatusCode::UNAUTHORIZED => tonic::Code::Unauthenticated,
        StatusCode::FORBIDDEN => tonic::Code::PermissionDenied,
        StatusCode::NOT_FOUND => tonic::Code::Unimplemented,
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => tonic::Code::Unavailable,
        _ => tonic::Code::Unknown,
    };
    Err(tonic::Status::new(
        code,
        format!(
            "grpc-status header missing, mapped from HTTP status code {}",
            http_status.as_u16()
        ),
    ))
}

/// The one message of a unary answer, read from its DATA frames as they arrive.
#[derive(Default)]
struct OneMessage {
    /// The frame's prefix, until all of it has arrived.
    prefix: Vec<u8>,
    /// The message's length, once the prefix has arrived.
    length: Option<usize>,
    /// The message, when it came whole in the frame that ended the prefix: not copied.
    whole: Option<Bytes>,
    /// Otherwise the message so far, in a buffer of its whole length.
    joined: BytesMut,
}

impl OneMessage {
    fn push(&mut self, mut data: Bytes) -> Result<(), tonic::Status> {
        let Some(length) = self.length else {
            let take = (PREFIX - self.prefix.len()).min(data.len());
            self.prefix.extend_from_slice(&data[..take]);
            data.advance(take);
            let [flag, a, b, c, d] = self.prefix[..] else {
                return Ok(());
            };
            if flag != 0 {
                return Err(tonic::Status::internal(
                    "the answer is compressed, though the client accepts no compression",
                ));
            }
            let length = u32::from_be_bytes([a, b, c, d]) as usize;
            self.length = Some(length);
            if data.len() >= length {
                self.whole = Some(data);
                return self.check_one();
            }
            // The length is the server's word: room for at most as much as an HTTP answer
            // gets before its data arrives, the buffer grows past it if it must.
            self.joined = BytesMut::with_capacity(length.min(crate::body::PREALLOCATED_MAX));
            self.joined.extend_from_slice(&data);
            return Ok(());
        };
        if self.whole.is_some() || self.joined.len() + data.len() > length {
            return Err(more_than_one());
        }
        self.joined.extend_from_slice(&data);
        Ok(())
    }

    /// A message whose bytes came in the frame that ended the prefix must be all that frame
    /// held.
    fn check_one(&self) -> Result<(), tonic::Status> {
        match (&self.whole, self.length) {
            (Some(whole), Some(length)) if whole.len() > length => Err(more_than_one()),
            _ => Ok(()),
        }
    }

    /// The message; `None` for an answer with no data at all.
    fn finish(self) -> Result<Option<Bytes>, tonic::Status> {
        match (self.length, self.whole) {
            (None, _) if self.prefix.is_empty() => Ok(None),
            (Some(_), Some(whole)) => Ok(Some(whole)),
            (Some(length), None) if self.joined.len() == length => Ok(Some(self.joined.freeze())),
            _ => Err(tonic::Status::internal(
                "the answer ended in the middle of its message",
            )),
        }
    }
}

fn more_than_one() -> tonic::Status {
    tonic::Status::internal("the answer carries more than one message, for a unary call")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(raw: Vec<Bytes>) -> ModelInferRequest {
        ModelInferRequest {
            model_name: "identity".into(),
            model_version: "2".into(),
            inputs: vec![Default::default(); raw.len()],
            raw_input_contents: raw,
            ..Default::default()
        }
    }

    #[test]
    fn a_request_framed_by_hand_decodes_as_the_message_it_stands_for() {
        let large = Bytes::from(vec![7u8; INLINE_MAX + 1]);
        let raw = vec![
            Bytes::from_static(b"abc"),
            large.clone(),
            Bytes::new(),
            Bytes::from(vec![1u8; 300]),
        ];
        let framed = request(message(raw.clone())).unwrap();
        assert_eq!(framed.buffers.len(), 3, "small, large, small");
        assert_eq!(framed.buffers[1].as_ptr(), large.as_ptr(), "not copied");
        let joined: Vec<u8> = framed.buffers.concat();
        assert_eq!(joined.len() as u64, framed.length);
        let declared = u32::from_be_bytes(joined[1..5].try_into().unwrap()) as usize;
        assert_eq!((joined[0], declared), (0, joined.len() - PREFIX));
        let decoded = ModelInferRequest::decode(&joined[PREFIX..]).unwrap();
        assert_eq!(decoded, message(raw));
    }

    #[test]
    fn an_answer_is_read_across_frames_or_taken_whole_from_one() {
        let response = ModelInferResponse {
            model_name: "identity".into(),
            raw_output_contents: vec![Bytes::from(vec![9u8; 1000])],
            ..Default::default()
        };
        let mut frame = vec![0u8];
        frame.extend_from_slice(&(response.encoded_len() as u32).to_be_bytes());
        response.encode(&mut frame).unwrap();
        let frame = Bytes::from(frame);
        // One DATA frame: the message is a slice of it.
        let mut one = OneMessage::default();
        one.push(frame.clone()).unwrap();
        let got = one.finish().unwrap().unwrap();
        assert_eq!(got.as_ptr(), frame[PREFIX..].as_ptr(), "not copied");
        // Split inside the prefix and inside the message.
        for cuts in [[2, 3], [5, 400], [1, 999]] {
            let mut split = OneMessage::default();
            split.push(frame.slice(..cuts[0])).unwrap();
            split.push(frame.slice(cuts[0]..cuts[1])).unwrap();
            split.push(frame.slice(cuts[1]..)).unwrap();
            let got = split.finish().unwrap().unwrap();
            assert_eq!(
                ModelInferResponse::decode(got).unwrap(),
                response,
                "{cuts:?}"
            );
        }
        // Cut short; two messages; compressed; none at all.
        let mut short = OneMessage::default();
        short.push(frame.slice(..frame.len() - 1)).unwrap();
        assert!(short.finish().is_err());
        let mut two = OneMessage::default();
        two.push(frame.slice(..10)).unwrap();
        two.push(frame.slice(10..)).unwrap();
        assert!(two.push(frame.clone()).is_err());
        let mut doubled = OneMessage::default();
        assert!(
            doubled
                .push(Bytes::from([&frame[..], &frame[..]].concat()))
                .is_err()
        );
        let mut compressed = OneMessage::default();
        assert!(
            compressed
                .push(Bytes::from_static(&[1, 0, 0, 0, 0]))
                .is_err()
        );
        assert_eq!(OneMessage::default().finish().unwrap(), None);
    }

    #[test]
    fn the_status_comes_from_trailers_headers_or_the_http_status() {
        let mut not_found = HeaderMap::new();
        not_found.insert("grpc-status", "5".parse().unwrap());
        not_found.insert("grpc-message", "no%20model".parse().unwrap());
        let mut ok = HeaderMap::new();
        ok.insert("grpc-status", "0".parse().unwrap());
        let none = HeaderMap::new();
        assert!(check_status(StatusCode::OK, &none, Some(&ok)).is_ok());
        let e = check_status(StatusCode::OK, &none, Some(&not_found)).unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::NotFound, "no model"));
        let e = check_status(StatusCode::OK, &not_found, None).unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "trailers only");
        let e = check_status(StatusCode::OK, &none, None).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unknown);
        let e = check_status(StatusCode::SERVICE_UNAVAILABLE, &none, None).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable);
    }
}

//! Any bytes as a KServe v2 infer body (`POST /v2/models/{name}/infer`), JSON or binary: the
//! first two bytes choose the `Inference-Header-Content-Length` (none, or a length that may lie
//! anywhere, past the body included), the rest is the body. Decoded without a panic, and every
//! input of an accepted request is a valid tensor; the same bytes read as an infer response too.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use wasmrpc_proto::kserve::{InferRequestError, decode_infer_request, decode_infer_response};

fuzz_target!(|data: &[u8]| {
    let Some((choice, body)) = data.split_first_chunk::<2>() else {
        return;
    };
    let choice = u16::from_le_bytes(*choice);
    // 0: no header; otherwise a length, sometimes past the body.
    let header_length = (choice != 0).then(|| u64::from(choice - 1));
    let body = Bytes::copy_from_slice(body);
    match decode_infer_request(&body, header_length) {
        Ok(request) => request.inputs.iter().for_each(|i| assert_valid(&i.tensor)),
        Err(InferRequestError::Input { error, .. }) => assert!(!error.to_string().is_empty()),
        Err(InferRequestError::Body(message)) => assert!(!message.is_empty()),
    }
    if let Ok(outputs) = decode_infer_response(&body, header_length) {
        outputs.iter().for_each(|o| assert_valid(&o.tensor));
    }
});

/// A valid tensor: its bytes match its dtype and shape when built again from them.
fn assert_valid(t: &wasmrpc_proto::Tensor) {
    let rebuilt =
        wasmrpc_proto::Tensor::from_raw(t.dtype(), t.shape().to_vec(), t.raw_data().to_vec());
    assert!(rebuilt.is_ok(), "{rebuilt:?}");
}

//! Any bytes as a call request body (`POST /v1/methods/{name}/call`): decoded in one pass without
//! a panic, every argument of an accepted request is a valid tensor, and the one-pass reader
//! never answers differently from the serde path.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmrpc_proto::json::{CallRequestError, decode_call_request};

fuzz_target!(|data: &[u8]| {
    assert!(
        wasmrpc_proto::json::one_pass_agrees_with_serde(data),
        "the one-pass reader and serde disagree"
    );
    match decode_call_request(data) {
        Ok(request) => {
            for t in &request.args {
                // A valid tensor: its bytes match its dtype and shape.
                let rebuilt = wasmrpc_proto::Tensor::from_raw(
                    t.dtype(),
                    t.shape().to_vec(),
                    t.raw_data().to_vec(),
                );
                assert!(rebuilt.is_ok(), "{rebuilt:?}");
            }
        }
        Err(CallRequestError::Argument { error, .. }) => {
            assert!(!error.to_string().is_empty());
        }
        Err(CallRequestError::Body(message)) => assert!(!message.is_empty()),
    }
});

//! Any text as a JSON tensor: never a panic, never an allocation beyond what the text bounds, and
//! whatever is accepted writes back to JSON that reads as the same tensor.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmrpc_proto::Tensor;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(tensor) = Tensor::from_json(text) {
        // The text bounds the tensor: at most 8 bytes of data per 2 characters (`1,` as a float64
        // or int64), so a shape can never make the decoder allocate more than that.
        assert!(tensor.raw_data().len() <= 4 * text.len() + 8);
        let written = serde_json::to_string(&tensor).expect("an accepted tensor serialises");
        let again = Tensor::from_json(&written).expect("what is written reads back");
        assert_eq!(again.dtype(), tensor.dtype());
        assert_eq!(again.shape(), tensor.shape());
        // Floats: NaN payloads may differ, so compare the JSON forms.
        assert_eq!(serde_json::to_string(&again).unwrap(), written);
    }
});

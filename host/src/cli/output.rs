//! Printing signatures and tensors for people.

use serde_json::Value;
use wasmrpc_client::{MethodSignature, Tensor, TensorSpec};

fn spec_text(s: &TensorSpec) -> String {
    match s.shape {
        None => format!("{}: {}", s.name, s.dtype),
        Some(_) => format!("{}: {}{}", s.name, s.dtype, s.shape_text()),
    }
}

/// `add(a: int32any, b: …) -> (output: …)` on one line.
pub fn signature_line(name: &str, sig: &MethodSignature) -> String {
    let inputs: Vec<String> = sig.inputs.iter().map(spec_text).collect();
    let outputs: Vec<String> = sig.outputs.iter().map(spec_text).collect();
    format!("{name}({}) -> ({})", inputs.join(", "), outputs.join(", "))
}

/// `int32[2, 2] [[1, 2], [3, 4]]`: dtype, shape, and the values nested by the shape.
pub fn tensor_text(t: &Tensor) -> String {
    let json = serde_json::to_value(t).unwrap_or(Value::Null);
    let shape: Vec<String> = t.shape().iter().map(u64::to_string).collect();
    let head = format!("{}[{}]", t.dtype(), shape.join(", "));
    match json.get("data").and_then(Value::as_array) {
        Some(flat) => {
            let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            let nested = nest(flat, &dims);
            let text = if dims.is_empty() {
                flat.first().map(Value::to_string).unwrap_or_default()
            } else {
                nested.to_string()
            };
            format!("{head} {text}")
        }
        None => format!("{head} (binary data, {} bytes)", t.raw_data().len()),
    }
}

fn nest(flat: &[Value], dims: &[usize]) -> Value {
    match dims {
        [] | [_] => Value::Array(flat.to_vec()),
        [_, rest @ ..] => {
            let stride: usize = rest.iter().product::<usize>().max(1);
            Value::Array(flat.chunks(stride).map(|c| nest(c, rest)).collect())
        }
    }
}

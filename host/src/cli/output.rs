//! Printing signatures and tensors for people.

use std::io::Write as _;

use wasmrpc_proto::{DType, MethodSignature, Tensor, TensorSpec};

/// `println!` for the client commands, which are filters: when stdout is a closed pipe
/// (`wasmrpc list | head`) the command ends quietly, as `ls` does, instead of panicking.
#[macro_export]
#[doc(hidden)]
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::output::print_line(format_args!($($arg)*)) };
}

/// Write one line to stdout; exit 0 on a closed pipe.
pub fn print_line(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        panic!("writing to stdout failed: {e}");
    }
}

fn spec_text(s: &TensorSpec) -> String {
    match s.shape {
        None => format!("{}: {}", s.name, s.dtype),
        Some(_) => format!("{}: {}{}", s.name, s.dtype, s.shape_text()),
    }
}

/// `add(a: int32, b: int32) -> (output: int32)` on one line.
pub fn signature_line(name: &str, sig: &MethodSignature) -> String {
    let inputs: Vec<String> = sig.inputs.iter().map(spec_text).collect();
    let outputs: Vec<String> = sig.outputs.iter().map(spec_text).collect();
    format!("{name}({}) -> ({})", inputs.join(", "), outputs.join(", "))
}

/// Each element as text, floats in their own precision (`0.1` for a float32, not
/// `0.10000000149011612`).
fn elements(t: &Tensor) -> Option<Vec<String>> {
    fn show<T: wasmrpc_proto::Element + ToString>(t: &Tensor) -> Option<Vec<String>> {
        t.to_vec::<T>()
            .ok()
            .map(|v| v.iter().map(T::to_string).collect())
    }
    match t.dtype() {
        DType::Bool => show::<bool>(t),
        DType::UInt8 => show::<u8>(t),
        DType::UInt16 => show::<u16>(t),
        DType::UInt32 => show::<u32>(t),
        DType::UInt64 => show::<u64>(t),
        DType::Int8 => show::<i8>(t),
        DType::Int16 => show::<i16>(t),
        DType::Int32 => show::<i32>(t),
        DType::Int64 => show::<i64>(t),
        DType::Float16 => show::<half::f16>(t),
        DType::BFloat16 => show::<half::bf16>(t),
        DType::Float32 => show::<f32>(t),
        DType::Float64 => show::<f64>(t),
        DType::String => t.to_strings().ok().map(|v| {
            v.iter()
                .map(|s| match std::str::from_utf8(s) {
                    Ok(text) => serde_json::to_string(text).unwrap_or_default(),
                    Err(_) => format!("<{} bytes>", s.len()),
                })
                .collect()
        }),
    }
}

/// `int32[2, 2] [[1, 2], [3, 4]]`: dtype, shape, and the values nested by the shape.
pub fn tensor_text(t: &Tensor) -> String {
    let shape: Vec<String> = t.shape().iter().map(u64::to_string).collect();
    let head = format!("{}[{}]", t.dtype(), shape.join(", "));
    let Some(items) = elements(t) else {
        return format!("{head} ({} bytes of data)", t.raw_data().len());
    };
    let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
    if dims.is_empty() {
        return format!("{head} {}", items.first().cloned().unwrap_or_default());
    }
    format!("{head} {}", nest(&items, &dims))
}

fn nest(items: &[String], dims: &[usize]) -> String {
    match dims {
        [] | [_] => format!("[{}]", items.join(", ")),
        [_, rest @ ..] => {
            let stride = rest.iter().product::<usize>().max(1);
            let rows: Vec<String> = items.chunks(stride).map(|c| nest(c, rest)).collect();
            format!("[{}]", rows.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_print_nested_in_their_own_precision() {
        let m = Tensor::from_vec([2, 2], vec![0.1f32, 2.0, 3.5, -4.0]).unwrap();
        assert_eq!(tensor_text(&m), "float32[2, 2] [[0.1, 2], [3.5, -4]]");
        assert_eq!(tensor_text(&Tensor::scalar(7i64)), "int64[] 7");
        let s = Tensor::from_strings([2], ["a,b", "c"]).unwrap();
        assert_eq!(tensor_text(&s), r#"string[2] ["a,b", "c"]"#);
    }
}

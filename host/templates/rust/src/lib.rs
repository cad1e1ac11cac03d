//! {{name}}: a wasmrpc function, compiled to a WebAssembly component.
//!
//! Each `#[wasmrpc_guest::method]` function becomes a method; `export!` lists them. Tensors come
//! in and go out as `Tensor<T>` (`f32`, `i32`, `String`, `bool`…); the signature, names and the
//! doc comment are what the server shows. Guide: docs/writing-functions.md in the wasmrpc
//! repository.

use wasmrpc_guest::{Error, Tensor};

/// Multiplies every element of a float32 tensor by a scalar factor.
#[wasmrpc_guest::method(factor = [])]
pub fn scale(x: Tensor<f32>, factor: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let factor = *factor.item().ok_or_else(|| Error::invalid_argument("factor is a scalar"))?;
    Ok(x.map(|v| v * factor))
}

wasmrpc_guest::export!(scale);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_every_element() {
        let x = Tensor::new([2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let scaled = scale(x, Tensor::scalar(2.5)).unwrap();
        assert_eq!(scaled.shape(), &[2, 2]);
        assert_eq!(scaled.as_slice(), &[2.5, 5.0, 7.5, 10.0]);
    }
}

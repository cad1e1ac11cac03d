//! Element-wise addition, one method per numeric dtype.
//!
//! A WIT tensor spec has one dtype, so the component exports `add` (int32, the dtype of
//! TensorFlow's RPC example) and `add_<dtype>` for every numeric dtype: `add_int8` … `add_uint64`,
//! `add_float16`, `add_bfloat16`, `add_float32`, `add_float64`, and `add_bool`, which is logical
//! OR (Boolean addition, as NumPy's `np.add` on bools). Both arguments must have the same
//! shape (no broadcasting), otherwise the call fails with `invalid-argument`. Integer addition
//! wraps around on overflow (two's complement, as TensorFlow's does); float addition is IEEE 754.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p example-add`.

use wasmrpc_guest::half::{bf16, f16};
use wasmrpc_guest::{Error, Tensor};

/// Element-wise sum of two int32 tensors of the same shape; overflow wraps around.
#[wasmrpc_guest::method]
pub fn add(a: Tensor<i32>, b: Tensor<i32>) -> Result<Tensor<i32>, Error> {
    a.zip_with(&b, i32::wrapping_add)
}

/// Defines `add_<dtype>` for integer types: wrapping addition.
macro_rules! wrapping_add {
    ($($name:ident: $t:ty, $dtype:literal;)*) => {$(
        #[doc = concat!(
            "Element-wise sum of two ", $dtype, " tensors of the same shape; overflow wraps around."
        )]
        #[wasmrpc_guest::method]
        pub fn $name(a: Tensor<$t>, b: Tensor<$t>) -> Result<Tensor<$t>, Error> {
            a.zip_with(&b, <$t>::wrapping_add)
        }
    )*};
}

/// Defines `add_<dtype>` for float types: IEEE 754 addition.
macro_rules! float_add {
    ($($name:ident: $t:ty, $dtype:literal;)*) => {$(
        #[doc = concat!("Element-wise sum of two ", $dtype, " tensors of the same shape (IEEE 754).")]
        #[wasmrpc_guest::method]
        pub fn $name(a: Tensor<$t>, b: Tensor<$t>) -> Result<Tensor<$t>, Error> {
            a.zip_with(&b, |x, y| x + y)
        }
    )*};
}

wrapping_add! {
    add_int8: i8, "int8";
    add_int16: i16, "int16";
    add_int32: i32, "int32";
    add_int64: i64, "int64";
    add_uint8: u8, "uint8";
    add_uint16: u16, "uint16";
    add_uint32: u32, "uint32";
    add_uint64: u64, "uint64";
}

float_add! {
    add_float16: f16, "float16";
    add_bfloat16: bf16, "bfloat16";
    add_float32: f32, "float32";
    add_float64: f64, "float64";
}

/// Element-wise logical OR of two bool tensors of the same shape: Boolean addition, as NumPy's
/// `np.add` does it on bools.
#[wasmrpc_guest::method]
pub fn add_bool(a: Tensor<bool>, b: Tensor<bool>) -> Result<Tensor<bool>, Error> {
    a.zip_with(&b, |x, y| x | y)
}

wasmrpc_guest::export!(
    add,
    add_bool,
    add_int8,
    add_int16,
    add_int32,
    add_int64,
    add_uint8,
    add_uint16,
    add_uint32,
    add_uint64,
    add_float16,
    add_bfloat16,
    add_float32,
    add_float64,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn t<T: wasmrpc_guest::Element>(shape: &[usize], data: Vec<T>) -> Tensor<T> {
        Tensor::new(shape, data).unwrap()
    }

    #[test]
    fn adds_int32_element_wise() {
        let sum = add(
            t(&[2, 2], vec![1, 2, 3, 4]),
            t(&[2, 2], vec![10, 20, 30, 40]),
        )
        .unwrap();
        assert_eq!(sum, t(&[2, 2], vec![11, 22, 33, 44]));
    }

    #[test]
    fn integer_overflow_wraps() {
        let sum = add_int8(Tensor::scalar(i8::MAX), Tensor::scalar(1)).unwrap();
        assert_eq!(sum, Tensor::scalar(i8::MIN));
        let sum = add_uint64(Tensor::from_vec(vec![u64::MAX]), Tensor::from_vec(vec![2])).unwrap();
        assert_eq!(sum.as_slice(), &[1]);
    }

    #[test]
    fn floats_add_per_ieee_754() {
        let sum = add_float32(
            Tensor::from_vec(vec![0.5, f32::INFINITY, 1.0]),
            Tensor::from_vec(vec![0.25, 1.0, f32::NAN]),
        )
        .unwrap();
        assert_eq!(&sum.as_slice()[..2], &[0.75, f32::INFINITY]);
        assert!(sum.as_slice()[2].is_nan());
        let half = add_float16(
            Tensor::scalar(f16::from_f32(1.5)),
            Tensor::scalar(f16::from_f32(2.0)),
        )
        .unwrap();
        assert_eq!(half.item(), Some(&f16::from_f32(3.5)));
        let brain = add_bfloat16(Tensor::scalar(bf16::ONE), Tensor::scalar(bf16::ONE)).unwrap();
        assert_eq!(brain.item(), Some(&bf16::from_f32(2.0)));
        let double = add_float64(Tensor::scalar(0.1), Tensor::scalar(0.2)).unwrap();
        assert_eq!(double.item(), Some(&(0.1 + 0.2)));
    }

    #[test]
    fn bools_add_as_logical_or() {
        let sum = add_bool(
            t(&[4], vec![true, false, true, false]),
            t(&[4], vec![true, true, false, false]),
        )
        .unwrap();
        assert_eq!(sum.as_slice(), &[true, true, true, false]);
    }

    #[test]
    fn scalars_and_empty_tensors_are_fine() {
        assert_eq!(
            add(Tensor::scalar(2), Tensor::scalar(3)).unwrap(),
            Tensor::scalar(5)
        );
        let empty = add_uint16(t(&[0, 3], vec![]), t(&[0, 3], vec![])).unwrap();
        assert_eq!(empty.shape(), &[0, 3]);
    }

    #[test]
    fn different_shapes_are_invalid_argument() {
        let err = add(t(&[2, 2], vec![1, 2, 3, 4]), t(&[4], vec![1, 2, 3, 4])).unwrap_err();
        assert_eq!(err, Error::invalid_argument("shapes [2, 2] and [4] differ"));
        assert!(add_float32(Tensor::scalar(1.0), Tensor::from_vec(vec![1.0])).is_err());
    }
}

//! Softmax of a float32 tensor along its last axis.
//!
//! Exports `softmax(x: float32, any rank ≥ 1) -> output: float32` of the same shape. Each slice
//! along the last axis is mapped to `exp(x - max) / sum(exp(x - max))`: subtracting the slice's
//! maximum first keeps `exp` from overflowing, so large inputs give exact results instead of NaN. A
//! slice containing NaN or +∞, or made only of -∞, gives NaN, as TensorFlow does. A scalar has no
//! axis to normalise over: `invalid-argument`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p example-softmax`.

use wasmrpc_guest::{Error, Tensor};

/// Softmax along the last axis of a float32 tensor of rank 1 or more, computed stably.
#[wasmrpc_guest::method]
pub fn softmax(x: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    if x.is_scalar() {
        return Err(Error::invalid_argument(
            "softmax needs a tensor of rank 1 or more, got a scalar",
        ));
    }
    let mut y = x;
    for row in y.rows_mut() {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for v in row.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        for v in row.iter_mut() {
            *v /= sum;
        }
    }
    Ok(y)
}

wasmrpc_guest::export!(softmax);

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: &[f32], want: &[f32]) -> bool {
        got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6)
    }

    #[test]
    fn each_row_sums_to_one() {
        let x = Tensor::new([2, 3], vec![1.0, 2.0, 3.0, 0.0, 0.0, 0.0]).unwrap();
        let y = softmax(x).unwrap();
        assert_eq!(y.shape(), &[2, 3]);
        assert!(close(
            y.as_slice(),
            &[
                0.090_030_57,
                0.244_728_48,
                0.665_240_94,
                1.0 / 3.0,
                1.0 / 3.0,
                1.0 / 3.0
            ]
        ));
    }

    #[test]
    fn large_inputs_do_not_overflow() {
        let y = softmax(Tensor::from_vec(vec![1000.0, 1000.0, -1000.0])).unwrap();
        assert!(close(y.as_slice(), &[0.5, 0.5, 0.0]), "{y:?}");
    }

    #[test]
    fn works_on_any_rank_and_empty_rows() {
        let y = softmax(Tensor::new([2, 1, 2], vec![0.0, 0.0, 5.0, 5.0]).unwrap()).unwrap();
        assert!(close(y.as_slice(), &[0.5; 4]));
        let empty = softmax(Tensor::new([3, 0], vec![]).unwrap()).unwrap();
        assert_eq!(empty.shape(), &[3, 0]);
    }

    #[test]
    fn a_scalar_is_invalid_argument() {
        let err = softmax(Tensor::scalar(1.0)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
}

//! Matrix product of two 2-D float32 tensors.
//!
//! Exports `matmul(a: float32 [_, _], b: float32 [_, _]) -> output: float32 [_, _]`. The inner
//! dimensions must agree (`[m, k] × [k, n] → [m, n]`), otherwise the call fails with
//! `invalid-argument` naming both shapes; the declared shapes make the SDK refuse any argument
//! that is not 2-D before the function runs.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p example-matmul`.

use wasmrpc_guest::{Error, Tensor};

/// Matrix product of two 2-D float32 tensors: `[m, k] × [k, n] → [m, n]`.
#[wasmrpc_guest::method(a = [_, _], b = [_, _], output = [_, _])]
pub fn matmul(a: Tensor<f32>, b: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let (&[m, k], &[k2, n]) = (a.shape(), b.shape()) else {
        return Err(Error::invalid_argument(format!(
            "matmul takes two 2-D tensors, got shapes {:?} and {:?}",
            a.shape(),
            b.shape()
        )));
    };
    if k != k2 {
        return Err(Error::invalid_argument(format!(
            "inner dimensions differ: a has shape [{m}, {k}], b has shape [{k2}, {n}]"
        )));
    }
    let mut out = Tensor::zeros([m, n])?;
    // i-k-j order: the inner loop runs along rows of `b` and `out`, which are contiguous.
    for (out_row, a_row) in out.rows_mut().zip(a.rows()) {
        for (&a_ik, b_row) in a_row.iter().zip(b.rows()) {
            for (o, &b_kj) in out_row.iter_mut().zip(b_row) {
                *o += a_ik * b_kj;
            }
        }
    }
    Ok(out)
}

wasmrpc_guest::export!(matmul);

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: [usize; 2], data: &[f32]) -> Tensor<f32> {
        Tensor::new(shape, data.to_vec()).unwrap()
    }

    #[test]
    fn multiplies_matrices() {
        let a = t([2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t([3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
        assert_eq!(
            matmul(a, b).unwrap(),
            t([2, 2], &[58.0, 64.0, 139.0, 154.0])
        );
    }

    #[test]
    fn identity_leaves_a_matrix_unchanged() {
        let a = t([2, 2], &[1.5, -2.0, 0.0, 4.0]);
        let id = t([2, 2], &[1.0, 0.0, 0.0, 1.0]);
        assert_eq!(matmul(a.clone(), id).unwrap(), a);
    }

    #[test]
    fn empty_dimensions_give_zeros_or_empty_results() {
        // k = 0: the sum over nothing is 0.
        assert_eq!(
            matmul(t([2, 0], &[]), t([0, 3], &[])).unwrap(),
            Tensor::zeros([2, 3]).unwrap()
        );
        assert_eq!(
            matmul(t([0, 2], &[]), t([2, 3], &[0.0; 6]))
                .unwrap()
                .shape(),
            &[0, 3]
        );
    }

    #[test]
    fn inner_dimension_mismatch_is_invalid_argument() {
        let err = matmul(t([2, 3], &[0.0; 6]), t([2, 3], &[0.0; 6])).unwrap_err();
        assert_eq!(
            err,
            Error::invalid_argument(
                "inner dimensions differ: a has shape [2, 3], b has shape [2, 3]"
            )
        );
    }

    #[test]
    fn non_matrices_are_invalid_argument() {
        assert!(matmul(Tensor::from_vec(vec![1.0]), t([1, 1], &[1.0])).is_err());
    }
}

//! A component with several methods over float32 tensors.
//!
//! | method | inputs | outputs |
//! |---|---|---|
//! | `transpose` | `x: [_, _]` | `output: [_, _]` |
//! | `sum` | `x`: any shape | `output: []` (scalar) |
//! | `scale` | `x`: any shape, `factor: []` | `output`: the shape of `x` |
//! | `max` | `x`: rank ≥ 1 | `values`, `indices` (int64): the shape of `x` without its last axis |
//! | `identity` | `x`: any shape | `output`: `x` unchanged (what a call costs beyond its work) |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p example-linalg`.

use wasmrpc_guest::{Error, Tensor};

/// Transpose of a 2-D float32 tensor: `[m, n] → [n, m]`.
#[wasmrpc_guest::method(x = [_, _], output = [_, _])]
pub fn transpose(x: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let &[m, n] = x.shape() else {
        return Err(Error::invalid_argument(format!(
            "transpose takes a 2-D tensor, got shape {:?}",
            x.shape()
        )));
    };
    let mut out = Tensor::zeros([n, m])?;
    for (i, row) in x.rows().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            out[[j, i]] = v;
        }
    }
    Ok(out)
}

/// Sum of all elements of a float32 tensor, as a scalar (0 for an empty tensor). Accumulates in
/// float64.
#[wasmrpc_guest::method(output = [])]
pub fn sum(x: Tensor<f32>) -> Tensor<f32> {
    let total: f64 = x.as_slice().iter().map(|&v| f64::from(v)).sum();
    Tensor::scalar(total as f32)
}

/// Multiplies every element of a float32 tensor by a float32 scalar `factor`.
#[wasmrpc_guest::method(factor = [])]
pub fn scale(x: Tensor<f32>, factor: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let &f = factor.item().ok_or_else(|| {
        Error::invalid_argument(format!(
            "factor must be a scalar, got shape {:?}",
            factor.shape()
        ))
    })?;
    Ok(x.map(|v| v * f))
}

/// The maximum along the last axis and its index (the first one on ties; NaN is never the
/// maximum unless a slice is all NaN).
#[wasmrpc_guest::method(outputs = ["values", "indices"])]
pub fn max(x: Tensor<f32>) -> Result<(Tensor<f32>, Tensor<i64>), Error> {
    let Some((&last, leading)) = x.shape().split_last() else {
        return Err(Error::invalid_argument(
            "max needs a tensor of rank 1 or more, got a scalar",
        ));
    };
    if last == 0 {
        return Err(Error::invalid_argument(format!(
            "max of an empty axis is undefined: shape {:?}",
            x.shape()
        )));
    }
    let (mut values, mut indices) = (Vec::new(), Vec::new());
    for row in x.rows() {
        let (mut best, mut at) = (row[0], 0);
        for (i, &v) in row.iter().enumerate().skip(1) {
            if v > best || (best.is_nan() && !v.is_nan()) {
                (best, at) = (v, i);
            }
        }
        values.push(best);
        indices.push(i64::try_from(at).unwrap_or(i64::MAX));
    }
    Ok((
        Tensor::new(leading, values)?,
        Tensor::new(leading, indices)?,
    ))
}

/// `x` unchanged: a call that does no work, so timing it measures the cost of moving a tensor
/// in and out of the sandbox (row P4 of docs/benchmarks.md).
#[wasmrpc_guest::method]
pub fn identity(x: Tensor<f32>) -> Tensor<f32> {
    x
}

wasmrpc_guest::export!(transpose, sum, scale, max, identity);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_returns_its_input() {
        let x = Tensor::new([2, 2], vec![1.0, f32::NAN, -0.0, 4.5]).unwrap();
        let y = identity(x.clone());
        assert_eq!(y.shape(), x.shape());
        let same_bits =
            |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same_bits(y.as_slice(), x.as_slice()));
    }

    #[test]
    fn transposes_a_matrix() {
        let x = Tensor::new([2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let y = transpose(x).unwrap();
        assert_eq!(
            y,
            Tensor::new([3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap()
        );
        assert_eq!(
            transpose(Tensor::new([0, 2], vec![]).unwrap())
                .unwrap()
                .shape(),
            &[2, 0]
        );
    }

    #[test]
    fn sums_any_shape_to_a_scalar() {
        assert_eq!(
            sum(Tensor::new([2, 2], vec![1.0, 2.0, 3.0, 4.5]).unwrap()),
            Tensor::scalar(10.5)
        );
        assert_eq!(sum(Tensor::new([0], vec![]).unwrap()), Tensor::scalar(0.0));
        assert_eq!(sum(Tensor::scalar(2.0)), Tensor::scalar(2.0));
    }

    #[test]
    fn scales_by_a_scalar() {
        let y = scale(Tensor::from_vec(vec![1.0, -2.0]), Tensor::scalar(3.0)).unwrap();
        assert_eq!(y.as_slice(), &[3.0, -6.0]);
    }

    #[test]
    fn scale_refuses_a_factor_with_several_elements() {
        let err = scale(Tensor::scalar(1.0), Tensor::from_vec(vec![1.0, 2.0])).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }

    #[test]
    fn max_returns_values_and_first_indices() {
        let x = Tensor::new([2, 3], vec![1.0, 5.0, 5.0, f32::NAN, -1.0, -3.0]).unwrap();
        let (values, indices) = max(x).unwrap();
        assert_eq!(values, Tensor::from_vec(vec![5.0, -1.0]));
        assert_eq!(indices, Tensor::from_vec(vec![1, 1]));
    }

    #[test]
    fn max_refuses_scalars_and_empty_axes() {
        assert!(max(Tensor::scalar(1.0)).is_err());
        assert!(max(Tensor::new([2, 0], vec![]).unwrap()).is_err());
    }
}

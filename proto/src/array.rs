//! Conversions between [`Tensor`] and [`ndarray`] arrays (cargo feature `ndarray`).
//!
//! Any numeric or bool tensor converts to an `ndarray::ArrayD<T>` of its element type and back,
//! in row-major order; string tensors do not convert.
//!
//! ```
//! use ndarray::{ArrayD, IxDyn, array};
//! use wasmrpc_proto::Tensor;
//!
//! let t = Tensor::from_ndarray(&array![[1i32, 2, 3], [4, 5, 6]]);
//! assert_eq!(t.shape(), &[2, 3]);
//! let back: ArrayD<i32> = t.to_ndarray().unwrap();
//! assert_eq!(back[IxDyn(&[1, 2])], 6);
//! ```

use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};

use crate::tensor::{Element, Tensor, TensorError};

impl Tensor {
    /// A tensor with the shape and elements of an ndarray array of any dimensionality and
    /// memory layout (read in logical, row-major order).
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// let a = ndarray::Array2::<f32>::zeros((2, 3)).reversed_axes(); // a 3x2 column-major view
    /// let t = Tensor::from_ndarray(&a);
    /// assert_eq!((t.dtype(), t.shape()), (DType::Float32, &[3u64, 2][..]));
    /// ```
    pub fn from_ndarray<T, S, D>(array: &ArrayBase<S, D>) -> Tensor
    where
        T: Element,
        S: Data<Elem = T>,
        D: Dimension,
    {
        let shape: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
        Tensor::from_elements(shape, array.iter().copied())
    }

    /// The tensor as an `ndarray::ArrayD<T>` (a scalar becomes a 0-dimensional array).
    ///
    /// # Errors
    /// [`TensorError::DType`] when `T` is not the tensor's dtype (a string tensor never
    /// converts); [`TensorError::ShapeOverflow`] for a shape this platform cannot address.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::from_vec([2, 2], vec![1.0f64, 2.0, 3.0, 4.0]).unwrap();
    /// let a = t.to_ndarray::<f64>().unwrap();
    /// assert_eq!(a.shape(), &[2, 2]);
    /// assert_eq!(a.sum(), 10.0);
    /// assert!(t.to_ndarray::<f32>().is_err());
    /// ```
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>, TensorError> {
        let values = self.to_vec::<T>()?;
        let overflow = || TensorError::ShapeOverflow {
            shape: self.shape().to_vec(),
        };
        let shape = self
            .shape()
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| overflow()))
            .collect::<Result<Vec<usize>, _>>()?;
        ArrayD::from_shape_vec(IxDyn(&shape), values).map_err(|_| overflow())
    }
}

/// [`Tensor::from_ndarray`], by value.
///
/// ```
/// use wasmrpc_proto::Tensor;
/// let t: Tensor = ndarray::arr1(&[true, false]).into_dyn().into();
/// assert_eq!(t.to_vec::<bool>().unwrap(), vec![true, false]);
/// ```
impl<T: Element> From<ArrayD<T>> for Tensor {
    fn from(array: ArrayD<T>) -> Tensor {
        Tensor::from_ndarray(&array)
    }
}

/// [`Tensor::to_ndarray`], as `TryFrom`.
///
/// ```
/// use ndarray::ArrayD;
/// use wasmrpc_proto::Tensor;
/// let a = ArrayD::<u8>::try_from(&Tensor::vector(vec![1u8, 2, 3])).unwrap();
/// assert_eq!(a.as_slice().unwrap(), &[1, 2, 3]);
/// ```
impl<T: Element> TryFrom<&Tensor> for ArrayD<T> {
    type Error = TensorError;

    fn try_from(tensor: &Tensor) -> Result<Self, TensorError> {
        tensor.to_ndarray()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;
    use ndarray::{Array, Array3, ArrayD, IxDyn, arr0};

    #[test]
    fn every_numeric_dtype_round_trips_through_ndarray() {
        fn round_trip<T: Element + PartialEq + std::fmt::Debug>(values: Vec<T>) {
            let n = values.len();
            let a = Array::from_shape_vec(IxDyn(&[1, n]), values).unwrap();
            let t = Tensor::from(a.clone());
            assert_eq!(t.dtype(), T::DTYPE);
            assert_eq!(t.shape(), &[1, n as u64]);
            assert_eq!(ArrayD::<T>::try_from(&t).unwrap(), a);
        }
        round_trip(vec![true, false]);
        round_trip(vec![0u8, 255]);
        round_trip(vec![1u16, u16::MAX]);
        round_trip(vec![1u32, u32::MAX]);
        round_trip(vec![1u64, u64::MAX]);
        round_trip(vec![-1i8, i8::MIN]);
        round_trip(vec![-1i16, i16::MIN]);
        round_trip(vec![-1i32, i32::MIN]);
        round_trip(vec![-1i64, i64::MIN]);
        round_trip(vec![half::f16::from_f32(1.5), half::f16::MAX]);
        round_trip(vec![half::bf16::from_f32(-2.0), half::bf16::MIN]);
        round_trip(vec![0.25f32, f32::MAX]);
        round_trip(vec![0.125f64, f64::MIN_POSITIVE]);
    }

    #[test]
    fn layout_is_row_major_whatever_the_array_layout() {
        let a = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
        let t = Tensor::from_ndarray(&a);
        assert_eq!(t.to_vec::<i32>().unwrap()[..5], [0, 1, 2, 3, 10]);
        // A transposed view is read logically, not in memory order.
        let transposed = Tensor::from_ndarray(&a.view().reversed_axes());
        assert_eq!(transposed.shape(), &[4, 3, 2]);
        assert_eq!(transposed.to_vec::<i32>().unwrap()[..3], [0, 100, 10]);
        assert_eq!(
            transposed.to_ndarray::<i32>().unwrap(),
            a.reversed_axes().into_dyn()
        );
    }

    #[test]
    fn scalars_and_empty_arrays_keep_their_shape() {
        let t = Tensor::from(arr0(7i64).into_dyn());
        assert_eq!(t, Tensor::scalar(7i64));
        assert_eq!(t.to_ndarray::<i64>().unwrap().ndim(), 0);
        let empty = Tensor::from_vec([0, 3], Vec::<f32>::new()).unwrap();
        assert_eq!(empty.to_ndarray::<f32>().unwrap().shape(), &[0, 3]);
    }

    #[test]
    fn the_wrong_element_type_and_strings_do_not_convert() {
        let t = Tensor::vector(vec![1i32, 2]);
        assert_eq!(
            t.to_ndarray::<i64>().unwrap_err(),
            TensorError::DType {
                expected: DType::Int64,
                actual: DType::Int32
            }
        );
        let s = Tensor::from_strings([1], ["a"]).unwrap();
        assert!(ArrayD::<u8>::try_from(&s).is_err());
    }
}

//! [`Tensor`]: a typed, owned, row-major tensor, and the iterators over its last axis.
//!
//! A tensor is a shape (`Vec<usize>`, outermost dimension first) and its elements in row-major order.
//! The shape `[]` is a scalar holding one element, as in TensorFlow. The element count is checked
//! whenever a tensor is built, so a `Tensor` always holds exactly as many elements as its shape says,
//! and every partial product of its dimensions fits in `usize`.

use std::fmt;
use std::ops::{Index, IndexMut};

use crate::__private::{Shape, WitTensor};
use crate::elements::Elements;
use crate::{DType, Element, Error};

/// A dense tensor of `T`s.
///
/// ```
/// use wasmrpc_guest::Tensor;
///
/// let t = Tensor::new([2, 3], vec![1, 2, 3, 4, 5, 6]).unwrap();
/// assert_eq!(t.shape(), &[2, 3]);
/// assert_eq!(t[[1, 0]], 4);
/// assert_eq!(t.get(&[0, 2]), Some(&3));
/// assert_eq!(t.get(&[2, 0]), None);
///
/// let doubled = t.map(|x| x * 2);
/// assert_eq!(doubled.as_slice(), &[2, 4, 6, 8, 10, 12]);
///
/// let rows: Vec<&[i32]> = t.rows().collect();
/// assert_eq!(rows, [&[1, 2, 3][..], &[4, 5, 6][..]]);
/// ```
#[derive(Clone, PartialEq)]
pub struct Tensor<T: Element> {
    shape: Vec<usize>,
    data: Elements<T>,
}

/// The number of elements of `shape`, or `None` if some partial product overflows `usize`.
fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// Formats a shape as `[2, 3]`.
pub(crate) struct ShapeDisplay<'a>(pub(crate) &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Formats a declared shape as `[_, 3]`.
pub(crate) struct SpecDisplay<'a>(pub(crate) &'a [Option<u64>]);

impl fmt::Display for SpecDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, dim) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match dim {
                Some(d) => write!(f, "{d}")?,
                None => f.write_str("_")?,
            }
        }
        f.write_str("]")
    }
}

impl<T: Element> Tensor<T> {
    /// A tensor of `shape` holding `data` in row-major order. Fails with `invalid-argument` when
    /// the element count is not the product of the dimensions.
    ///
    /// ```
    /// use wasmrpc_guest::Tensor;
    ///
    /// assert!(Tensor::new([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).is_ok());
    /// assert!(Tensor::new(vec![3], vec![1.0f32]).is_err());
    /// ```
    pub fn new(shape: impl Into<Vec<usize>>, data: Vec<T>) -> Result<Self, Error> {
        Self::with_elements(shape.into(), Elements::Owned(data))
    }

    /// A tensor of `shape` holding `data`, checking the element count as [`new`](Self::new) does.
    fn with_elements(shape: Vec<usize>, data: Elements<T>) -> Result<Self, Error> {
        match element_count(&shape) {
            Some(n) if n == data.len() => Ok(Tensor { shape, data }),
            Some(n) => Err(Error::invalid_argument(format!(
                "shape {} holds {n} elements, got {}",
                ShapeDisplay(&shape),
                data.len()
            ))),
            None => Err(Error::invalid_argument(format!(
                "shape {} has too many elements",
                ShapeDisplay(&shape)
            ))),
        }
    }

    /// A scalar: shape `[]`, one element.
    ///
    /// ```
    /// let s = wasmrpc_guest::Tensor::scalar(2.5f64);
    /// assert!(s.is_scalar());
    /// assert_eq!(s.item(), Some(&2.5));
    /// ```
    pub fn scalar(value: T) -> Self {
        Tensor {
            shape: Vec::new(),
            data: Elements::Owned(vec![value]),
        }
    }

    /// A 1-D tensor of `data`.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::from_vec(vec![1u8, 2, 3]);
    /// assert_eq!(t.shape(), &[3]);
    /// ```
    pub fn from_vec(data: Vec<T>) -> Self {
        Tensor {
            shape: vec![data.len()],
            data: Elements::Owned(data),
        }
    }

    /// A tensor of `shape` with every element `value`. Fails with `resource-exhausted` when the
    /// elements cannot be allocated, and `invalid-argument` when their count overflows `usize`.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::full([2, 2], true).unwrap();
    /// assert_eq!(t.as_slice(), &[true; 4]);
    /// ```
    pub fn full(shape: impl Into<Vec<usize>>, value: T) -> Result<Self, Error> {
        let shape = shape.into();
        let Some(n) = element_count(&shape) else {
            return Err(Error::invalid_argument(format!(
                "shape {} has too many elements",
                ShapeDisplay(&shape)
            )));
        };
        let mut data = Vec::new();
        data.try_reserve_exact(n).map_err(|_| {
            Error::resource_exhausted(format!(
                "cannot allocate {n} elements of {} for shape {}",
                T::DTYPE,
                ShapeDisplay(&shape)
            ))
        })?;
        data.resize(n, value);
        Ok(Tensor {
            shape,
            data: Elements::Owned(data),
        })
    }

    /// A tensor of `shape` filled with `T::default()` (zero, `false` or empty). Fails as
    /// [`full`](Self::full) does.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::<f32>::zeros([2, 3]).unwrap();
    /// assert_eq!(t.len(), 6);
    /// assert!(t.as_slice().iter().all(|&x| x == 0.0));
    /// ```
    pub fn zeros(shape: impl Into<Vec<usize>>) -> Result<Self, Error>
    where
        T: Default,
    {
        Self::full(shape, T::default())
    }

    /// The dimensions, outermost first; `[]` for a scalar.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The number of dimensions: 0 for a scalar.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements (some dimension is 0). A scalar is not empty.
    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }

    /// Whether the shape is `[]`.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// The only element, if the tensor has exactly one (a scalar, or a shape like `[1, 1]`).
    ///
    /// ```
    /// use wasmrpc_guest::Tensor;
    ///
    /// assert_eq!(Tensor::scalar(7).item(), Some(&7));
    /// assert_eq!(Tensor::from_vec(vec![1, 2]).item(), None);
    /// ```
    pub fn item(&self) -> Option<&T> {
        match self.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    /// Row-major strides, in elements: how far apart neighbours along each axis are.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::<i8>::zeros([2, 3, 4]).unwrap();
    /// assert_eq!(t.strides(), [12, 4, 1]);
    /// ```
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.shape.len()];
        for axis in (0..self.shape.len().saturating_sub(1)).rev() {
            strides[axis] = strides[axis + 1] * self.shape[axis + 1];
        }
        strides
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &[T] {
        self.data.as_slice()
    }

    /// The elements in row-major order, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data.as_mut_slice()
    }

    /// The elements in row-major order, dropping the shape.
    pub fn into_vec(self) -> Vec<T> {
        self.data.into_vec()
    }

    /// The shape and the elements.
    pub fn into_parts(self) -> (Vec<usize>, Vec<T>) {
        (self.shape, self.data.into_vec())
    }

    /// The row-major offset of `index`, if it has one coordinate per axis, each in range.
    fn offset(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.shape.len() {
            return None;
        }
        index
            .iter()
            .zip(&self.shape)
            .try_fold(0, |offset, (&i, &dim)| {
                // offset < product of the dimensions so far, so this cannot overflow.
                (i < dim).then(|| offset * dim + i)
            })
    }

    /// The element at `index` (one coordinate per axis), or `None` if it is out of range or has
    /// the wrong rank. A scalar's only element is at `&[]`.
    pub fn get(&self, index: &[usize]) -> Option<&T> {
        self.offset(index).map(|o| &self.as_slice()[o])
    }

    /// The element at `index`, mutable; see [`get`](Self::get).
    pub fn get_mut(&mut self, index: &[usize]) -> Option<&mut T> {
        self.offset(index).map(|o| &mut self.as_mut_slice()[o])
    }

    /// Applies `f` to a copy of every element, keeping the shape.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::from_vec(vec![1.5f32, -2.0]);
    /// assert_eq!(t.map(|x| x < 0.0).as_slice(), &[false, true]);
    /// ```
    pub fn map<U: Element>(&self, f: impl FnMut(T) -> U) -> Tensor<U> {
        Tensor {
            shape: self.shape.clone(),
            data: Elements::Owned(self.as_slice().iter().cloned().map(f).collect()),
        }
    }

    /// Combines two tensors of the same shape element by element. Fails with `invalid-argument`
    /// when the shapes differ.
    ///
    /// ```
    /// use wasmrpc_guest::Tensor;
    ///
    /// let a = Tensor::from_vec(vec![1, 2]);
    /// let b = Tensor::from_vec(vec![10, 20]);
    /// assert_eq!(a.zip_with(&b, |x, y| x + y).unwrap().as_slice(), &[11, 22]);
    /// assert!(a.zip_with(&Tensor::scalar(1), |x, y| x + y).is_err());
    /// ```
    pub fn zip_with<U: Element, R: Element>(
        &self,
        other: &Tensor<U>,
        mut f: impl FnMut(T, U) -> R,
    ) -> Result<Tensor<R>, Error> {
        if self.shape != other.shape {
            return Err(Error::invalid_argument(format!(
                "shapes {} and {} differ",
                ShapeDisplay(&self.shape),
                ShapeDisplay(&other.shape)
            )));
        }
        let data = self
            .as_slice()
            .iter()
            .zip(other.as_slice())
            .map(|(x, y)| f(x.clone(), y.clone()))
            .collect();
        Ok(Tensor {
            shape: self.shape.clone(),
            data: Elements::Owned(data),
        })
    }

    /// The same elements under another shape with the same element count; fails with
    /// `invalid-argument` otherwise.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::from_vec(vec![1, 2, 3, 4, 5, 6]);
    /// assert_eq!(t.clone().reshape([3, 2]).unwrap().shape(), &[3, 2]);
    /// assert!(t.reshape([4]).is_err());
    /// ```
    pub fn reshape(self, shape: impl Into<Vec<usize>>) -> Result<Self, Error> {
        let from = self.shape;
        Tensor::with_elements(shape.into(), self.data)
            .map_err(|e| e.context(format!("cannot reshape {}", ShapeDisplay(&from))))
    }

    /// The length of a row along the last axis and the number of rows; a scalar is one row of one.
    fn row_layout(&self) -> (usize, usize) {
        match self.shape.split_last() {
            // The product of the leading dimensions is a partial product, so it fits.
            Some((&last, leading)) => (last, leading.iter().product()),
            None => (1, 1),
        }
    }

    /// The slices along the last axis, in order: the rows of a matrix, the vectors of a batch. A
    /// 1-D tensor is one row; a scalar is one row of one element.
    ///
    /// ```
    /// let t = wasmrpc_guest::Tensor::new([2, 2, 2], (0..8).collect()).unwrap();
    /// let sums: Vec<i32> = t.rows().map(|row| row.iter().sum()).collect();
    /// assert_eq!(sums, [1, 5, 9, 13]);
    /// ```
    pub fn rows(&self) -> Rows<'_, T> {
        let (row_len, remaining) = self.row_layout();
        Rows {
            data: self.data.as_slice(),
            row_len,
            remaining,
        }
    }

    /// The slices along the last axis, mutable; see [`rows`](Self::rows).
    ///
    /// ```
    /// let mut t = wasmrpc_guest::Tensor::new([2, 2], vec![1, 2, 3, 4]).unwrap();
    /// for row in t.rows_mut() {
    ///     row.reverse();
    /// }
    /// assert_eq!(t.as_slice(), &[2, 1, 4, 3]);
    /// ```
    pub fn rows_mut(&mut self) -> RowsMut<'_, T> {
        let (row_len, remaining) = self.row_layout();
        RowsMut {
            data: self.data.as_mut_slice(),
            row_len,
            remaining,
        }
    }

    /// Decodes a wire tensor, checking its dtype and element count.
    pub(crate) fn from_wit(tensor: WitTensor) -> Result<Self, Error> {
        let dtype = DType::from(tensor.dtype);
        if dtype != T::DTYPE {
            return Err(Error::invalid_argument(format!(
                "expected {}, got {dtype}",
                T::DTYPE
            )));
        }
        let shape = tensor
            .shape
            .iter()
            .map(|&d| {
                usize::try_from(d)
                    .map_err(|_| Error::invalid_argument(format!("dimension {d} is too large")))
            })
            .collect::<Result<Vec<usize>, Error>>()?;
        let Some(count) = element_count(&shape) else {
            return Err(Error::invalid_argument(format!(
                "shape {} has too many elements",
                ShapeDisplay(&shape)
            )));
        };
        let data = Elements::from_wire(tensor.data, count)?;
        Ok(Tensor { shape, data })
    }

    /// Encodes the tensor for the wire.
    pub(crate) fn into_wit(self) -> Result<WitTensor, Error> {
        Ok(WitTensor {
            dtype: T::DTYPE.into(),
            shape: self.shape.iter().map(|&d| d as u64).collect(),
            data: self.data.into_wire()?,
        })
    }

    /// Whether the shape matches a declared one: same rank, and every fixed dimension equal.
    pub(crate) fn matches(&self, declared: Shape) -> bool {
        declared.is_none_or(|dims| {
            dims.len() == self.shape.len()
                && dims
                    .iter()
                    .zip(&self.shape)
                    .all(|(want, &got)| want.is_none_or(|w| w == got as u64))
        })
    }
}

impl<T: Element> fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &T::DTYPE)
            .field("shape", &self.shape)
            .field("data", &self.as_slice())
            .finish()
    }
}

/// Indexing by one coordinate per axis: `t[&[i, j][..]]`. Panics when the index is out of range
/// or has the wrong rank, as slice indexing does; use [`Tensor::get`] for a fallible look-up.
impl<T: Element> Index<&[usize]> for Tensor<T> {
    type Output = T;

    fn index(&self, index: &[usize]) -> &T {
        match self.offset(index) {
            Some(o) => &self.as_slice()[o],
            None => out_of_bounds(index, &self.shape),
        }
    }
}

impl<T: Element> IndexMut<&[usize]> for Tensor<T> {
    fn index_mut(&mut self, index: &[usize]) -> &mut T {
        match self.offset(index) {
            Some(o) => &mut self.as_mut_slice()[o],
            None => out_of_bounds(index, &self.shape),
        }
    }
}

/// Indexing by an array of coordinates: `t[[i, j]]`. Panics like the slice form.
///
/// ```
/// let mut t = wasmrpc_guest::Tensor::<i64>::zeros([2, 2]).unwrap();
/// t[[1, 0]] = 5;
/// assert_eq!(t.as_slice(), &[0, 0, 5, 0]);
/// ```
impl<T: Element, const N: usize> Index<[usize; N]> for Tensor<T> {
    type Output = T;

    fn index(&self, index: [usize; N]) -> &T {
        &self[&index[..]]
    }
}

impl<T: Element, const N: usize> IndexMut<[usize; N]> for Tensor<T> {
    fn index_mut(&mut self, index: [usize; N]) -> &mut T {
        &mut self[&index[..]]
    }
}

#[cold]
#[track_caller]
fn out_of_bounds(index: &[usize], shape: &[usize]) -> ! {
    panic!("index {index:?} is out of bounds for a tensor of shape {shape:?}")
}

/// Iterator over the slices along the last axis of a tensor; see [`Tensor::rows`].
#[derive(Debug)]
pub struct Rows<'a, T> {
    data: &'a [T],
    row_len: usize,
    remaining: usize,
}

impl<'a, T> Iterator for Rows<'a, T> {
    type Item = &'a [T];

    fn next(&mut self) -> Option<&'a [T]> {
        self.remaining = self.remaining.checked_sub(1)?;
        let (row, rest) = self.data.split_at_checked(self.row_len)?;
        self.data = rest;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Rows<'_, T> {}

/// Iterator over the mutable slices along the last axis of a tensor; see [`Tensor::rows_mut`].
#[derive(Debug)]
pub struct RowsMut<'a, T> {
    data: &'a mut [T],
    row_len: usize,
    remaining: usize,
}

impl<'a, T> Iterator for RowsMut<'a, T> {
    type Item = &'a mut [T];

    fn next(&mut self) -> Option<&'a mut [T]> {
        self.remaining = self.remaining.checked_sub(1)?;
        let (row, rest) = std::mem::take(&mut self.data).split_at_mut_checked(self.row_len)?;
        self.data = rest;
        Some(row)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for RowsMut<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::WitDtype;

    #[test]
    fn new_checks_the_element_count() {
        let err = Tensor::new([2, 3], vec![0i32; 5]).unwrap_err();
        assert_eq!(
            err,
            Error::invalid_argument("shape [2, 3] holds 6 elements, got 5")
        );
        assert!(Tensor::new([usize::MAX, 2], Vec::<u8>::new()).is_err());
        assert!(Tensor::new([0, 5], Vec::<u8>::new()).unwrap().is_empty());
        assert_eq!(
            Tensor::new(Vec::new(), vec![1u8]).unwrap(),
            Tensor::scalar(1u8)
        );
    }

    #[test]
    fn scalars_have_shape_empty_and_one_element() {
        let s = Tensor::scalar(3u16);
        assert_eq!((s.shape(), s.len(), s.rank()), (&[][..], 1, 0));
        assert_eq!(s.get(&[]), Some(&3));
        assert_eq!(s.rows().collect::<Vec<_>>(), [&[3][..]]);
        assert!(s.strides().is_empty());
    }

    #[test]
    fn indexing_follows_row_major_order() {
        let mut t = Tensor::new([2, 3, 2], (0..12).collect::<Vec<i32>>()).unwrap();
        assert_eq!(t.strides(), [6, 2, 1]);
        assert_eq!(t[[1, 2, 1]], 11);
        assert_eq!(t[&[0, 1, 0][..]], 2);
        assert_eq!(t.get(&[0, 3, 0]), None);
        assert_eq!(t.get(&[0, 0]), None);
        *t.get_mut(&[1, 0, 0]).unwrap() = -1;
        assert_eq!(t.as_slice()[6], -1);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn indexing_out_of_range_panics() {
        let t = Tensor::from_vec(vec![1.0f32]);
        let _ = t[[1]];
    }

    #[test]
    fn zip_with_requires_equal_shapes() {
        let a = Tensor::new([2, 1], vec![1, 2]).unwrap();
        let b = Tensor::from_vec(vec![1, 2]);
        let err = a.zip_with(&b, |x, y| x * y).unwrap_err();
        assert_eq!(err, Error::invalid_argument("shapes [2, 1] and [2] differ"));
    }

    #[test]
    fn rows_handle_empty_last_axes() {
        let t = Tensor::new([3, 0], Vec::<f32>::new()).unwrap();
        assert_eq!(t.rows().len(), 3);
        assert!(t.rows().all(|r| r.is_empty()));
        let t = Tensor::new([0, 4], Vec::<f32>::new()).unwrap();
        assert_eq!(t.rows().count(), 0);
    }

    #[test]
    fn reshape_keeps_elements_and_checks_count() {
        let t = Tensor::from_vec(vec![1, 2, 3, 4]).reshape([2, 2]).unwrap();
        assert_eq!(t.rows().nth(1), Some(&[3, 4][..]));
        let err = t.reshape([3]).unwrap_err();
        assert_eq!(
            err.message(),
            "cannot reshape [2, 2]: shape [3] holds 3 elements, got 4"
        );
    }

    #[test]
    fn full_refuses_overflowing_shapes() {
        assert!(matches!(
            Tensor::full([usize::MAX, 2], 0u8),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            Tensor::<u8>::zeros([usize::MAX]),
            Err(Error::ResourceExhausted(_))
        ));
    }

    #[test]
    fn wire_round_trip_keeps_shape_and_data() {
        let t = Tensor::new(
            [2, 2],
            vec!["a".to_string(), "bc".into(), String::new(), "é".into()],
        )
        .unwrap();
        let wit = t.clone().into_wit().unwrap();
        assert_eq!(wit.shape, [2, 2]);
        assert_eq!(Tensor::<String>::from_wit(wit).unwrap(), t);
    }

    #[test]
    fn from_wit_checks_dtype_and_count() {
        let wit = WitTensor {
            dtype: WitDtype::F32,
            shape: vec![2],
            data: vec![0; 8],
        };
        let err = Tensor::<i32>::from_wit(wit.clone()).unwrap_err();
        assert_eq!(err, Error::invalid_argument("expected int32, got float32"));
        let wit = WitTensor {
            shape: vec![3],
            ..wit
        };
        let err = Tensor::<f32>::from_wit(wit).unwrap_err();
        assert_eq!(err.message(), "3 elements need 12 bytes of data, got 8");
        let wit = WitTensor {
            dtype: WitDtype::U8,
            shape: vec![u64::MAX, u64::MAX],
            data: vec![],
        };
        assert!(Tensor::<u8>::from_wit(wit).is_err());
    }

    #[test]
    fn declared_shapes_match_rank_and_fixed_dimensions() {
        let t = Tensor::<f32>::zeros([2, 3]).unwrap();
        assert!(t.matches(None));
        assert!(t.matches(Some(&[None, None])));
        assert!(t.matches(Some(&[Some(2), None])));
        assert!(!t.matches(Some(&[None, Some(2)])));
        assert!(!t.matches(Some(&[None])));
        assert!(!t.matches(Some(&[])));
        assert!(Tensor::scalar(1.0f32).matches(Some(&[])));
    }
}

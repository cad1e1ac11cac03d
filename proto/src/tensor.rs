//! The dense tensor that crosses the wire: dtype, shape and little-endian row-major bytes.
//!
//! This is the same layout the WIT `tensor` record uses, so the host passes it to guests without
//! re-encoding. Typed access goes through the sealed [`Element`] trait.

use bytes::Bytes;

use crate::dtype::DType;

/// The most dimensions a tensor may have, however it arrives (v1 and v2 JSON, v2 binary, the
/// inter-worker tensor list, a guest's outputs) and however it is built. Every framework wasmrpc
/// talks to stays far below it (NumPy allows 64, PyTorch and TensorFlow fewer); a shape longer
/// than this is an attack or a mistake, and refusing it keeps every shape, and every message
/// that prints one, small. Parsers stop reading a shape at its 65th dimension.
///
/// ```
/// use wasmrpc_proto::{Tensor, TensorError, tensor::MAX_RANK};
/// let err = Tensor::from_vec(vec![1u64; MAX_RANK + 1], vec![1u8]).unwrap_err();
/// assert!(matches!(err, TensorError::Rank { rank: 65 }));
/// assert!(Tensor::from_vec(vec![1u64; MAX_RANK], vec![1u8]).is_ok());
/// ```
pub const MAX_RANK: usize = 64;

/// A shape of at most this many dimensions is printed whole; a longer one as its first
/// [`SHOWN_DIMS`], an ellipsis and its last. Eight dimensions of 20 digits are under 200 bytes.
const WHOLE_UP_TO: usize = 8;
/// How many leading dimensions of a long shape a message prints.
const SHOWN_DIMS: usize = 4;

/// A shape as error messages print it: whole up to 8 dimensions, and otherwise its first four,
/// an ellipsis and its last, with its rank (`[1, 2, 3, 4, …, 9] (rank 9)`), so that a message
/// about a huge shape stays small. Every message that prints a shape goes through it.
///
/// ```
/// use wasmrpc_proto::tensor::ShortShape;
/// assert_eq!(ShortShape(&[2u64, 3]).to_string(), "[2, 3]");
/// assert_eq!(ShortShape(&[1u64; 8]).to_string(), "[1, 1, 1, 1, 1, 1, 1, 1]");
/// assert_eq!(ShortShape(&[1u64, 2, 3, 4, 5, 6, 7, 8, 9]).to_string(), "[1, 2, 3, 4, …, 9] (rank 9)");
/// assert_eq!(ShortShape::<u64>(&[]).to_string(), "[]");
/// let long: Vec<i64> = (1..=100_000).collect();
/// assert_eq!(ShortShape(&long).to_string(), "[1, 2, 3, 4, …, 100000] (rank 100000)");
/// ```
pub struct ShortShape<'a, D>(pub &'a [D]);

impl<D: std::fmt::Display> std::fmt::Display for ShortShape<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims = self.0;
        let write_all = |f: &mut std::fmt::Formatter<'_>, dims: &[D]| {
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{d}")?;
            }
            Ok(())
        };
        f.write_str("[")?;
        if dims.len() <= WHOLE_UP_TO {
            write_all(f, dims)?;
            return f.write_str("]");
        }
        write_all(f, &dims[..SHOWN_DIMS])?;
        write!(f, ", …, {}] (rank {})", dims[dims.len() - 1], dims.len())
    }
}

/// `Err(TensorError::Rank)` when `rank` is over [`MAX_RANK`].
pub(crate) fn check_rank(rank: usize) -> Result<(), TensorError> {
    if rank > MAX_RANK {
        return Err(TensorError::Rank { rank });
    }
    Ok(())
}

/// Why a tensor could not be built or read.
///
/// It converts into an INVALID_ARGUMENT [`Status`](crate::Status), so `?` works in functions that
/// return the client's error.
///
/// ```
/// use wasmrpc_proto::{Tensor, TensorError};
/// let err = Tensor::from_vec([2, 2], vec![1i32, 2, 3]).unwrap_err();
/// assert!(matches!(err, TensorError::ElementCount { expected: 4, actual: 3, .. }));
/// assert_eq!(err.to_string(), "shape [2, 2] needs 4 elements, got 3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorError {
    /// More dimensions than [`MAX_RANK`]. A parser that stops at the first dimension too many
    /// says `MAX_RANK + 1`: the rank is at least that.
    #[error(
        "the shape has {rank} dimensions or more; a tensor may have at most {MAX_RANK} \
         (MAX_RANK)"
    )]
    Rank {
        /// The rank seen (at least; a parser stops counting past the limit).
        rank: usize,
    },
    /// A dimension was negative.
    #[error("shape {} has a negative dimension", ShortShape(shape))]
    NegativeDimension {
        /// The shape as given.
        shape: Vec<i64>,
    },
    /// The product of the dimensions does not fit in 64 bits.
    #[error("shape {} has more elements than can be addressed", ShortShape(shape))]
    ShapeOverflow {
        /// The shape as given.
        shape: Vec<u64>,
    },
    /// The number of values does not match the shape.
    #[error("shape {} needs {expected} elements, got {actual}", ShortShape(shape))]
    ElementCount {
        /// The shape.
        shape: Vec<u64>,
        /// The product of the shape.
        expected: u64,
        /// What was given.
        actual: u64,
    },
    /// The raw byte length is not what the dtype and shape need.
    #[error(
        "{dtype} tensor of shape {} needs {expected} bytes of data, got {actual}",
        ShortShape(shape)
    )]
    ByteLength {
        /// The dtype.
        dtype: DType,
        /// The shape.
        shape: Vec<u64>,
        /// Bytes needed.
        expected: u64,
        /// Bytes given.
        actual: u64,
    },
    /// The dtype is not what the reader asked for.
    #[error("expected a {expected} tensor, got {actual}")]
    DType {
        /// What the reader wanted.
        expected: DType,
        /// What the tensor is.
        actual: DType,
    },
    /// A value is not valid for the dtype (out of range, not finite, wrong kind).
    #[error("{0}")]
    Value(String),
}

/// The byte-level form of an element type; implemented for every fixed-size dtype's Rust type:
/// `bool`, `u8`…`u64`, `i8`…`i64`, `half::f16`, `half::bf16`, `f32`, `f64`. Sealed.
///
/// ```
/// use wasmrpc_proto::{DType, Element};
/// assert_eq!(<i32 as Element>::DTYPE, DType::Int32);
/// let mut bytes = Vec::new();
/// 258i32.write_le(&mut bytes);
/// assert_eq!(bytes, [2, 1, 0, 0]);
/// assert_eq!(i32::read_le(&bytes), 258);
/// ```
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The dtype this Rust type stands for.
    const DTYPE: DType;
    /// Append the little-endian bytes of `self`.
    fn write_le(self, out: &mut Vec<u8>);
    /// Read one element from exactly `size` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! numeric_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                let mut buf = [0u8; std::mem::size_of::<$t>()];
                buf.copy_from_slice(bytes);
                <$t>::from_le_bytes(buf)
            }
        }
    )*};
}

numeric_element!(
    u8 => UInt8, u16 => UInt16, u32 => UInt32, u64 => UInt64,
    i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64,
    f32 => Float32, f64 => Float64,
    half::f16 => Float16, half::bf16 => BFloat16,
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// The product of `shape`, or an error if it overflows `u64`.
///
/// # Errors
/// [`TensorError::ShapeOverflow`] when the product does not fit in 64 bits.
///
/// ```
/// use wasmrpc_proto::tensor::element_count;
/// assert_eq!(element_count(&[2, 3, 4]).unwrap(), 24);
/// assert_eq!(element_count(&[]).unwrap(), 1); // a scalar
/// assert!(element_count(&[u64::MAX, 2]).is_err());
/// ```
pub fn element_count(shape: &[u64]) -> Result<u64, TensorError> {
    shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| TensorError::ShapeOverflow {
            shape: shape.to_vec(),
        })
}

/// Split length-prefixed string elements (`u32` little-endian length, then the bytes).
///
/// # Errors
/// A length prefix that runs past the end of `data`.
///
/// ```
/// use wasmrpc_proto::tensor::split_strings;
/// let data = [2, 0, 0, 0, b'h', b'i', 0, 0, 0, 0];
/// assert_eq!(split_strings(&data).unwrap(), vec![&b"hi"[..], &b""[..]]);
/// assert!(split_strings(&data[..5]).is_err());
/// ```
pub fn split_strings(data: &[u8]) -> Result<Vec<&[u8]>, TensorError> {
    let mut out = Vec::new();
    for_each_string(data, |elem| out.push(elem))?;
    Ok(out)
}

/// How many length-prefixed string elements `data` holds, checking every prefix without
/// collecting the elements.
fn count_strings(data: &[u8]) -> Result<u64, TensorError> {
    let mut count = 0u64;
    for_each_string(data, |_| count += 1)?;
    Ok(count)
}

fn for_each_string<'a>(data: &'a [u8], mut each: impl FnMut(&'a [u8])) -> Result<(), TensorError> {
    let mut rest = data;
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(TensorError::Value(
                "string data ends inside a length prefix".into(),
            ));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(TensorError::Value(format!(
                "string element of {len} bytes runs past the end of the data"
            )));
        }
        let (elem, tail) = tail.split_at(len);
        each(elem);
        rest = tail;
    }
    Ok(())
}

/// Append one length-prefixed string element.
///
/// # Panics
/// When `elem` is 4 GiB or longer (a length the format cannot carry).
///
/// ```
/// use wasmrpc_proto::tensor::push_string;
/// let mut data = Vec::new();
/// push_string(&mut data, b"hi");
/// assert_eq!(data, [2, 0, 0, 0, b'h', b'i']);
/// ```
pub fn push_string(out: &mut Vec<u8>, elem: &[u8]) {
    let len = u32::try_from(elem.len()).expect("string elements are under 4 GiB");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(elem);
}

/// A dense tensor: dtype, shape (`[]` is a scalar) and little-endian row-major data.
///
/// ```
/// use wasmrpc_proto::{DType, Tensor};
/// let t = Tensor::from_vec([2, 2], vec![1i32, 2, 3, 4]).unwrap();
/// assert_eq!(t.dtype(), DType::Int32);
/// assert_eq!(t.shape(), &[2, 2]);
/// assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<u64>,
    // Shared, so that a tensor cut out of a request body (the binary infer form) or cloned for a
    // retry costs no copy of its data.
    data: Bytes,
}

impl Tensor {
    /// A tensor from raw little-endian bytes, checked against the dtype and shape.
    ///
    /// # Errors
    /// [`TensorError::Rank`] past [`MAX_RANK`] dimensions;
    /// [`TensorError::ByteLength`] or [`TensorError::ElementCount`] when the bytes do not fit the
    /// shape; [`TensorError::Value`] for a bool byte other than 0 or 1 or malformed string data.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// let t = Tensor::from_raw(DType::UInt16, vec![2], vec![1, 0, 0, 1]).unwrap();
    /// assert_eq!(t.to_vec::<u16>().unwrap(), vec![1, 256]);
    /// assert!(Tensor::from_raw(DType::UInt16, vec![2], vec![1, 0, 0]).is_err());
    /// ```
    pub fn from_raw(
        dtype: DType,
        shape: Vec<u64>,
        data: impl Into<Bytes>,
    ) -> Result<Self, TensorError> {
        check_rank(shape.len())?;
        let data = data.into();
        let count = element_count(&shape)?;
        match dtype.size() {
            Some(size) => {
                let expected =
                    count
                        .checked_mul(size as u64)
                        .ok_or_else(|| TensorError::ShapeOverflow {
                            shape: shape.clone(),
                        })?;
                if expected != data.len() as u64 {
                    return Err(TensorError::ByteLength {
                        dtype,
                        shape,
                        expected,
                        actual: data.len() as u64,
                    });
                }
                if dtype == DType::Bool && data.iter().any(|&b| b > 1) {
                    return Err(TensorError::Value("bool elements must be 0 or 1".into()));
                }
            }
            None => {
                let actual = count_strings(&data)?;
                if actual != count {
                    return Err(TensorError::ElementCount {
                        shape,
                        expected: count,
                        actual,
                    });
                }
            }
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// A tensor of the given shape from typed values, in row-major order.
    ///
    /// # Errors
    /// [`TensorError::ElementCount`] when `values.len()` is not the product of `shape`;
    /// [`TensorError::Rank`] past [`MAX_RANK`] dimensions.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::from_vec([2, 3], vec![0.5f32; 6]).unwrap();
    /// assert_eq!(t.num_elements(), 6);
    /// assert!(Tensor::from_vec([2, 3], vec![0.5f32; 5]).is_err());
    /// ```
    pub fn from_vec<T: Element>(
        shape: impl Into<Vec<u64>>,
        values: Vec<T>,
    ) -> Result<Self, TensorError> {
        let shape = shape.into();
        check_rank(shape.len())?;
        let expected = element_count(&shape)?;
        if expected != values.len() as u64 {
            return Err(TensorError::ElementCount {
                shape,
                expected,
                actual: values.len() as u64,
            });
        }
        let mut data = Vec::with_capacity(values.len() * T::DTYPE.size().unwrap_or(1));
        for v in values {
            v.write_le(&mut data);
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            data: data.into(),
        })
    }

    /// A tensor of `shape` from `values`, whose count the caller has made match the shape.
    pub(crate) fn from_elements<T: Element>(
        shape: Vec<u64>,
        values: impl ExactSizeIterator<Item = T>,
    ) -> Self {
        let mut data = Vec::with_capacity(values.len() * T::DTYPE.size().unwrap_or(1));
        for v in values {
            v.write_le(&mut data);
        }
        Tensor {
            dtype: T::DTYPE,
            shape,
            data: data.into(),
        }
    }

    /// A one-dimensional tensor holding `values`.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::vector(vec![1i64, 2, 3]);
    /// assert_eq!(t.shape(), &[3]);
    /// ```
    pub fn vector<T: Element>(values: Vec<T>) -> Self {
        Tensor::from_elements(vec![values.len() as u64], values.into_iter())
    }

    /// A scalar (shape `[]`, as TensorFlow's `tf.constant(2)`).
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// let t = Tensor::scalar(2i32);
    /// assert_eq!((t.dtype(), t.shape()), (DType::Int32, &[][..]));
    /// ```
    pub fn scalar<T: Element>(value: T) -> Self {
        Tensor::from_elements(Vec::new(), std::iter::once(value))
    }

    /// A string tensor (dtype `string`) of the given shape; elements are arbitrary bytes.
    ///
    /// # Errors
    /// [`TensorError::ElementCount`] when the count does not match the shape;
    /// [`TensorError::Rank`] past [`MAX_RANK`] dimensions.
    ///
    /// # Panics
    /// When one element is 4 GiB or longer.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// let t = Tensor::from_strings([2], ["hello", "world"]).unwrap();
    /// assert_eq!(t.dtype(), DType::String);
    /// assert_eq!(t.to_strings().unwrap()[1], b"world");
    /// ```
    pub fn from_strings<S: AsRef<[u8]>>(
        shape: impl Into<Vec<u64>>,
        values: impl IntoIterator<Item = S>,
    ) -> Result<Self, TensorError> {
        let shape = shape.into();
        check_rank(shape.len())?;
        let expected = element_count(&shape)?;
        let mut data = Vec::new();
        let mut actual = 0u64;
        for v in values {
            push_string(&mut data, v.as_ref());
            actual += 1;
        }
        if actual != expected {
            return Err(TensorError::ElementCount {
                shape,
                expected,
                actual,
            });
        }
        Ok(Tensor {
            dtype: DType::String,
            shape,
            data: data.into(),
        })
    }

    /// The element type.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// assert_eq!(Tensor::scalar(true).dtype(), DType::Bool);
    /// ```
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions, outermost first; empty for a scalar.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// assert_eq!(Tensor::from_vec([2, 1], vec![1u8, 2]).unwrap().shape(), &[2, 1]);
    /// ```
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The raw little-endian row-major bytes (length-prefixed elements for strings).
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// assert_eq!(Tensor::vector(vec![1u16, 2]).raw_data(), &[1, 0, 2, 0]);
    /// ```
    pub fn raw_data(&self) -> &[u8] {
        &self.data
    }

    /// The parts, for handing the bytes on without a copy.
    ///
    /// ```
    /// use wasmrpc_proto::{DType, Tensor};
    /// let (dtype, shape, data) = Tensor::scalar(1u8).into_parts();
    /// assert_eq!((dtype, shape, data), (DType::UInt8, vec![], vec![1]));
    /// ```
    pub fn into_parts(self) -> (DType, Vec<u64>, Vec<u8>) {
        // No copy when this tensor holds the only reference to its whole buffer.
        (self.dtype, self.shape, Vec::from(self.data))
    }

    /// The raw bytes as a shared buffer: cloning it, or slicing it, copies nothing.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::vector(vec![1u8, 2, 3]);
    /// assert_eq!(t.raw_bytes().slice(1..), &[2u8, 3][..]);
    /// ```
    pub fn raw_bytes(&self) -> &Bytes {
        &self.data
    }

    /// How many elements the tensor holds (1 for a scalar).
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// assert_eq!(Tensor::from_vec([2, 0], Vec::<f32>::new()).unwrap().num_elements(), 0);
    /// assert_eq!(Tensor::scalar(1.0f32).num_elements(), 1);
    /// ```
    pub fn num_elements(&self) -> u64 {
        element_count(&self.shape).unwrap_or(u64::MAX)
    }

    /// The elements as typed values, in row-major order.
    ///
    /// # Errors
    /// [`TensorError::DType`] when `T` is not the tensor's dtype.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::vector(vec![11i32, 22]);
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![11, 22]);
    /// assert!(t.to_vec::<i64>().is_err());
    /// ```
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        if T::DTYPE != self.dtype {
            return Err(TensorError::DType {
                expected: T::DTYPE,
                actual: self.dtype,
            });
        }
        let size = T::DTYPE.size().unwrap_or(1);
        Ok(self.data.chunks_exact(size).map(T::read_le).collect())
    }

    /// The elements of a string tensor as byte strings.
    ///
    /// # Errors
    /// [`TensorError::DType`] when the tensor is not a string tensor.
    ///
    /// ```
    /// use wasmrpc_proto::Tensor;
    /// let t = Tensor::from_strings([1], ["abc"]).unwrap();
    /// assert_eq!(t.to_strings().unwrap(), vec![b"abc".to_vec()]);
    /// assert!(Tensor::scalar(1i32).to_strings().is_err());
    /// ```
    pub fn to_strings(&self) -> Result<Vec<Vec<u8>>, TensorError> {
        if self.dtype != DType::String {
            return Err(TensorError::DType {
                expected: DType::String,
                actual: self.dtype,
            });
        }
        Ok(split_strings(&self.data)?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_vec_checks_the_element_count() {
        let err = Tensor::from_vec([2, 4], vec![0f32; 7]).unwrap_err();
        assert!(matches!(
            err,
            TensorError::ElementCount {
                expected: 8,
                actual: 7,
                ..
            }
        ));
    }

    #[test]
    fn overflowing_shape_is_refused_without_allocating() {
        let err = Tensor::from_raw(DType::Float32, vec![u64::MAX, 4], vec![]).unwrap_err();
        assert!(matches!(err, TensorError::ShapeOverflow { .. }));
    }

    #[test]
    fn strings_round_trip() {
        let t = Tensor::from_strings([2], ["ab", ""]).unwrap();
        assert_eq!(t.to_strings().unwrap(), vec![b"ab".to_vec(), Vec::new()]);
        assert_eq!(t.num_elements(), 2);
    }

    #[test]
    fn reading_the_wrong_dtype_fails() {
        let t = Tensor::scalar(1.5f64);
        assert!(t.to_vec::<f32>().is_err());
        assert_eq!(t.to_vec::<f64>().unwrap(), vec![1.5]);
    }
}

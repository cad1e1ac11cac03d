//! Element types: the [`DType`] tag of the wire format and the sealed [`Element`] trait that maps
//! Rust types onto it.
//!
//! | Rust type | [`DType`] | wire name |
//! |---|---|---|
//! | `bool` | `Bool` | `bool` |
//! | `u8`, `u16`, `u32`, `u64` | `U8`… | `uint8`… |
//! | `i8`, `i16`, `i32`, `i64` | `I8`… | `int8`… |
//! | [`half::f16`], [`half::bf16`] | `F16`, `BF16` | `float16`, `bfloat16` |
//! | `f32`, `f64` | `F32`, `F64` | `float32`, `float64` |
//! | `String`, `Vec<u8>` | `Bytes` | `string` |
//!
//! Fixed-size elements travel little-endian, row-major; a `bool` is one byte, 0 or 1. A `Bytes`
//! element is a little-endian `u32` length followed by that many bytes; as a `String` it must be
//! UTF-8.

use std::fmt;

use half::{bf16, f16};

use crate::__private::WitDtype;
use crate::Error;

/// The element type of a tensor on the wire, one case per `dtype` of the WIT package.
///
/// ```
/// use wasmrpc_guest::{DType, Element};
///
/// assert_eq!(<f32 as Element>::DTYPE, DType::F32);
/// assert_eq!(DType::F32.name(), "float32");
/// assert_eq!(DType::F32.size(), Some(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// One byte per element, 0 or 1.
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// IEEE 754 half precision float.
    F16,
    /// bfloat16: the upper half of an f32.
    BF16,
    /// IEEE 754 single precision float.
    F32,
    /// IEEE 754 double precision float.
    F64,
    /// Variable-length byte strings.
    Bytes,
}

impl DType {
    /// The name users see (TensorFlow's): `int32`, `float32`, `string`…
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bytes => "string",
        }
    }

    /// Bytes per element on the wire, or `None` for variable-length `Bytes`.
    pub const fn size(self) -> Option<usize> {
        match self {
            DType::Bool | DType::U8 | DType::I8 => Some(1),
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => Some(2),
            DType::U32 | DType::I32 | DType::F32 => Some(4),
            DType::U64 | DType::I64 | DType::F64 => Some(8),
            DType::Bytes => None,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<DType> for WitDtype {
    fn from(dtype: DType) -> Self {
        match dtype {
            DType::Bool => WitDtype::Bool,
            DType::U8 => WitDtype::U8,
            DType::U16 => WitDtype::U16,
            DType::U32 => WitDtype::U32,
            DType::U64 => WitDtype::U64,
            DType::I8 => WitDtype::I8,
            DType::I16 => WitDtype::I16,
            DType::I32 => WitDtype::I32,
            DType::I64 => WitDtype::I64,
            DType::F16 => WitDtype::F16,
            DType::BF16 => WitDtype::Bf16,
            DType::F32 => WitDtype::F32,
            DType::F64 => WitDtype::F64,
            DType::Bytes => WitDtype::Bytes,
        }
    }
}

impl From<WitDtype> for DType {
    fn from(dtype: WitDtype) -> Self {
        match dtype {
            WitDtype::Bool => DType::Bool,
            WitDtype::U8 => DType::U8,
            WitDtype::U16 => DType::U16,
            WitDtype::U32 => DType::U32,
            WitDtype::U64 => DType::U64,
            WitDtype::I8 => DType::I8,
            WitDtype::I16 => DType::I16,
            WitDtype::I32 => DType::I32,
            WitDtype::I64 => DType::I64,
            WitDtype::F16 => DType::F16,
            WitDtype::Bf16 => DType::BF16,
            WitDtype::F32 => DType::F32,
            WitDtype::F64 => DType::F64,
            WitDtype::Bytes => DType::Bytes,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type a [`Tensor`](crate::Tensor) can hold. Sealed: implemented for exactly the types in the
/// [module table](self).
///
/// ```
/// use wasmrpc_guest::Element;
///
/// let bytes = i16::encode(vec![1, -2]).unwrap();
/// assert_eq!(bytes, [1, 0, 0xfe, 0xff]);
/// assert_eq!(i16::decode(bytes, 2).unwrap(), [1, -2]);
///
/// let strings = String::encode(vec!["hé".to_string()]).unwrap();
/// assert_eq!(strings, [3, 0, 0, 0, b'h', 0xc3, 0xa9]);
/// ```
pub trait Element: sealed::Sealed + Clone + fmt::Debug + PartialEq + 'static {
    /// The wire dtype of this element type.
    const DTYPE: DType;

    /// Decodes `count` elements from their wire bytes. Fails with `invalid-argument` when the
    /// bytes do not hold exactly `count` valid elements, `resource-exhausted` when the elements
    /// cannot be allocated.
    fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error>;

    /// Encodes elements into their wire bytes. Fails with `resource-exhausted` when the bytes
    /// cannot be allocated or a `Bytes` element is longer than `u32::MAX` bytes.
    fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error>;

    /// Whether the wire bytes of these elements, where they start aligned for `Self`, already
    /// are their memory: every bit pattern is a value, there is no padding, and the target is
    /// little-endian. Such arguments are read where the host wrote them (`elements.rs`).
    #[doc(hidden)]
    const IN_PLACE: bool = false;
}

/// Checks that `data` holds `count` elements of `size` bytes.
pub(crate) fn check_len(data: &[u8], count: usize, size: usize) -> Result<(), Error> {
    match count.checked_mul(size) {
        Some(expected) if expected == data.len() => Ok(()),
        Some(expected) => Err(Error::invalid_argument(format!(
            "{count} elements need {expected} bytes of data, got {}",
            data.len()
        ))),
        None => Err(Error::invalid_argument(format!(
            "{count} elements of {size} bytes overflow the address space"
        ))),
    }
}

/// An empty vector with room for `len` elements, or `resource-exhausted`: a method that cannot
/// allocate its arguments or outputs fails with an error, not a trap.
fn buffer<T>(len: usize) -> Result<Vec<T>, Error> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| {
        Error::resource_exhausted(format!(
            "cannot allocate {} bytes",
            len.saturating_mul(size_of::<T>())
        ))
    })?;
    Ok(buf)
}

/// Copies `count` elements of `size` bytes from their little-endian wire bytes into `out` (which
/// has room for them): on a little-endian target (wasm32 is one) a plain memory copy.
///
/// Only for the plain numeric types of `fixed_size!`: no padding, and every bit pattern is a
/// valid value.
#[cfg(target_endian = "little")]
fn copy_from_le<T: Copy>(data: &[u8], out: &mut Vec<T>, count: usize) {
    assert!(out.capacity() - out.len() >= count && data.len() == count * size_of::<T>());
    // SAFETY: `out` has room for `count` more elements (asserted), `data` holds exactly their
    // bytes, the two do not overlap, and every bit pattern of these bytes is a valid `T` in the
    // target's (little-endian) layout, which is the wire's.
    unsafe {
        std::ptr::copy_nonoverlapping(
            data.as_ptr(),
            out.as_mut_ptr().add(out.len()).cast::<u8>(),
            data.len(),
        );
        out.set_len(out.len() + count);
    }
}

/// The little-endian wire bytes of plain numeric elements: on a little-endian target, their
/// memory as it is.
#[cfg(target_endian = "little")]
fn le_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: the elements are plain numbers without padding (only `fixed_size!` types come
    // here), so all `size_of_val(values)` bytes are initialised, and `u8` has no alignment.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
}

macro_rules! fixed_size {
    ($($t:ty => $dtype:ident, $size:literal;)*) => {$(
        impl sealed::Sealed for $t {}

        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const IN_PLACE: bool = cfg!(target_endian = "little");

            fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error> {
                check_len(&data, count, $size)?;
                let mut out = buffer(count)?;
                #[cfg(target_endian = "little")]
                copy_from_le(&data, &mut out, count);
                #[cfg(not(target_endian = "little"))]
                {
                    let (chunks, _) = data.as_chunks::<$size>();
                    out.extend(chunks.iter().map(|c| <$t>::from_le_bytes(*c)));
                }
                Ok(out)
            }

            fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error> {
                let mut out = buffer(values.len() * $size)?;
                #[cfg(target_endian = "little")]
                out.extend_from_slice(le_bytes(&values));
                #[cfg(not(target_endian = "little"))]
                for v in &values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Ok(out)
            }
        }
    )*};
}

fixed_size! {
    u16 => U16, 2;
    u32 => U32, 4;
    u64 => U64, 8;
    i8 => I8, 1;
    i16 => I16, 2;
    i32 => I32, 4;
    i64 => I64, 8;
    f16 => F16, 2;
    bf16 => BF16, 2;
    f32 => F32, 4;
    f64 => F64, 8;
}

impl sealed::Sealed for u8 {}

impl Element for u8 {
    const DTYPE: DType = DType::U8;

    fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error> {
        check_len(&data, count, 1)?;
        Ok(data)
    }

    fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error> {
        Ok(values)
    }
}

impl sealed::Sealed for bool {}

impl Element for bool {
    const DTYPE: DType = DType::Bool;

    fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error> {
        check_len(&data, count, 1)?;
        let mut out = buffer(count)?;
        for (i, &b) in data.iter().enumerate() {
            out.push(match b {
                0 => false,
                1 => true,
                _ => {
                    return Err(Error::invalid_argument(format!(
                        "element {i} is {b}; a bool must be 0 or 1"
                    )));
                }
            });
        }
        Ok(out)
    }

    fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error> {
        let mut out = buffer(values.len())?;
        out.extend(values.into_iter().map(u8::from));
        Ok(out)
    }
}

/// Splits `Bytes` wire data into `count` elements, converting each with `convert`.
fn decode_bytes<T>(
    data: &[u8],
    count: usize,
    mut convert: impl FnMut(usize, &[u8]) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    // Every element takes at least its 4-byte length: never reserve more than the data can hold.
    let mut out = Vec::with_capacity(count.min(data.len() / 4));
    let mut rest = data;
    for i in 0..count {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(Error::invalid_argument(format!(
                "element {i} of {count}: the data ends before its length"
            )));
        };
        let len = u32::from_le_bytes(*len);
        let Some((bytes, after)) = usize::try_from(len)
            .ok()
            .and_then(|n| tail.split_at_checked(n))
        else {
            return Err(Error::invalid_argument(format!(
                "element {i} of {count}: its length {len} runs past the end of the data"
            )));
        };
        out.push(convert(i, bytes)?);
        rest = after;
    }
    if rest.is_empty() {
        Ok(out)
    } else {
        Err(Error::invalid_argument(format!(
            "{} bytes of data left after the last of {count} elements",
            rest.len()
        )))
    }
}

/// Encodes `Bytes` elements: each one's little-endian `u32` length, then its bytes.
fn encode_bytes<T: AsRef<[u8]>>(values: &[T]) -> Result<Vec<u8>, Error> {
    let total = values.iter().map(|v| 4 + v.as_ref().len()).sum();
    let mut out = buffer(total)?;
    for (i, value) in values.iter().enumerate() {
        let bytes = value.as_ref();
        let len = u32::try_from(bytes.len()).map_err(|_| {
            Error::resource_exhausted(format!(
                "element {i} has {} bytes; a string element holds at most {} bytes",
                bytes.len(),
                u32::MAX
            ))
        })?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

impl sealed::Sealed for Vec<u8> {}

impl Element for Vec<u8> {
    const DTYPE: DType = DType::Bytes;

    fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error> {
        decode_bytes(&data, count, |_, bytes| Ok(bytes.to_vec()))
    }

    fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error> {
        encode_bytes(&values)
    }
}

impl sealed::Sealed for String {}

impl Element for String {
    const DTYPE: DType = DType::Bytes;

    fn decode(data: Vec<u8>, count: usize) -> Result<Vec<Self>, Error> {
        decode_bytes(&data, count, |i, bytes| match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(Error::invalid_argument(format!(
                "element {i} is not valid UTF-8: {e}"
            ))),
        })
    }

    fn encode(values: Vec<Self>) -> Result<Vec<u8>, Error> {
        encode_bytes(&values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Element>(values: Vec<T>) {
        let count = values.len();
        let bytes = T::encode(values.clone()).unwrap();
        if let Some(size) = T::DTYPE.size() {
            assert_eq!(bytes.len(), count * size);
        }
        assert_eq!(T::decode(bytes, count).unwrap(), values);
    }

    #[test]
    fn every_element_type_round_trips() {
        round_trip(vec![true, false, true]);
        round_trip(vec![0u8, 7, 255]);
        round_trip(vec![0u16, 1, u16::MAX]);
        round_trip(vec![0u32, 1, u32::MAX]);
        round_trip(vec![0u64, 1, u64::MAX]);
        round_trip(vec![i8::MIN, -1, 0, i8::MAX]);
        round_trip(vec![i16::MIN, -1, 0, i16::MAX]);
        round_trip(vec![i32::MIN, -1, 0, i32::MAX]);
        round_trip(vec![i64::MIN, -1, 0, i64::MAX]);
        round_trip(vec![f16::from_f32(1.5), f16::MAX, f16::NEG_INFINITY]);
        round_trip(vec![bf16::from_f32(-2.0), bf16::MIN_POSITIVE]);
        round_trip(vec![0.5f32, -0.0, f32::MAX, f32::INFINITY]);
        round_trip(vec![0.25f64, f64::MIN, f64::EPSILON]);
        round_trip(vec![String::new(), "héllo".to_string(), "日本".to_string()]);
        round_trip(vec![vec![], vec![0u8, 255, 0], b"raw".to_vec()]);
        round_trip(Vec::<f32>::new());
    }

    #[test]
    fn fixed_size_elements_are_little_endian() {
        assert_eq!(
            i32::encode(vec![1, -1]).unwrap(),
            [1, 0, 0, 0, 255, 255, 255, 255]
        );
        assert_eq!(f32::encode(vec![1.0]).unwrap(), 1.0f32.to_le_bytes());
        assert_eq!(u16::decode(vec![0x34, 0x12], 1).unwrap(), [0x1234]);
        assert_eq!(bf16::encode(vec![bf16::ONE]).unwrap(), [0x80, 0x3f]);
    }

    #[test]
    fn wrong_data_length_is_invalid_argument() {
        let err = i32::decode(vec![0; 7], 2).unwrap_err();
        assert_eq!(
            err,
            Error::invalid_argument("2 elements need 8 bytes of data, got 7")
        );
        assert!(f64::decode(vec![0; 8], usize::MAX).is_err());
        assert!(u8::decode(vec![1, 2], 3).is_err());
    }

    #[test]
    fn bool_must_be_zero_or_one() {
        assert_eq!(bool::decode(vec![0, 1], 2).unwrap(), [false, true]);
        let err = bool::decode(vec![0, 2], 2).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.message().contains("element 1"), "{err}");
    }

    #[test]
    fn bytes_elements_are_length_prefixed() {
        let data = Vec::<u8>::encode(vec![b"ab".to_vec(), vec![]]).unwrap();
        assert_eq!(data, [2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_bytes_are_invalid_argument() {
        // Truncated length prefix.
        assert!(String::decode(vec![1, 0], 1).is_err());
        // Length past the end.
        assert!(String::decode(vec![5, 0, 0, 0, b'a'], 1).is_err());
        // Trailing bytes.
        assert!(String::decode(vec![0, 0, 0, 0, 9], 1).is_err());
        // Fewer elements than the shape says, even with a huge count (no huge allocation).
        assert!(Vec::<u8>::decode(vec![0, 0, 0, 0], usize::MAX).is_err());
        // Invalid UTF-8 names the element.
        let err = String::decode(vec![1, 0, 0, 0, 0xff], 1).unwrap_err();
        assert!(
            err.message().starts_with("element 0 is not valid UTF-8"),
            "{err}"
        );
        // The same bytes are fine as raw bytes.
        assert_eq!(
            Vec::<u8>::decode(vec![1, 0, 0, 0, 0xff], 1).unwrap(),
            [vec![0xff]]
        );
    }

    #[test]
    fn dtype_converts_to_and_from_wit() {
        for dtype in [
            DType::Bool,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::F64,
            DType::Bytes,
        ] {
            assert_eq!(DType::from(WitDtype::from(dtype)), dtype);
        }
    }
}

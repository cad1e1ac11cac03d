//! A tensor's elements: a `Vec<T>`, or the wire bytes the host wrote into this instance's
//! memory, read in place.
//!
//! The host hands each argument's data over as a `list<u8>`. Decoding those bytes into a
//! `Vec<f32>` would copy every byte once more into as much fresh memory again: for a 16 MiB
//! argument, 16 MiB of new pages the kernel must zero, then a copy, and the same again to encode
//! an output (docs/benchmarks.md, row P4). For the plain numeric types (every bit pattern a
//! value, no padding), on a little-endian target (wasm32 is one), the wire bytes already are the
//! elements' memory, so a tensor keeps them and views them as `[T]` when they are aligned for
//! `T`, and an output built from them goes back as those same bytes.

use std::slice;

use crate::dtype::check_len;
use crate::{Element, Error};

/// The elements of a tensor, in row-major order.
pub(crate) enum Elements<T: Element> {
    /// Elements as Rust values.
    Owned(Vec<T>),
    /// The wire bytes of the elements, read in place. Only ever built by
    /// [`Elements::from_wire`], which checks that `T` is plain ([`Element::IN_PLACE`]), that the
    /// bytes start aligned for `T`, and that they hold a whole number of elements.
    Wire(Vec<u8>),
}

impl<T: Element> Elements<T> {
    /// The elements of `count` values in `bytes`, their wire form: kept as they are where they can
    /// be read in place, else decoded. Fails as [`Element::decode`] does.
    pub(crate) fn from_wire(bytes: Vec<u8>, count: usize) -> Result<Self, Error> {
        if Self::readable_in_place(&bytes) {
            check_len(&bytes, count, size_of::<T>())?;
            return Ok(Elements::Wire(bytes));
        }
        T::decode(bytes, count).map(Elements::Owned)
    }

    /// Whether `bytes` can be read as `[T]` where they are: `T` is plain and they start aligned
    /// for it.
    fn readable_in_place(bytes: &[u8]) -> bool {
        T::IN_PLACE && size_of::<T>() > 0 && bytes.as_ptr().cast::<T>().is_aligned()
    }

    /// How many elements there are.
    pub(crate) fn len(&self) -> usize {
        match self {
            Elements::Owned(v) => v.len(),
            Elements::Wire(bytes) => bytes.len() / size_of::<T>(),
        }
    }

    /// The elements as a slice.
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Elements::Owned(v) => v,
            // SAFETY: `from_wire` admitted these bytes only for a plain `T` (every bit pattern
            // of `size_of::<T>()` bytes is a valid `T` in the target's little-endian layout,
            // which is the wire's), starting aligned for `T`, and holding `len()` whole elements.
            // The slice borrows `self`, so the bytes outlive it and are not changed meanwhile.
            Elements::Wire(bytes) => unsafe {
                slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.len())
            },
        }
    }

    /// The elements as a mutable slice.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        let len = self.len();
        match self {
            Elements::Owned(v) => v,
            // SAFETY: as in `as_slice`; any `T` written is again valid bytes, and the mutable
            // borrow of `self` makes the slice the only access to them.
            Elements::Wire(bytes) => unsafe {
                slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), len)
            },
        }
    }

    /// The elements as a `Vec<T>`: a copy when they are read in place.
    pub(crate) fn into_vec(self) -> Vec<T> {
        match self {
            Elements::Owned(v) => v,
            Elements::Wire(_) => self.as_slice().to_vec(),
        }
    }

    /// The wire bytes of the elements: the same bytes when they are read in place, without a
    /// copy. Fails as [`Element::encode`] does.
    pub(crate) fn into_wire(self) -> Result<Vec<u8>, Error> {
        match self {
            Elements::Owned(v) => T::encode(v),
            Elements::Wire(bytes) => Ok(bytes),
        }
    }
}

impl<T: Element> Clone for Elements<T> {
    /// Always owned: a copy of wire bytes would not be known to be aligned for `T`.
    fn clone(&self) -> Self {
        Elements::Owned(self.as_slice().to_vec())
    }
}

impl<T: Element> std::fmt::Debug for Elements<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<T: Element> PartialEq for Elements<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f32` wire bytes in a buffer that starts aligned for `f32` (as the host's allocation does).
    fn aligned_wire(values: &[f32]) -> Vec<u8> {
        let bytes = f32::encode(values.to_vec()).unwrap();
        assert!(
            bytes.as_ptr().cast::<f32>().is_aligned(),
            "the test's buffer"
        );
        bytes
    }

    #[test]
    fn aligned_plain_bytes_are_read_in_place_and_returned_as_they_came() {
        let bytes = aligned_wire(&[1.5, -2.0, 3.25]);
        let address = bytes.as_ptr();
        let mut e = Elements::<f32>::from_wire(bytes, 3).unwrap();
        assert!(matches!(e, Elements::Wire(_)));
        assert_eq!(e.as_slice(), &[1.5, -2.0, 3.25]);
        e.as_mut_slice()[1] = 4.0;
        assert_eq!(e.len(), 3);
        let back = e.into_wire().unwrap();
        assert_eq!(back.as_ptr(), address, "no copy on the way out");
        assert_eq!(f32::decode(back, 3).unwrap(), [1.5, 4.0, 3.25]);
    }

    #[test]
    fn only_aligned_bytes_of_a_plain_type_are_read_in_place() {
        let bytes = aligned_wire(&[7.0, 8.0]);
        assert!(Elements::<f32>::readable_in_place(&bytes));
        assert!(!Elements::<f32>::readable_in_place(&bytes[1..]));
        assert!(!Elements::<f32>::readable_in_place(&bytes[2..6]));
        assert!(Elements::<i8>::readable_in_place(&bytes[1..]));
        assert!(!Elements::<bool>::readable_in_place(&bytes));
        assert!(!Elements::<String>::readable_in_place(&bytes));
    }

    #[test]
    fn the_element_count_is_checked_in_place_too() {
        let err = Elements::<f32>::from_wire(aligned_wire(&[1.0, 2.0]), 3).unwrap_err();
        assert_eq!(err.message(), "3 elements need 12 bytes of data, got 8");
    }

    #[test]
    fn types_with_invalid_bit_patterns_are_always_decoded() {
        assert!(matches!(
            Elements::<bool>::from_wire(vec![0, 1], 2).unwrap(),
            Elements::Owned(_)
        ));
        assert!(Elements::<bool>::from_wire(vec![2], 1).is_err());
    }

    #[test]
    fn a_clone_or_a_vec_is_an_owned_copy() {
        let e = Elements::<f32>::from_wire(aligned_wire(&[1.0, 2.0]), 2).unwrap();
        let c = e.clone();
        assert!(matches!(c, Elements::Owned(_)));
        assert!(c == e);
        assert_eq!(e.into_vec(), [1.0, 2.0]);
    }
}

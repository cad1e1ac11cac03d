//! The binary encoding of a list of tensors, as workers of a cluster carry a call's arguments and
//! outputs to each other over NATS (never JSON): each tensor its dtype's name, its shape and its raw
//! little-endian data, copied once into and out of the message. Part of the contract because two
//! builds of wasmrpc in one cluster must read each other; golden files
//! (`tests/golden/tensor_list/`) pin it.
//!
//! ```text
//! "WRT1" u32:count { u8:len dtype-name  u8:rank u64:dim*rank  u64:len data }*count   (little-endian)
//! ```
//!
//! Decoding checks every length against what is left and every tensor against its dtype and shape
//! ([`Tensor::from_raw`]); nothing is allocated for a length the message does not hold.

use crate::{DType, Tensor};
use bytes::{Buf as _, BufMut as _, Bytes};

/// The first four bytes of every message, and its version.
pub const MAGIC: &[u8; 4] = b"WRT1";

/// A message that is not a list of tensors in this encoding.
#[derive(Debug, thiserror::Error)]
#[error("bad tensor message: {0}")]
pub struct TensorListError(String);

/// The bytes of `tensors`.
///
/// # Panics
/// With 2^32 tensors or more, a tensor of rank 256 or more, or a dtype name over 255 bytes:
/// none of these can be made from the contract's types and limits.
pub fn encode(tensors: &[Tensor]) -> Bytes {
    let size = 8 + tensors
        .iter()
        .map(|t| 1 + t.dtype().name().len() + 1 + 8 * t.shape().len() + 8 + t.raw_data().len())
        .sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.put_u32_le(u32::try_from(tensors.len()).expect("fewer than 2^32 tensors"));
    for t in tensors {
        let name = t.dtype().name();
        out.put_u8(u8::try_from(name.len()).expect("dtype names are short"));
        out.extend_from_slice(name.as_bytes());
        out.put_u8(u8::try_from(t.shape().len()).expect("a rank under 256"));
        for &d in t.shape() {
            out.put_u64_le(d);
        }
        out.put_u64_le(t.raw_data().len() as u64);
        out.extend_from_slice(t.raw_data());
    }
    Bytes::from(out)
}

/// The tensors of `message`; their data shares the message's buffer.
///
/// # Errors
/// A message cut short, with trailing bytes, an unknown dtype or data that does not fit its shape.
pub fn decode(message: &Bytes) -> Result<Vec<Tensor>, TensorListError> {
    let mut buf = message.clone();
    let need = |buf: &Bytes, n: usize| {
        if buf.remaining() < n {
            Err(TensorListError("cut short".into()))
        } else {
            Ok(())
        }
    };
    need(&buf, 8)?;
    if &buf[..4] != MAGIC {
        return Err(TensorListError("not a tensor list".into()));
    }
    buf.advance(4);
    let count = buf.get_u32_le() as usize;
    let mut out = Vec::with_capacity(count.min(buf.remaining() / 11));
    for _ in 0..count {
        need(&buf, 1)?;
        let len = usize::from(buf.get_u8());
        need(&buf, len + 1)?;
        let name = std::str::from_utf8(&buf[..len]).map_err(|e| TensorListError(e.to_string()))?;
        let dtype: DType = name.parse().map_err(|e| TensorListError(format!("{e}")))?;
        buf.advance(len);
        let rank = usize::from(buf.get_u8());
        need(&buf, 8 * rank + 8)?;
        let shape: Vec<u64> = (0..rank).map(|_| buf.get_u64_le()).collect();
        let len = usize::try_from(buf.get_u64_le()).map_err(|e| TensorListError(e.to_string()))?;
        need(&buf, len)?;
        let data = buf.split_to(len);
        out.push(Tensor::from_raw(dtype, shape, data).map_err(|e| TensorListError(e.to_string()))?);
    }
    if buf.has_remaining() {
        return Err(TensorListError("trailing bytes".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_of_every_kind_round_trip() {
        let tensors = vec![
            Tensor::from_vec([2, 2], vec![1i32, 2, 3, 4]).unwrap(),
            Tensor::scalar(0.5f64),
            Tensor::from_strings([2], ["a", "bc"]).unwrap(),
            Tensor::from_vec([0, 3], Vec::<f32>::new()).unwrap(),
        ];
        let bytes = encode(&tensors);
        assert_eq!(decode(&bytes).unwrap(), tensors);
        assert!(decode(&encode(&[])).unwrap().is_empty());
    }

    #[test]
    fn damaged_messages_are_refused() {
        let bytes = encode(&[Tensor::from_vec([2], vec![1i32, 2]).unwrap()]);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes.slice(..cut)).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(decode(&Bytes::from(longer)).is_err());
        // A count or length far past the message allocates nothing and fails.
        let mut huge = bytes.to_vec();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&Bytes::from(huge)).is_err());
    }
}

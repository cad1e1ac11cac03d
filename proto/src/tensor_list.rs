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

use crate::tensor::MAX_RANK;
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
/// # Errors
/// A tensor of more than [`MAX_RANK`] dimensions (the format carries at most 255, and no tensor
/// built or parsed by this crate has more than 64; one from elsewhere, say a `From` conversion
/// of an array, still gets an error here rather than a panic), 2^32 tensors or more, or a dtype
/// name over 255 bytes.
pub fn encode(tensors: &[Tensor]) -> Result<Bytes, TensorListError> {
    let count = u32::try_from(tensors.len())
        .map_err(|_| TensorListError(format!("{} tensors are too many", tensors.len())))?;
    let mut size = 8usize;
    for (i, t) in tensors.iter().enumerate() {
        if t.shape().len() > MAX_RANK {
            return Err(TensorListError(format!(
                "tensor {i} has {} dimensions; at most {MAX_RANK} (MAX_RANK) are carried",
                t.shape().len()
            )));
        }
        size += 1 + t.dtype().name().len() + 1 + 8 * t.shape().len() + 8 + t.raw_data().len();
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.put_u32_le(count);
    for t in tensors {
        let name = t.dtype().name();
        let name_len = u8::try_from(name.len())
            .map_err(|_| TensorListError(format!("dtype name `{name}` is too long")))?;
        out.put_u8(name_len);
        out.extend_from_slice(name.as_bytes());
        // At most MAX_RANK, checked above.
        out.put_u8(t.shape().len() as u8);
        for &d in t.shape() {
            out.put_u64_le(d);
        }
        out.put_u64_le(t.raw_data().len() as u64);
        out.extend_from_slice(t.raw_data());
    }
    Ok(Bytes::from(out))
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
        if rank > MAX_RANK {
            return Err(TensorListError(format!(
                "a tensor of rank {rank}; at most {MAX_RANK} (MAX_RANK)"
            )));
        }
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
        let bytes = encode(&tensors).unwrap();
        assert_eq!(decode(&bytes).unwrap(), tensors);
        assert!(decode(&encode(&[]).unwrap()).unwrap().is_empty());
    }

    #[test]
    fn damaged_messages_are_refused() {
        let bytes = encode(&[Tensor::from_vec([2], vec![1i32, 2]).unwrap()]).unwrap();
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

    /// Before issue 32, a tensor of rank 256 or more panicked the encoder (`u8::try_from(rank)
    /// .expect(..)`) on `?worker=` calls and outputs served for another worker. The checked
    /// constructors now refuse such a tensor, but one can still be made without them
    /// (`Tensor::from_ndarray` of an array of any rank), so the encoder must answer with an
    /// error, never a panic.
    #[test]
    fn a_tensor_of_rank_256_or_more_is_an_error_not_a_panic() {
        for rank in [MAX_RANK + 1, 255, 256, 1000] {
            let tensor = Tensor::from_elements(vec![1; rank], std::iter::once(7u8));
            let err = encode(&[Tensor::scalar(1u8), tensor]).unwrap_err();
            assert!(
                err.to_string()
                    .contains(&format!("tensor 1 has {rank} dimensions")),
                "{err}"
            );
        }
        let widest = Tensor::from_elements(vec![1; MAX_RANK], std::iter::once(7u8));
        let read = decode(&encode(std::slice::from_ref(&widest)).unwrap()).unwrap();
        assert_eq!(read, [widest]);
    }

    #[test]
    fn a_rank_over_the_limit_is_refused_before_its_dimensions_are_read() {
        let mut bytes = encode(&[Tensor::scalar(1u8)]).unwrap().to_vec();
        // MAGIC, count, name length, "uint8", then the rank byte.
        let rank_at = 4 + 4 + 1 + "uint8".len();
        assert_eq!(bytes[rank_at], 0);
        bytes[rank_at] = 255;
        let err = decode(&Bytes::from(bytes)).unwrap_err();
        assert!(err.to_string().contains("rank 255"), "{err}");
    }
}

//! Large buffers kept for the next large output, their pages resident.
//!
//! A call's large outputs are copied out of the guest into these (`runtime/outputs.rs`). A
//! buffer goes back to the pool when the last `Bytes` of it is dropped (once the answer is
//! written), so the next large output is written into pages that are already there instead of
//! faulting fresh ones in. At most [`POOLED_BUFFERS_MAX`] idle buffers and [`POOLED_BYTES_MAX`]
//! bytes are kept.

use std::sync::{Mutex, OnceLock};

use bytes::Bytes;

/// Idle buffers the pool keeps at most.
pub const POOLED_BUFFERS_MAX: usize = 8;

/// Bytes of idle buffers the pool keeps at most: past it a buffer coming back is freed.
pub const POOLED_BYTES_MAX: usize = 256 << 20;

/// Large buffers kept for the next large output, their pages resident.
#[derive(Debug, Default)]
pub struct BufferPool {
    idle: Mutex<Vec<Vec<u8>>>,
}

/// The process's pool: outputs are lifted where no runtime is at hand.
pub fn pool() -> &'static BufferPool {
    static POOL: OnceLock<BufferPool> = OnceLock::new();
    POOL.get_or_init(BufferPool::default)
}

impl BufferPool {
    /// `src` in a buffer of the pool (the smallest idle one it fits, else a new one), which comes
    /// back to the pool when the last `Bytes` of it is dropped.
    pub fn filled_with(&'static self, src: &[u8]) -> Bytes {
        let mut buffer = self.take(src.len());
        buffer.clear();
        buffer.extend_from_slice(src);
        Bytes::from_owner(Pooled { buffer, pool: self })
    }

    fn take(&self, len: usize) -> Vec<u8> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let best = idle
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => idle.swap_remove(i),
            None => Vec::with_capacity(len),
        }
    }

    /// Keep `buffer` if the pool has room for it, else free it.
    fn give_back(&self, buffer: Vec<u8>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let kept: usize = idle.iter().map(Vec::capacity).sum();
        if idle.len() < POOLED_BUFFERS_MAX
            && kept.saturating_add(buffer.capacity()) <= POOLED_BYTES_MAX
        {
            idle.push(buffer);
        }
    }

    /// Idle buffers, and their capacity in bytes.
    #[cfg(test)]
    fn idle(&self) -> (usize, usize) {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        (idle.len(), idle.iter().map(Vec::capacity).sum())
    }
}

/// A pooled buffer lent to one output's `Bytes`.
struct Pooled {
    buffer: Vec<u8>,
    pool: &'static BufferPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked() -> &'static BufferPool {
        Box::leak(Box::default())
    }

    #[test]
    fn a_buffer_comes_back_and_is_reused_with_only_the_new_bytes_visible() {
        let pool = leaked();
        let first = pool.filled_with(&[7u8; 1 << 20]);
        let address = first.as_ptr();
        assert_eq!(pool.idle(), (0, 0));
        drop(first);
        assert_eq!(pool.idle().0, 1);
        let second = pool.filled_with(&[1, 2, 3]);
        assert_eq!(second.as_ptr(), address, "the idle buffer is reused");
        assert_eq!(&second[..], &[1, 2, 3], "and only the new bytes show");
        assert_eq!(pool.idle().0, 0);
    }

    #[test]
    fn a_slice_keeps_its_buffer_lent_until_the_last_one_goes() {
        let pool = leaked();
        let whole = pool.filled_with(&[5u8; 1 << 20]);
        let part = whole.slice(10..20);
        drop(whole);
        assert_eq!(pool.idle().0, 0);
        assert_eq!(&part[..], &[5u8; 10]);
        drop(part);
        assert_eq!(pool.idle().0, 1);
    }

    #[test]
    fn the_pool_keeps_at_most_its_count_and_bytes() {
        let pool = leaked();
        let many: Vec<_> = (0..POOLED_BUFFERS_MAX + 3)
            .map(|_| pool.filled_with(&[0u8; 1 << 20]))
            .collect();
        drop(many);
        assert_eq!(pool.idle().0, POOLED_BUFFERS_MAX);
        let pool = leaked();
        let big: Vec<_> = (0..3)
            .map(|_| pool.filled_with(&vec![0u8; POOLED_BYTES_MAX / 2]))
            .collect();
        drop(big);
        let (count, bytes) = pool.idle();
        assert_eq!(count, 2);
        assert!(bytes <= POOLED_BYTES_MAX);
    }

    #[test]
    fn the_smallest_buffer_that_fits_is_taken() {
        let pool = leaked();
        let (big, small) = (
            pool.filled_with(&vec![0u8; 8 << 20]),
            pool.filled_with(&vec![0u8; 1 << 20]),
        );
        let small_address = small.as_ptr();
        drop((big, small));
        assert_eq!(pool.filled_with(&[9u8; 1000]).as_ptr(), small_address);
    }
}

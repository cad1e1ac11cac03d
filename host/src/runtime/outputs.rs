//! A call's outputs, lifted out of the guest's memory: one `memcpy` each, into buffers whose
//! pages are already there.
//!
//! The generated bindings lift each output's `list<u8>` into a fresh `Vec<u8>`, a byte at a
//! time. Over HTTP that `Vec` is freed on another thread once the answer is written, and a
//! profile showed every 16 MiB output faulting 4,096 fresh pages in on the host, one by one
//! (docs/benchmarks.md, "Pages kept for the next call"). So `call` is typed with [`TensorOut`] instead, whose data
//! is an [`OutputData`]: its lift checks the list as wasmtime does (type, bounds, the copy budget
//! of wasmtime's hostcall fuel) and copies the bytes with one `memcpy`, into a buffer of
//! [`BufferPool`] when they are large. A buffer goes back to the pool when the last `Bytes` of
//! it is dropped, so the next large output is written into pages that are resident.
//!
//! The copy has to happen inside the lift. wasmtime runs the guest's post-return function (which
//! frees the returned lists, and a freed block may be written over by the guest's allocator)
//! before `call_async` returns, so a view into the guest's memory would be stale by then.
//!
//! `OutputData` implements wasmtime's `ComponentType` and `Lift` by hand, through the
//! `wasmtime::component::__internal` items its derive macros use; wasmtime is pinned to one
//! version (`Cargo.toml`), and the implementation delegates every check to `WasmList<u8>`.

use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use wasmtime::Store;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentType, Instance, Lift, TypedFunc, WasmList,
};

use super::bindings::{Dtype, GuestError, TensorParam};
use super::sandbox::CallState;

/// Outputs of at least this many bytes are copied into a pooled buffer; smaller ones into a
/// fresh allocation (the allocator keeps small blocks warm by itself).
pub const POOLED_MIN_BYTES: usize = 256 << 10;

/// Idle buffers the pool keeps at most.
pub const POOLED_BUFFERS_MAX: usize = 8;

/// Bytes of idle buffers the pool keeps at most: past it a buffer coming back is freed.
pub const POOLED_BYTES_MAX: usize = 256 << 20;

/// One output tensor as the guest returned it: the WIT `tensor` record, its data copied out.
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TensorOut {
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    pub data: OutputData,
}

/// A component's `call` export with its outputs lifted as [`TensorOut`]s.
pub type CallFunc<'a> =
    TypedFunc<(&'a str, &'a [TensorParam<'a>]), (Result<Vec<TensorOut>, GuestError>,)>;

/// The name of the interface a guest exports, as the WIT package spells it.
const METHOD_INTERFACE: &str = "wasmrpc:tensor/method@0.1.0";

/// Where a component's `call` export is, found once per component, and whether its type has been
/// checked against [`CallFunc`] yet.
#[derive(Debug)]
pub struct CallExport {
    index: ComponentExportIndex,
    checked: OnceLock<()>,
}

impl CallExport {
    /// The `call` export of `component`'s method interface, if it has one (every component the
    /// bindings accepted does).
    pub fn find(component: &Component) -> Option<CallExport> {
        let interface = component.get_export_index(None, METHOD_INTERFACE)?;
        let index = component.get_export_index(Some(&interface), "call")?;
        Some(CallExport {
            index,
            checked: OnceLock::new(),
        })
    }

    /// The export in `instance`, typed. Its type is checked on the component's first call only:
    /// every instance of one component has the same types, and the check costs a few percent of
    /// a small call.
    pub fn get<'a>(
        &self,
        instance: &Instance,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<CallFunc<'a>> {
        let func = instance
            .get_func(&mut *store, self.index)
            .ok_or_else(|| wasmtime::format_err!("the component exports no `call`"))?;
        if self.checked.get().is_some() {
            // SAFETY: `func` is the same export of the same component as the one checked below,
            // on this component's first call.
            return Ok(unsafe { TypedFunc::new_unchecked(func) });
        }
        let typed = func.typed(&*store)?;
        let _ = self.checked.set(());
        Ok(typed)
    }
}

/// An output's bytes, copied out of the guest's memory while the result was lifted.
pub struct OutputData(Bytes);

impl OutputData {
    /// The bytes.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// How many bytes.
    pub fn byte_len(&self) -> usize {
        self.0.len()
    }

    /// Copy `len` bytes at `ptr` out of `memory` (already bounds-checked by `WasmList`).
    fn copied(memory: &[u8], ptr: usize, len: usize) -> OutputData {
        let src = &memory[ptr..][..len];
        if len < POOLED_MIN_BYTES {
            return OutputData(Bytes::copy_from_slice(src));
        }
        OutputData(pool().filled_with(src))
    }
}

// SAFETY: the same ABI and type check as `WasmList<u8>` (a `list<u8>`), to which both defer.
unsafe impl ComponentType for OutputData {
    type Lower = <WasmList<u8> as ComponentType>::Lower;

    const ABI: CanonicalAbiInfo = <WasmList<u8> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <WasmList<u8> as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifting defers to `WasmList<u8>` (type, alignment, bounds, hostcall fuel) and then only
// reads the bytes it vouched for.
unsafe impl Lift for OutputData {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<u8>::linear_lift_from_flat(cx, ty, src)?;
        let ptr = src[0].get_u32() as usize;
        Ok(OutputData::copied(cx.memory(), ptr, list.len()))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<u8>::linear_lift_from_memory(cx, ty, bytes)?;
        let ptr = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        Ok(OutputData::copied(cx.memory(), ptr, list.len()))
    }
}

/// Large buffers kept for the next large output, their pages resident.
#[derive(Debug, Default)]
pub struct BufferPool {
    idle: Mutex<Vec<Vec<u8>>>,
}

/// The process's pool: outputs are lifted where no runtime is at hand.
fn pool() -> &'static BufferPool {
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

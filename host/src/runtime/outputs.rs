//! A call's outputs, lifted out of the guest's memory: one `memcpy` each, into buffers whose
//! pages are already there.
//!
//! The generated bindings lift each output's `list<u8>` into a fresh `Vec<u8>`, a byte at a
//! time. Over HTTP that `Vec` is freed on another thread once the answer is written, and a
//! profile showed every 16 MiB output faulting 4,096 fresh pages in on the host, one by one
//! (docs/benchmarks.md, "Pages kept for the next call"). So `call` is typed with [`TensorOut`]
//! instead, whose data is an [`OutputData`]: its lift checks the list as wasmtime does (type,
//! bounds, the copy budget of wasmtime's hostcall fuel) and copies the bytes with one `memcpy`,
//! into a buffer of the pool (`runtime/buffers.rs`) when they are large.
//!
//! The copy has to happen inside the lift. wasmtime runs the guest's post-return function (which
//! frees the returned lists, and a freed block may be written over by the guest's allocator)
//! before `call_async` returns, so a view into the guest's memory would be stale by then.
//!
//! `OutputData` implements wasmtime's `ComponentType` and `Lift` by hand, through the
//! `wasmtime::component::__internal` items its derive macros use; wasmtime is pinned to one
//! version (`Cargo.toml`), and the implementation delegates every check to `WasmList<u8>`.

use std::sync::OnceLock;

use bytes::Bytes;
use wasmtime::Store;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentType, Instance, Lift, TypedFunc, WasmList,
};

use super::bindings::{Dtype, GuestError, TensorParam};
use super::buffers;
use super::lifted::{
    DataField, DtypeField, ErrorField, Field, Items, Lifted, OutputsField, ShapeField,
};
use super::sandbox::CallState;

/// Outputs of at least this many bytes are copied into a pooled buffer; smaller ones into a
/// fresh allocation (the allocator keeps small blocks warm by itself).
pub const POOLED_MIN_BYTES: usize = 256 << 10;

/// One output tensor as the guest returned it: the WIT `tensor` record, its data copied out.
/// Each field names itself when the guest's value is malformed there (`runtime/lifted.rs`).
#[derive(ComponentType, Lift)]
#[component(record)]
pub struct TensorOut {
    pub dtype: Field<Dtype, DtypeField>,
    pub shape: Field<Vec<u64>, ShapeField>,
    pub data: Field<OutputData, DataField>,
}

/// What `call` returns: the outputs, or the guest's error. A value that does not lift is a
/// `MalformedValue` saying where (`outputs[0].data`, `error`).
pub type CallResult =
    Lifted<Result<Field<Items<TensorOut>, OutputsField>, Field<GuestError, ErrorField>>>;

/// A component's `call` export with its outputs lifted as [`TensorOut`]s.
pub type CallFunc<'a> = TypedFunc<(&'a str, &'a [TensorParam<'a>]), (CallResult,)>;

/// The name of the interface a guest exports, as the WIT package spells it.
pub const METHOD_INTERFACE: &str = "wasmrpc:tensor/method@0.1.0";

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
        OutputData(buffers::pool().filled_with(src))
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

//! What a guest returns, lifted into types that make a malformed value the guest's own fault,
//! typed ([`MalformedValue`]) and said where in the value it is.
//!
//! wasmtime 48 reports a returned value that breaks the canonical ABI with an error of no type of
//! its own (`bail!`), the kind it also uses for failures of its own: a string or list outside the
//! guest's memory ("string pointer/length out of bounds of memory", "list pointer/length out of
//! bounds of memory"), a list not aligned for its elements ("list pointer is not aligned"), an
//! enum or variant case out of range ("unexpected discriminant: 14", from the `ComponentType`
//! derive), an option or result discriminant out of range ("invalid option discriminant",
//! "invalid expected discriminant"); invalid UTF-8 comes as `core::str::Utf8Error`. Telling them
//! apart by their text is not how the runtime classifies (`Runtime::classify`), and telling them
//! apart by when they happen does not hold either (see [`MalformedValue`]). So the result types
//! the runtime lifts wrap the parts of the value: an error that comes out of lifting a part is,
//! by construction, about that part, and becomes a [`MalformedValue`] whose path names the part.
//!
//! The wrappers implement wasmtime's `ComponentType` and `Lift` by hand, through the
//! `wasmtime::component::__internal` items its derive macros use (as `runtime/outputs.rs` does):
//! each delegates the type check, the ABI and every check of the value to the type it wraps and
//! only adds the part's name to an error; a value that lifts costs nothing more.

use std::fmt;
use std::marker::PhantomData;

use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext, bad_type_info,
};
use wasmtime::component::{ComponentType, Lift, WasmList};

use super::bindings::Dtype;

/// A value the guest returned that breaks the canonical ABI: lifting it failed on the guest's
/// own bytes, not on anything of the host's.
///
/// Made only inside the lift of the wrappers below, which run after the guest's export has
/// returned and read nothing but its memory. The rule "an untyped error after instantiation
/// comes from lifting the result" does not hold in wasmtime 48, which is why this type exists:
/// the same untyped errors come from lifting the arguments a guest passes to an import (a `log`
/// line outside its memory), from checking what the guest's `cabi_realloc` returned while the
/// host lowers the arguments, and, untyped too, from the host itself (an on-demand fiber stack
/// whose `mmap` fails, with `pooling: false`). Only two checks of a returned value happen outside
/// these wrappers, in `TypedFunc::lift_heap_result` before any of them runs: the return area's
/// own pointer ("return pointer not aligned", "pointer out of bounds of memory"), which
/// `Runtime::classify_export_call` gives to the guest by when the error came (see there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedValue {
    /// Where, innermost step first (the error travels outwards, each wrapper adds its step).
    path: Vec<Step>,
    /// What wasmtime found wrong, in its words.
    problem: String,
}

/// One step into a value: a record's field, or a list's element.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(&'static str),
    Index(usize),
}

impl MalformedValue {
    /// Where in the value the problem is, as a path from the value's root (`[0].inputs[1].name`,
    /// `outputs[0].data`); empty for the value itself.
    pub fn place(&self) -> String {
        let mut place = String::new();
        for step in self.path.iter().rev() {
            match step {
                Step::Field(name) if place.is_empty() => place.push_str(name),
                Step::Field(name) => {
                    place.push('.');
                    place.push_str(name);
                }
                Step::Index(i) => place.push_str(&format!("[{i}]")),
            }
        }
        place
    }

    /// What is wrong there, in wasmtime's words.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The value as a whole is malformed: `problem` was found before any part of it could be
    /// read (the return area's own pointer; see `Runtime::describe`).
    pub fn whole(problem: String) -> MalformedValue {
        MalformedValue {
            path: Vec::new(),
            problem,
        }
    }

    /// A value malformed at `place` (written out whole), for other modules' tests.
    #[cfg(test)]
    pub fn for_test(problem: &str, place: &'static str) -> MalformedValue {
        MalformedValue {
            path: vec![Step::Field(place)],
            problem: problem.to_owned(),
        }
    }
}

impl fmt::Display for MalformedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problem)?;
        let place = self.place();
        if !place.is_empty() {
            write!(f, " (at `{place}`)")?;
        }
        Ok(())
    }
}

impl std::error::Error for MalformedValue {}

/// `error`, which came out of lifting a part of the guest's value, as a [`MalformedValue`] one
/// `step` further out. Running out of host memory is the host's, and passes through untouched.
fn at(mut error: wasmtime::Error, step: Option<Step>) -> wasmtime::Error {
    if let Some(malformed) = error.downcast_mut::<MalformedValue>() {
        malformed.path.extend(step);
        return error;
    }
    if error.is::<wasmtime::OutOfMemory>() {
        return error;
    }
    // Everything else a lift can fail with is about the guest's bytes: the bounds, alignment,
    // discriminant and UTF-8 checks above, or the hostcall fuel that caps how much one lift
    // copies (wasmtime's `HostcallFuelExhausted`, a private type), which only a guest returning
    // too much exhausts.
    wasmtime::Error::new(MalformedValue {
        path: step.into_iter().collect(),
        problem: format!("{error:#}"),
    })
}

/// The whole value a guest's export returned: any failure to lift it is a [`MalformedValue`].
pub struct Lifted<T>(pub T);

// SAFETY: the same ABI and type check as `T`, to which both defer.
unsafe impl<T: ComponentType> ComponentType for Lifted<T> {
    type Lower = T::Lower;

    const ABI: CanonicalAbiInfo = T::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        T::typecheck(ty, types)
    }
}

// SAFETY: lifting is `T`'s, and only its error is changed.
unsafe impl<T: Lift> Lift for Lifted<T> {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        T::linear_lift_from_flat(cx, ty, src)
            .map(Lifted)
            .map_err(|e| at(e, None))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        T::linear_lift_from_memory(cx, ty, bytes)
            .map(Lifted)
            .map_err(|e| at(e, None))
    }
}

/// The name of a record's field, for [`Field`].
pub trait FieldName: Send + Sync + 'static {
    /// The field's name as the WIT package spells it.
    const NAME: &'static str;
}

/// Field names, each a type for [`Field`].
macro_rules! field_names {
    ($($marker:ident = $name:literal,)*) => {$(
        #[doc = concat!("The field `", $name, "`.")]
        pub struct $marker;

        impl FieldName for $marker {
            const NAME: &'static str = $name;
        }
    )*};
}

field_names! {
    NameField = "name",
    InputsField = "inputs",
    OutputsField = "outputs",
    DocField = "doc",
    DtypeField = "dtype",
    ShapeField = "shape",
    DataField = "data",
    ErrorField = "error",
}

/// A part of a record (or of a result, for its cases) whose lift failures name it.
pub struct Field<T, N: FieldName>(T, PhantomData<N>);

impl<T, N: FieldName> Field<T, N> {
    /// The lifted value.
    pub fn into_inner(self) -> T {
        self.0
    }

    /// The lifted value.
    pub fn get(&self) -> &T {
        &self.0
    }
}

// SAFETY: the same ABI and type check as `T`, to which both defer.
unsafe impl<T: ComponentType, N: FieldName> ComponentType for Field<T, N> {
    type Lower = T::Lower;

    const ABI: CanonicalAbiInfo = T::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        T::typecheck(ty, types)
    }
}

// SAFETY: lifting is `T`'s, and only its error is changed.
unsafe impl<T: Lift, N: FieldName> Lift for Field<T, N> {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        T::linear_lift_from_flat(cx, ty, src)
            .map(|v| Field(v, PhantomData))
            .map_err(|e| at(e, Some(Step::Field(N::NAME))))
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        T::linear_lift_from_memory(cx, ty, bytes)
            .map(|v| Field(v, PhantomData))
            .map_err(|e| at(e, Some(Step::Field(N::NAME))))
    }
}

/// A `list<T>` whose lift failures name the element.
pub struct Items<T>(pub Vec<T>);

// SAFETY: the same ABI and type check as `WasmList<T>` (a `list<T>`), to which both defer.
unsafe impl<T: ComponentType> ComponentType for Items<T> {
    type Lower = <WasmList<T> as ComponentType>::Lower;

    const ABI: CanonicalAbiInfo = <WasmList<T> as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <WasmList<T> as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: `WasmList<T>` checks the list (type, bounds, alignment, hostcall fuel) and each element
// is lifted from the bytes it vouched for, as wasmtime's own `Vec<T>` does.
unsafe impl<T: Lift> Lift for Items<T> {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &Self::Lower,
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<T>::linear_lift_from_flat(cx, ty, src)?;
        let ptr = src[0].get_u32() as usize;
        Items::lift_elements(cx, ty, ptr, list.len())
    }

    fn linear_lift_from_memory(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        bytes: &[u8],
    ) -> wasmtime::Result<Self> {
        let list = WasmList::<T>::linear_lift_from_memory(cx, ty, bytes)?;
        let ptr = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        Items::lift_elements(cx, ty, ptr, list.len())
    }
}

impl<T: Lift> Items<T> {
    /// The `len` elements at `ptr`, already checked to lie in memory, aligned.
    fn lift_elements(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        ptr: usize,
        len: usize,
    ) -> wasmtime::Result<Self> {
        let elem = match ty {
            InterfaceType::List(i) => cx.types[i].element,
            _ => bad_type_info(),
        };
        let mut items = Vec::with_capacity(len);
        for i in 0..len {
            let bytes = &cx.memory()[ptr + i * T::SIZE32..][..T::SIZE32];
            let item = T::linear_lift_from_memory(cx, elem, bytes)
                .map_err(|e| at(e, Some(Step::Index(i))))?;
            items.push(item);
        }
        Ok(Items(items))
    }
}

/// The WIT `tensor-spec` record, as `signatures()` returns it.
#[derive(wasmtime::component::ComponentType, wasmtime::component::Lift)]
#[component(record)]
pub struct SpecOut {
    pub name: Field<String, NameField>,
    pub dtype: Field<Dtype, DtypeField>,
    pub shape: Field<Option<Items<Option<u64>>>, ShapeField>,
}

/// The WIT `method-signature` record, as `signatures()` returns it.
#[derive(wasmtime::component::ComponentType, wasmtime::component::Lift)]
#[component(record)]
pub struct SignatureOut {
    pub name: Field<String, NameField>,
    pub inputs: Field<Items<SpecOut>, InputsField>,
    pub outputs: Field<Items<SpecOut>, OutputsField>,
    pub doc: Field<String, DocField>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_place_reads_as_a_path_from_the_values_root() {
        let value = MalformedValue {
            path: vec![
                Step::Field("name"),
                Step::Index(1),
                Step::Field("inputs"),
                Step::Index(0),
            ],
            problem: "invalid utf-8 sequence of 1 bytes from index 0".into(),
        };
        assert_eq!(value.place(), "[0].inputs[1].name");
        assert_eq!(
            value.to_string(),
            "invalid utf-8 sequence of 1 bytes from index 0 (at `[0].inputs[1].name`)"
        );
        let whole = MalformedValue {
            path: vec![],
            problem: "list pointer is not aligned".into(),
        };
        assert_eq!(whole.to_string(), "list pointer is not aligned");
    }

    #[test]
    fn a_lift_failure_becomes_malformed_once_and_gathers_its_path() {
        let inner = at(
            wasmtime::format_err!("string pointer/length out of bounds of memory"),
            Some(Step::Field("data")),
        );
        let outer = at(at(inner, Some(Step::Index(2))), None);
        let value = outer
            .downcast_ref::<MalformedValue>()
            .expect("typed as malformed");
        assert_eq!(value.place(), "[2].data");
        assert_eq!(
            value.problem(),
            "string pointer/length out of bounds of memory"
        );
        // The host running out of memory stays the host's.
        let oom = at(
            wasmtime::Error::new(wasmtime::OutOfMemory::new(64)),
            Some(Step::Index(0)),
        );
        assert!(!oom.is::<MalformedValue>());
    }
}

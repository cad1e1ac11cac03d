//! Write wasmrpc tensor functions in Rust and export them as WebAssembly components.
//!
//! A function is a plain Rust `fn` over [`Tensor`]s, marked with [`#[method]`](method); a crate
//! lists the functions it offers with [`export!`]. Built with
//! `cargo build --target wasm32-wasip2 --release`, the crate (a `cdylib`) becomes a component
//! implementing the `tensor-function` world of `wit/tensor.wit`, ready to upload to a wasmrpc
//! server.
//!
//! ```
//! use wasmrpc_guest::{Error, Tensor};
//!
//! /// Element-wise sum of two tensors of the same shape.
//! #[wasmrpc_guest::method]
//! fn add(a: Tensor<i32>, b: Tensor<i32>) -> Result<Tensor<i32>, Error> {
//!     a.zip_with(&b, |x, y| x.wrapping_add(y))
//! }
//!
//! wasmrpc_guest::export!(add);
//! # fn main() {
//! # let sum = add(Tensor::from_vec(vec![1, 2]), Tensor::from_vec(vec![3, 4])).unwrap();
//! # assert_eq!(sum.as_slice(), &[4, 6]);
//! # }
//! ```
//!
//! The function stays an ordinary Rust function, so native unit tests call it directly
//! (`cargo test`). The attribute derives the method's signature (argument names, dtypes, the doc
//! comment) and the glue that decodes the arguments, checks them and encodes the outputs; a
//! component built with this crate needs no other dependency.
//!
//! # Building a component
//!
//! The guest crate is a `cdylib` (add `rlib` to keep native unit tests and doctests working) whose
//! only dependency is this crate:
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib", "rlib"]
//!
//! [dependencies]
//! # not on crates.io yet: point at a checkout of this repository
//! wasmrpc-guest = { path = "../wasmrpc/guest-sdk" }
//! ```
//!
//! `cargo build --target wasm32-wasip2 --release` then writes the component to
//! `target/wasm32-wasip2/release/<crate>.wasm` (`rustup target add wasm32-wasip2` once). Besides
//! the `wasmrpc:tensor` interfaces (`types` always, `log` if used), such a component imports only
//! what Rust's standard library links for stdio and exit: `wasi:io/{poll,error,streams}` and
//! `wasi:cli/{environment,exit,stdin,stdout,stderr,terminal-*}`. Using `std::fs` or `std::net`
//! adds `wasi:filesystem` or `wasi:sockets` imports, which a wasmrpc server refuses.
//!
//! `wasmrpc build -p <crate>` builds the same crate for `wasm32-unknown-unknown` and wraps it into
//! a component that imports no WASI at all, cheaper to instantiate for every call. On that target
//! this crate brings the global allocator (feature `heap`, on by default: a heap made for one call
//! per instance) and sends panic messages to the host (`wit/panic/report.wit`), since there is no
//! stderr (docs/writing-functions.md, "Without WASI"). A component built so that does not call
//! [`log`] imports nothing at all.
//!
//! On other targets [`export!`] defines no component exports, so the same crate builds natively
//! for `cargo test`.
//!
//! # Modules
//!
//! | item | what |
//! |---|---|
//! | [`Tensor`], [`tensor`] | the typed, owned, row-major tensor a method takes and returns |
//! | [`Element`], [`DType`], [`dtype`] | the element types and their wire encoding |
//! | [`Error`], [`error`] | why a method failed, one case per canonical code |
//! | [`log`] | log lines captured by the host |
//! | [`method`], [`export!`] | the attribute and the export list |
//!
//! # What a method may look like
//!
//! Every parameter is a `Tensor<T>` taken by value, where `T` is an [`Element`]; the return type is
//! a `Tensor<T>`, a tuple of them, or either inside `Result<_, Error>`. Anything else is a compile
//! error pointing at the offending token:
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! fn scale(x: Tensor<f32>, factor: f32) -> Tensor<f32> { x }
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! fn first<T>(x: Tensor<f32>) -> Tensor<f32> { x }
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! async fn later(x: Tensor<f32>) -> Tensor<f32> { x }
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! fn nothing(x: Tensor<f32>) {}
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! fn chars(x: Tensor<char>) -> Tensor<char> { x } // `char` is not an Element
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method(y = [_, 3])] // no parameter or output named `y`
//! fn echo(x: Tensor<f32>) -> Tensor<f32> { x }
//! ```
//!
//! Method names follow the one rule the server and clients share
//! (`wasmrpc_proto::names::NAME_RULE`: letters, digits, `_`, `-`, `.`, starting with a letter or
//! digit, at most 128), whether they come from the function or from `name = "..."`:
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method]
//! fn _private(x: Tensor<f32>) -> Tensor<f32> { x } // starts with `_`
//! ```
//!
//! ```compile_fail
//! # use wasmrpc_guest::Tensor;
//! #[wasmrpc_guest::method(name = "a/b")]
//! fn slash(x: Tensor<f32>) -> Tensor<f32> { x }
//! ```

extern crate self as wasmrpc_guest;

pub mod dtype;
mod elements;
pub mod error;
#[cfg(any(test, all(target_arch = "wasm32", target_os = "unknown")))]
mod heap;
pub mod log;
pub mod tensor;

#[doc(hidden)]
pub mod __private;

/// The bindings generated from `wit/tensor.wit`. Not part of the API: use the hand-written types of
/// this crate instead.
#[doc(hidden)]
#[allow(clippy::all, missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "tensor-function",
        pub_export_macro: true,
        default_bindings_module: "::wasmrpc_guest::bindings",
        runtime_path: "::wasmrpc_guest::__private::wit_bindgen::rt",
    });
}

/// The bindings generated from `wit/panic/report.wit`, the panic hook's channel to the host. Not
/// part of the API.
#[doc(hidden)]
#[allow(clippy::all, missing_docs)]
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
pub mod panic_bindings {
    wit_bindgen::generate!({
        path: "../wit/panic",
        world: "report-panics",
        runtime_path: "::wasmrpc_guest::__private::wit_bindgen::rt",
    });
}

pub use dtype::{DType, Element};
pub use error::Error;
/// Re-export of the [`half`](https://docs.rs/half) crate, for the `f16` and `bf16` element types.
pub use half;
pub use tensor::Tensor;

/// Marks a function as a wasmrpc method.
///
/// ```
/// use wasmrpc_guest::{Error, Tensor};
///
/// /// Matrix product of two 2-D tensors.
/// #[wasmrpc_guest::method(a = [_, _], b = [_, _], output = [_, _])]
/// fn matmul(a: Tensor<f32>, b: Tensor<f32>) -> Result<Tensor<f32>, Error> {
///     # let _ = b;
///     # Ok(a)
///     // ...
/// }
/// # fn main() {}
/// ```
///
/// The function is left as written; the attribute adds a hidden item that [`export!`] uses. Its
/// parameters must each be a `Tensor<T>` bound to a plain name (`x` or `mut x`), its return type a
/// `Tensor<T>`, a tuple of them, or either inside `Result<_, Error>`; no generics, `async`,
/// `unsafe` or `self`.
///
/// # Options
///
/// - `name = "other"`: the method's name (default: the function's name).
/// - `<param> = [_, 3]`: the declared shape of a parameter; `_` is a dimension of any size, an
///   integer a fixed size, `[]` a scalar. The call fails with `invalid-argument` when an argument
///   does not match. Without it, a parameter takes any shape.
/// - `outputs = ["values", "indices"]`: the names of the outputs (default `output` for one
///   output, `output_0`, `output_1`… for a tuple).
/// - `<output name> = [_, _]`: the declared shape of an output; returning another shape is an
///   `internal` error.
///
/// The method's documentation, as the host shows it, is the function's doc comment.
pub use wasmrpc_guest_macro::method;

/// Exports the listed [`#[method]`](method) functions as this crate's component.
///
/// ```
/// # use wasmrpc_guest::Tensor;
/// # #[wasmrpc_guest::method] fn add(a: Tensor<i32>) -> Tensor<i32> { a }
/// # mod ops { use wasmrpc_guest::Tensor;
/// # #[wasmrpc_guest::method] pub(crate) fn sub(a: Tensor<i32>) -> Tensor<i32> { a } }
/// wasmrpc_guest::export!(add, ops::sub);
/// # fn main() {}
/// ```
///
/// Use it once per crate. The component's `signatures()` lists the methods in this order; `call`
/// dispatches on the method name and answers `not-found` for any other name. Two methods with the
/// same name are a compile error:
///
/// ```compile_fail
/// # use wasmrpc_guest::Tensor;
/// #[wasmrpc_guest::method] fn add(a: Tensor<i32>) -> Tensor<i32> { a }
/// #[wasmrpc_guest::method(name = "add")] fn plus(a: Tensor<i32>) -> Tensor<i32> { a }
/// wasmrpc_guest::export!(add, plus);
/// # fn main() {}
/// ```
pub use wasmrpc_guest_macro::export;

/// The Rust examples of `docs/writing-functions.md`, compiled as doc tests so the guide cannot
/// drift from the SDK. (Fragments that are not whole programs are marked `ignore` there.)
#[cfg(doctest)]
#[doc = include_str!("../../docs/writing-functions.md")]
mod writing_functions_examples {}

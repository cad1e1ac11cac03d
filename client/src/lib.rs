//! Rust client for wasmrpc.
//!
//! The wire types ([`Tensor`], [`DType`], [`Code`], [`MethodSignature`], the messages) come from
//! the contract crate `wasmrpc-proto`, which the server builds on too, so both sides always
//! agree; they are re-exported here, so a client needs no other crate.
//!
//! The client mirrors TensorFlow's `tf.distribute.experimental.rpc.Client`: [`Client`] is async
//! (tokio), [`blocking::Client`] is the same API for programs without a runtime.
//!
//! | TensorFlow | wasmrpc-client |
//! |---|---|
//! | `Client.create("grpc", address, name)` | [`Client::create`]`("http", address, name, timeout)` |
//! | `client.call(args, method_name, output_specs, timeout_in_ms)` | [`Client::call`]`(method_name, args, output_specs, timeout)` → [`StatusOrResult`] |
//! | `result.is_ok()`, `get_error()`, `get_value()` | [`StatusOrResult::is_ok`], [`get_error`](StatusOrResult::get_error), [`get_value`](StatusOrResult::get_value) |
//! | `client.addition(a, b)` | [`Client::method`]`("addition")?.`[`call`](MethodHandle::call)`(vec![a, b])` |
//! | `client.addition_blocking(a, b)` | [`MethodHandle::call_blocking`]`(vec![a, b])` |
//! | `client.list_registered_methods()` | [`Client::list_registered_methods`] |
//!
//! The rpc layer is `"http"` (HTTP/2 with prior knowledge) or `"https"` (HTTP/2 over TLS,
//! verified against the webpki roots; [`Client::create_with_options`] with [`ClientOptions`]
//! trusts a private CA too).
//!
//! Errors carry the canonical codes TensorFlow and gRPC share ([`Code`]). With the cargo feature
//! `ndarray`, tensors convert to and from `ndarray::ArrayD`.
//!
//! ```no_run
//! use std::time::Duration;
//! use wasmrpc_client::{Tensor, blocking::Client};
//!
//! # fn main() -> Result<(), wasmrpc_client::Error> {
//! let client = Client::create("http", "127.0.0.1:8080", "demo", Duration::from_secs(5))?;
//! let sum = client.method("addition")?.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])?;
//! assert_eq!(sum[0].to_vec::<i32>()?, vec![5]);
//! # Ok(()) }
//! ```

#![warn(missing_docs, clippy::missing_errors_doc, clippy::missing_panics_doc)]

pub mod blocking;
pub mod client;
pub mod transport;

pub use client::{Client, ClientOptions, MethodHandle, StatusOrResult};
pub use wasmrpc_proto::{
    CallRequest, CallResponse, Code, DType, DeleteResponse, Dim, Element, ErrorBody, MethodInfo,
    MethodList, MethodSignature, Tensor, TensorError, TensorSpec,
};
pub use wasmrpc_proto::{code, dtype, headers, json, names, signature, tensor};

/// The one error type of the client: a canonical [`Code`] and a message (the contract's
/// [`wasmrpc_proto::Status`]).
pub use wasmrpc_proto::Status as Error;

/// The error type and the JSON error body, under the names this crate has always used.
pub mod error {
    pub use wasmrpc_proto::Status as Error;
    pub use wasmrpc_proto::status::{ErrorBody, ErrorDetail};
}

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
//! | `Client.create("grpc", address, name)` | [`Client::create`]`("grpc", address, name, timeout)` (or `"http"`) |
//! | `client.call(args, method_name, output_specs, timeout_in_ms)` | [`Client::call`]`(method_name, args, output_specs, timeout)` → [`StatusOrResult`] |
//! | `result.is_ok()`, `get_error()`, `get_value()` | [`StatusOrResult::is_ok`], [`get_error`](StatusOrResult::get_error), [`get_value`](StatusOrResult::get_value) |
//! | `client.addition(a, b)` | [`Client::method`]`("addition")?.`[`call`](MethodHandle::call)`(vec![a, b])` |
//! | `client.addition_blocking(a, b)` | [`MethodHandle::call_blocking`]`(vec![a, b])` |
//! | `client.list_registered_methods()` | [`Client::list_registered_methods`] |
//!
//! The rpc layer is `"http"` (HTTP/2 with prior knowledge), `"https"` (HTTP/2 over TLS,
//! verified against the webpki roots), or `"grpc"` and `"grpcs"`: the same connections, every
//! call a gRPC `ModelInfer` of the Open Inference Protocol ([`grpc`]). Everything beyond TF's four arguments, such as an API key
//! or a private CA to trust, goes through one builder, [`Client::builder`] (and
//! [`blocking::Client::builder`]):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! let client = wasmrpc_client::Client::builder("https", "localhost:8443")
//!     .name("demo")
//!     .timeout(Duration::from_secs(5))
//!     .key("my-tenant-key")
//!     .ca_cert_pem(std::fs::read("ca.pem")?)
//!     .connect()
//!     .await?;
//! # Ok(()) }
//! ```
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
/// HTTP bodies both ways (the contract crate's, shared with the server).
pub use wasmrpc_proto::body;
pub mod client;
pub mod cluster;
mod connection;
pub mod grpc;
mod options;
pub mod trace;
pub mod transport;

#[cfg(test)]
mod test_support;

pub use client::{Client, ClientBuilder, MethodHandle, StatusOrResult};
pub use options::{ClientOptions, Encoding};
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

// The README's Rust examples (this crate's and the embedded server's) are compiled as doc tests
// of `wasmrpc-host`, the one crate that builds both.

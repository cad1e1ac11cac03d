//! Rust client for wasmrpc, and the wire types the server shares with it.
//!
//! The types here ([`Tensor`], [`DType`], [`Code`], [`MethodSignature`]) are the JSON model of the
//! HTTP API; the server uses the same definitions, so both sides always agree.
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

#[cfg(feature = "ndarray")]
mod array;
pub mod blocking;
pub mod client;
pub mod code;
pub mod dtype;
pub mod error;
pub mod json;
pub mod signature;
pub mod tensor;
pub mod transport;

pub use client::{Client, ClientOptions, MethodHandle, StatusOrResult};
pub use code::Code;
pub use dtype::DType;
pub use error::{Error, ErrorBody};
pub use signature::{Dim, MethodInfo, MethodSignature, TensorSpec};
pub use tensor::{Element, Tensor, TensorError};

/// The request body of `POST /v1/methods/{name}/call`.
///
/// ```
/// use wasmrpc_client::{CallRequest, Tensor};
/// let body = CallRequest { args: vec![Tensor::scalar(2i32)], timeout_ms: 500 };
/// assert_eq!(serde_json::to_string(&body).unwrap(),
///            r#"{"args":[{"dtype":"int32","shape":[],"data":[2]}],"timeout_ms":500}"#);
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CallRequest {
    /// Positional arguments.
    pub args: Vec<Tensor>,
    /// Deadline in milliseconds; 0 means the server's default.
    #[serde(default)]
    pub timeout_ms: u64,
}

/// The response body of a successful call.
///
/// ```
/// use wasmrpc_client::{CallResponse, Tensor};
/// let r: CallResponse =
///     serde_json::from_str(r#"{"outputs":[{"dtype":"int32","shape":[2],"data":[11,22]}]}"#).unwrap();
/// assert_eq!(r.outputs, vec![Tensor::vector(vec![11i32, 22])]);
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CallResponse {
    /// The outputs, in order.
    pub outputs: Vec<Tensor>,
}

/// The response body of `GET /v1/methods`.
///
/// ```
/// let list: wasmrpc_client::MethodList = serde_json::from_str(r#"{"methods":[]}"#).unwrap();
/// assert!(list.methods.is_empty());
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MethodList {
    /// Every registered method, newest version of each, sorted by name.
    pub methods: Vec<MethodInfo>,
}

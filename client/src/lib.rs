//! Rust client for wasmrpc, and the wire types the server shares with it.
//!
//! The types here ([`Tensor`], [`DType`], [`Code`], [`MethodSignature`]) are the JSON model of the
//! HTTP API; the server uses the same definitions, so both sides always agree.

pub mod client;
pub mod code;
pub mod dtype;
pub mod error;
pub mod json;
pub mod signature;
pub mod tensor;
pub mod transport;

pub use client::{Client, MethodHandle, StatusOrResult};
pub use code::Code;
pub use dtype::DType;
pub use error::{Error, ErrorBody};
pub use signature::{Dim, MethodInfo, MethodSignature, TensorSpec};
pub use tensor::{Element, Tensor, TensorError};

/// The request body of `POST /v1/methods/{name}/call`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CallRequest {
    /// Positional arguments.
    pub args: Vec<Tensor>,
    /// Deadline in milliseconds; 0 means the server's default.
    #[serde(default)]
    pub timeout_ms: u64,
}

/// The response body of a successful call.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CallResponse {
    /// The outputs, in order.
    pub outputs: Vec<Tensor>,
}

/// The response body of `GET /v1/methods`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MethodList {
    /// Every registered method, newest version of each, sorted by name.
    pub methods: Vec<MethodInfo>,
}

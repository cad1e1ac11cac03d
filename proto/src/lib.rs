//! The wire contract of wasmrpc: what the server, every client and the stored examples agree on.
//!
//! Dtypes, tensors, canonical codes with their HTTP mapping, the status and its JSON error body,
//! method signatures and metadata, the request and response messages of the v1 API, the one rule
//! for method names, the header names, and the v1 JSON codec. It knows nothing of HTTP clients,
//! servers, storage or wasm: the server (`wasmrpc-host`) and the Rust client (`wasmrpc-client`,
//! which re-exports all of it) both sit on top of it.
//!
//! The files under `proto/tests/golden/` are golden wire examples (requests, responses, errors)
//! that this crate's tests check both ways; clients in other languages are tested against them too.
//!
//! ```
//! use wasmrpc_proto::{CallRequest, Code, Status, Tensor};
//! let request: CallRequest = serde_json::from_str(
//!     r#"{"args":[{"dtype":"int32","shape":[2],"data":[1,2]}],"timeout_ms":500}"#,
//! ).unwrap();
//! assert_eq!(request.args[0], Tensor::vector(vec![1i32, 2]));
//! let status = Status::new(Code::NotFound, "no method named `nope` is registered");
//! assert_eq!(status.code().http_status(), 404);
//! ```

#![warn(missing_docs, clippy::missing_errors_doc, clippy::missing_panics_doc)]

#[cfg(feature = "ndarray")]
mod array;
pub mod body;
pub mod cluster;
pub mod code;
pub mod dtype;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod headers;
pub mod json;
pub mod kserve;
pub mod kserve_repository;
pub mod messages;
pub mod names;
pub mod signature;
pub mod status;
pub mod tensor;
pub mod tensor_list;

pub use code::Code;
pub use dtype::DType;
pub use messages::{CallRequest, CallResponse, DeleteResponse, MethodList};
pub use signature::{Dim, MethodInfo, MethodSignature, TensorSpec};
pub use status::{ErrorBody, ErrorDetail, Status};
pub use tensor::{Element, Tensor, TensorError};

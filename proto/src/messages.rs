//! The request and response bodies of the v1 API, as they travel in JSON.
//!
//! Tensors inside them use the v1 JSON codec ([`crate::json`]); errors use
//! [`ErrorBody`](crate::ErrorBody).

use crate::signature::MethodInfo;
use crate::tensor::Tensor;

/// The request body of `POST /v1/methods/{name}/call`.
///
/// ```
/// use wasmrpc_proto::{CallRequest, Tensor};
/// let body = CallRequest { args: vec![Tensor::scalar(2i32)], timeout_ms: 500 };
/// assert_eq!(serde_json::to_string(&body).unwrap(),
///            r#"{"args":[{"dtype":"int32","shape":[],"data":[2]}],"timeout_ms":500}"#);
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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
/// use wasmrpc_proto::{CallResponse, Tensor};
/// let r: CallResponse =
///     serde_json::from_str(r#"{"outputs":[{"dtype":"int32","shape":[2],"data":[11,22]}]}"#).unwrap();
/// assert_eq!(r.outputs, vec![Tensor::vector(vec![11i32, 22])]);
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CallResponse {
    /// The outputs, in order.
    pub outputs: Vec<Tensor>,
}

/// The response body of `GET /v1/methods`.
///
/// ```
/// let list: wasmrpc_proto::MethodList = serde_json::from_str(r#"{"methods":[]}"#).unwrap();
/// assert!(list.methods.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MethodList {
    /// Every registered method, newest version of each, sorted by name.
    pub methods: Vec<MethodInfo>,
}

/// The response body of `DELETE /v1/methods/{name}`.
///
/// ```
/// use wasmrpc_proto::DeleteResponse;
/// let body = DeleteResponse { deleted_versions: vec![1, 2], name: "add".into() };
/// assert_eq!(serde_json::to_string(&body).unwrap(),
///            r#"{"deleted_versions":[1,2],"name":"add"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteResponse {
    /// The versions that were removed, oldest first.
    pub deleted_versions: Vec<u32>,
    /// The name they were registered under.
    pub name: String,
}

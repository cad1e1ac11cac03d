//! The Open Inference Protocol (KServe v2) messages: server and model metadata, the Triton-style
//! model config, and (in [`infer`]) infer requests and responses, JSON and binary.
//!
//! A method is a model and its versions are the model's versions (as strings, as the protocol
//! spells them). Datatypes use the protocol's names (`FP32`, `INT64`, `BYTES`…); a dynamic
//! dimension is `-1`, and an input that accepts any rank is shown as `[-1]`. Values are checked
//! exactly as in v1 ([`crate::json`]): every one must fit its datatype, and the count must match
//! the shape. `data` may be flat or nested, row-major.
//!

pub mod infer;

pub use infer::{
    EncodedRequest, EncodedResponse, InferInput, InferOutput, InferRequest, InferRequestError,
    InferResponse, RequestedOutput, decode_infer_request, decode_infer_response,
    encode_infer_request, encode_infer_response,
};

use crate::dtype::DType;
use crate::signature::{Dim, MethodInfo, TensorSpec};

/// `GET /v2`: who the server is and which protocol extensions it implements.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerMetadata {
    /// `wasmrpc`.
    pub name: String,
    /// The server's version.
    pub version: String,
    /// Exactly the extensions implemented.
    pub extensions: Vec<String>,
}

/// One input or output in model metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MetadataTensor {
    /// Its name.
    pub name: String,
    /// Its datatype, as the protocol spells it.
    pub datatype: String,
    /// Its shape; `-1` for a dynamic dimension, `[-1]` for any rank.
    pub shape: Vec<i64>,
}

impl From<&TensorSpec> for MetadataTensor {
    fn from(spec: &TensorSpec) -> Self {
        MetadataTensor {
            name: spec.name.clone(),
            datatype: spec.dtype.kserve_name().to_string(),
            shape: kserve_shape(spec),
        }
    }
}

fn kserve_shape(spec: &TensorSpec) -> Vec<i64> {
    match &spec.shape {
        None => vec![-1],
        Some(dims) => dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                Dim::Dynamic => -1,
            })
            .collect(),
    }
}

/// The platform every wasmrpc model reports.
pub const PLATFORM: &str = "wasmrpc_wasm";

/// `GET /v2/models/{name}[/versions/{v}]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelMetadata {
    /// The model's (method's) name.
    pub name: String,
    /// Every version, oldest first.
    pub versions: Vec<String>,
    /// [`PLATFORM`].
    pub platform: String,
    /// Its inputs, in the order the method takes them.
    pub inputs: Vec<MetadataTensor>,
    /// Its outputs, in the order the method returns them.
    pub outputs: Vec<MetadataTensor>,
}

impl From<&MethodInfo> for ModelMetadata {
    fn from(info: &MethodInfo) -> Self {
        ModelMetadata {
            name: info.name.clone(),
            versions: info.versions.iter().map(u32::to_string).collect(),
            platform: PLATFORM.to_string(),
            inputs: info.signature.inputs.iter().map(Into::into).collect(),
            outputs: info.signature.outputs.iter().map(Into::into).collect(),
        }
    }
}

/// One input or output in a Triton-style model config.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConfigTensor {
    /// Its name.
    pub name: String,
    /// `TYPE_FP32`, `TYPE_STRING`…
    pub data_type: String,
    /// Its dimensions, never empty: a scalar is `[1]`, any rank `[-1]`.
    pub dims: Vec<i64>,
}

/// `GET /v2/models/{name}/config`: the minimal Triton model config that clients read before
/// inferring.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelConfig {
    /// The model's name.
    pub name: String,
    /// [`PLATFORM`].
    pub platform: String,
    /// Always 0: wasmrpc methods take whole tensors, with no batch dimension of their own.
    pub max_batch_size: u32,
    /// Inputs.
    pub input: Vec<ConfigTensor>,
    /// Outputs.
    pub output: Vec<ConfigTensor>,
}

/// Triton's config name of a datatype (`TYPE_FP32`; `BYTES` is `TYPE_STRING`).
pub fn triton_type(dtype: DType) -> String {
    match dtype {
        DType::String => "TYPE_STRING".to_string(),
        other => format!("TYPE_{}", other.kserve_name()),
    }
}

impl From<&MethodInfo> for ModelConfig {
    fn from(info: &MethodInfo) -> Self {
        let tensors = |specs: &[TensorSpec]| {
            specs
                .iter()
                .map(|spec| {
                    let dims = kserve_shape(spec);
                    ConfigTensor {
                        name: spec.name.clone(),
                        data_type: triton_type(spec.dtype),
                        dims: if dims.is_empty() { vec![1] } else { dims },
                    }
                })
                .collect()
        };
        ModelConfig {
            name: info.name.clone(),
            platform: PLATFORM.to_string(),
            max_batch_size: 0,
            input: tensors(&info.signature.inputs),
            output: tensors(&info.signature.outputs),
        }
    }
}

/// A v2 error body: `{"error": "<message>"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

//! The Open Inference Protocol (KServe v2) messages, JSON form: server and model metadata, the
//! Triton-style model config, and infer requests and responses.
//!
//! A method is a model and its versions are the model's versions (as strings, as the protocol
//! spells them). Datatypes use the protocol's names (`FP32`, `INT64`, `BYTES`…); a dynamic
//! dimension is `-1`, and an input that accepts any rank is shown as `[-1]`. Values are checked
//! exactly as in v1 ([`crate::json`]): every one must fit its datatype, and the count must match
//! the shape. `data` may be flat or nested, row-major.
//!
//! ```
//! use wasmrpc_proto::kserve::decode_infer_request;
//! let body = br#"{"id": "7", "inputs": [
//!     {"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]}],
//!     "parameters": {"timeout": 2000000}}"#;
//! let request = decode_infer_request(body).unwrap();
//! assert_eq!(request.inputs[0].name, "a");
//! assert_eq!(request.timeout_us, Some(2_000_000));
//! ```

use serde_json::value::RawValue;

use crate::dtype::DType;
use crate::json::build_tensor;
use crate::signature::{Dim, MethodInfo, TensorSpec};
use crate::tensor::{Tensor, TensorError};

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

/// One named input of an infer request.
#[derive(Debug, Clone, PartialEq)]
pub struct InferInput {
    /// The input's name, matched to the signature.
    pub name: String,
    /// Its value.
    pub tensor: Tensor,
}

/// A decoded `POST /v2/models/{name}/infer` body.
#[derive(Debug, Clone, PartialEq)]
pub struct InferRequest {
    /// Echoed in the response.
    pub id: Option<String>,
    /// The inputs, in the order sent.
    pub inputs: Vec<InferInput>,
    /// The outputs asked for, in the order wanted (`None`: all, in signature order).
    pub outputs: Option<Vec<String>>,
    /// `parameters.timeout`: the call's deadline in microseconds, as Triton uses it.
    pub timeout_us: Option<u64>,
}

/// Why an infer request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferRequestError {
    /// The body is not an infer request (not JSON, wrong structure).
    #[error("the body is not a valid inference request: {0}")]
    Body(String),
    /// One input is not a valid tensor.
    #[error("input `{name}`: {error}")]
    Input {
        /// The input's name.
        name: String,
        /// What is wrong with it.
        error: TensorError,
    },
}

#[derive(serde::Deserialize)]
struct RawRequest<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(borrow)]
    inputs: Vec<RawInput<'a>>,
    #[serde(default)]
    outputs: Option<Vec<RawOutput>>,
    #[serde(default)]
    parameters: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(serde::Deserialize)]
struct RawInput<'a> {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    // Accepted; none changes how an input is read yet.
    #[serde(default, rename = "parameters")]
    _parameters: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct RawOutput {
    name: String,
    #[serde(default, rename = "parameters")]
    _parameters: Option<serde::de::IgnoredAny>,
}

/// Decode an infer request, every input value checked.
///
/// # Errors
/// [`InferRequestError::Body`] when the body is not an infer request (including a `timeout`
/// parameter that is not a non-negative integer), [`InferRequestError::Input`] naming the first
/// input that is not a valid tensor.
pub fn decode_infer_request(body: &[u8]) -> Result<InferRequest, InferRequestError> {
    let raw: RawRequest<'_> =
        serde_json::from_slice(body).map_err(|e| InferRequestError::Body(e.to_string()))?;
    let timeout_us = match raw.parameters.as_ref().and_then(|p| p.get("timeout")) {
        None => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| {
            InferRequestError::Body(format!(
                "parameters.timeout must be a whole number of microseconds, not {v}"
            ))
        })?),
    };
    let inputs = raw
        .inputs
        .into_iter()
        .map(|input| {
            let fail = |error| InferRequestError::Input {
                name: input.name.clone(),
                error,
            };
            let dtype = DType::from_kserve_name(&input.datatype).ok_or_else(|| {
                fail(TensorError::Value(format!(
                    "unknown datatype `{}`; use one of {}",
                    input.datatype,
                    DType::ALL.map(DType::kserve_name).join(", ")
                )))
            })?;
            let data = input.data.ok_or_else(|| {
                fail(TensorError::Value(
                    "no `data` (binary tensor data is not supported yet)".into(),
                ))
            })?;
            let tensor =
                build_tensor(dtype, input.shape.clone(), Some(data.get()), None).map_err(&fail)?;
            Ok(InferInput {
                name: input.name,
                tensor,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(InferRequest {
        id: raw.id,
        inputs,
        outputs: raw
            .outputs
            .map(|outputs| outputs.into_iter().map(|o| o.name).collect()),
        timeout_us,
    })
}

/// One named output of an infer response; serializes as `{"name", "datatype", "shape", "data"}`
/// with `data` flat.
#[derive(Debug, Clone, PartialEq)]
pub struct InferOutput {
    /// The output's name from the signature.
    pub name: String,
    /// Its value.
    pub tensor: Tensor,
}

impl serde::Serialize for InferOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("datatype", self.tensor.dtype().kserve_name())?;
        map.serialize_entry("shape", self.tensor.shape())?;
        map.serialize_entry("data", &crate::json::FlatData::new(&self.tensor)?)?;
        map.end()
    }
}

/// The body of a successful infer response.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InferResponse {
    /// The model's name.
    pub model_name: String,
    /// The version that ran.
    pub model_version: String,
    /// The request's `id`, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The outputs.
    pub outputs: Vec<InferOutput>,
}

/// A v2 error body: `{"error": "<message>"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

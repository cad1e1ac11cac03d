//! Infer requests and responses, in the JSON form and the binary tensor data extension.
//!
//! In the binary form a body is a JSON header, its length given by the HTTP header
//! `Inference-Header-Content-Length`, followed by the raw data of every input whose
//! `parameters.binary_data_size` is set, in the order of the inputs. Raw data is exactly a
//! [`Tensor`]'s layout: little-endian, row-major, and for `BYTES` each element a 4-byte
//! little-endian length and then its bytes. A binary input is therefore a slice of the body,
//! checked against its datatype and shape but never copied; JSON and binary inputs mix freely.
//!
//! Responses put an output in binary when the request asks for it, per output
//! (`outputs[i].parameters.binary_data`) or for all (`parameters.binary_data_output`).
//! Sizes are 64-bit throughout: a header length or `binary_data_size` past the body is refused
//! by comparison, never by wrapping.
//!
//! ```
//! use bytes::Bytes;
//! use wasmrpc_proto::kserve::decode_infer_request;
//! let header = br#"{"id": "7", "inputs": [
//!     {"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]},
//!     {"name": "b", "datatype": "INT32", "shape": [2], "parameters": {"binary_data_size": 8}}],
//!     "parameters": {"timeout": 2000000}}"#;
//! let mut body = header.to_vec();
//! body.extend_from_slice(&[3, 0, 0, 0, 4, 0, 0, 0]);
//! let request = decode_infer_request(&Bytes::from(body), Some(header.len() as u64)).unwrap();
//! assert_eq!(request.inputs[1].tensor.to_vec::<i32>().unwrap(), vec![3, 4]);
//! assert_eq!(request.id.as_deref(), Some("7"));
//! assert_eq!(request.timeout_us, Some(2_000_000));
//! ```

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::dtype::DType;
use crate::json::build_tensor;
use crate::tensor::{Tensor, TensorError};

/// One named input of an infer request.
#[derive(Debug, Clone, PartialEq)]
pub struct InferInput {
    /// The input's name, matched to the signature.
    pub name: String,
    /// Its value.
    pub tensor: Tensor,
}

/// An output named in the request's `outputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedOutput {
    /// The output's name.
    pub name: String,
    /// `parameters.binary_data`, when given: whether this output comes back binary.
    pub binary_data: Option<bool>,
}

/// A decoded `POST /v2/models/{name}/infer` body.
#[derive(Debug, Clone, PartialEq)]
pub struct InferRequest {
    /// Echoed in the response.
    pub id: Option<String>,
    /// The inputs, in the order sent.
    pub inputs: Vec<InferInput>,
    /// The outputs asked for, in the order wanted (`None`: all, in signature order).
    pub outputs: Option<Vec<RequestedOutput>>,
    /// `parameters.timeout`: the call's deadline in microseconds, as Triton uses it.
    pub timeout_us: Option<u64>,
    /// `parameters.binary_data_output`: outputs come back binary unless one says otherwise.
    pub binary_data_output: bool,
}

impl InferRequest {
    /// Whether `output` (one of [`InferRequest::outputs`], or `None` for an output the request
    /// did not name) is to be answered in binary.
    pub fn wants_binary(&self, output: Option<&RequestedOutput>) -> bool {
        output
            .and_then(|o| o.binary_data)
            .unwrap_or(self.binary_data_output)
    }
}

/// Why an infer request could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferRequestError {
    /// The body is not an infer request (not JSON, wrong structure, binary data that does not
    /// add up).
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
    parameters: Option<Map<String, Value>>,
}

#[derive(serde::Deserialize)]
struct RawInput<'a> {
    name: String,
    datatype: String,
    // Read up to MAX_RANK + 1 dimensions, never a whole shape of megabytes.
    #[serde(deserialize_with = "crate::json::bounded_shape")]
    shape: Vec<i64>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

#[derive(serde::Deserialize)]
struct RawOutput {
    name: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

/// Decode an infer request, every input value checked.
///
/// `header_length` is the `Inference-Header-Content-Length` header: the JSON header is that
/// many bytes at the start of `body`, and binary input data follows it. Without it the whole
/// body is JSON. Binary inputs are slices of `body` (no copy).
///
/// # Errors
/// [`InferRequestError::Body`] when the body is not an infer request: not JSON, a header length
/// past the body, binary data no input claims, a parameter of the wrong type.
/// [`InferRequestError::Input`] naming the first input that is not a valid tensor, including
/// binary data that disagrees with its datatype and shape or runs past the body.
pub fn decode_infer_request(
    body: &Bytes,
    header_length: Option<u64>,
) -> Result<InferRequest, InferRequestError> {
    let body_error = |m: String| InferRequestError::Body(m);
    let (header, binary) = split_header(body, header_length)?;
    let raw: RawRequest<'_> =
        serde_json::from_slice(header).map_err(|e| body_error(e.to_string()))?;
    let parameters = raw.parameters.unwrap_or_default();
    let timeout_us = optional_u64(&parameters, "timeout").map_err(|v| {
        body_error(format!(
            "parameters.timeout must be a whole number of microseconds, not {v}"
        ))
    })?;
    let binary_data_output = optional_bool(&parameters, "binary_data_output")
        .map_err(|v| {
            body_error(format!(
                "parameters.binary_data_output must be true or false, not {v}"
            ))
        })?
        .unwrap_or(false);
    let inputs = named_tensors(raw.inputs, header_length.is_some(), binary, "input")?;
    let outputs = raw
        .outputs
        .map(|outputs| {
            outputs
                .into_iter()
                .map(|o| requested_output(o).map_err(body_error))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok(InferRequest {
        id: raw.id,
        inputs,
        outputs,
        timeout_us,
        binary_data_output,
    })
}

/// The JSON header and the binary data after it.
fn split_header(
    body: &Bytes,
    header_length: Option<u64>,
) -> Result<(&[u8], Bytes), InferRequestError> {
    match header_length {
        None => Ok((&body[..], Bytes::new())),
        Some(n) if n > body.len() as u64 => Err(InferRequestError::Body(format!(
            "Inference-Header-Content-Length is {n}, past the end of the {}-byte body",
            body.len()
        ))),
        // At most the body's length, so it fits in usize.
        Some(n) => Ok((&body[..n as usize], body.slice(n as usize..))),
    }
}

/// Each named tensor of a request's inputs or a response's outputs (`what`), binary ones cut
/// from the front of `binary` in order; binary data no tensor claims is refused.
fn named_tensors(
    raw: Vec<RawInput<'_>>,
    has_binary_part: bool,
    mut binary: Bytes,
    what: &str,
) -> Result<Vec<InferInput>, InferRequestError> {
    let tensors = raw
        .into_iter()
        .map(|input| {
            let tensor = input_tensor(&input, has_binary_part, &mut binary).map_err(|error| {
                InferRequestError::Input {
                    name: input.name.clone(),
                    error,
                }
            })?;
            Ok(InferInput {
                name: input.name,
                tensor,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if !binary.is_empty() {
        return Err(InferRequestError::Body(format!(
            "{} bytes of binary data follow the header that no {what}'s binary_data_size claims",
            binary.len()
        )));
    }
    Ok(tensors)
}

/// One input's tensor: from its JSON `data`, or cut from the front of `binary`.
fn input_tensor(
    input: &RawInput<'_>,
    has_binary_part: bool,
    binary: &mut Bytes,
) -> Result<Tensor, TensorError> {
    let value = |m: String| TensorError::Value(m);
    let dtype = datatype(&input.datatype)?;
    let parameters = input.parameters.as_ref();
    if parameters.is_some_and(|p| p.contains_key("shared_memory_region")) {
        return Err(value(
            "shared memory is not supported: send the data as JSON or as binary tensor data".into(),
        ));
    }
    let binary_size = match parameters {
        None => None,
        Some(p) => optional_u64(p, "binary_data_size").map_err(|v| {
            value(format!(
                "binary_data_size must be a whole number of bytes, not {v}"
            ))
        })?,
    };
    match (input.data, binary_size) {
        (Some(_), Some(_)) => Err(value(
            "give either `data` or parameters.binary_data_size, not both".into(),
        )),
        (None, None) => Err(value(
            "no `data` and no parameters.binary_data_size: the input has no value".into(),
        )),
        (Some(data), None) => build_tensor(dtype, input.shape.clone(), Some(data.get()), None),
        (None, Some(size)) => {
            if !has_binary_part {
                return Err(value(
                    "binary_data_size is given but the request has no \
                     Inference-Header-Content-Length header, so it has no binary data"
                        .into(),
                ));
            }
            if size > binary.len() as u64 {
                return Err(value(format!(
                    "binary_data_size {size} runs past the end of the body: {} bytes of binary \
                     data are left for this input",
                    binary.len()
                )));
            }
            let shape = checked_shape(&input.shape)?;
            // At most what is left of the body, so it fits in usize.
            let data = binary.split_to(size as usize);
            Tensor::from_raw(dtype, shape, data)
        }
    }
}

/// The dtype of a protocol datatype name (`FP32`, `BYTES`…), over HTTP and gRPC alike.
///
/// # Errors
/// [`TensorError::Value`] naming the datatypes there are, for a name that is none of them.
pub fn datatype(name: &str) -> Result<DType, TensorError> {
    DType::from_kserve_name(name).ok_or_else(|| {
        TensorError::Value(format!(
            "unknown datatype `{name}`; use one of {}",
            DType::ALL.map(DType::kserve_name).join(", ")
        ))
    })
}

/// A shape as the protocol writes it, checked: at most [`crate::tensor::MAX_RANK`] dimensions,
/// none negative.
///
/// # Errors
/// [`TensorError::Rank`] or [`TensorError::NegativeDimension`].
pub fn checked_shape(shape: &[i64]) -> Result<Vec<u64>, TensorError> {
    crate::tensor::check_rank(shape.len())?;
    shape
        .iter()
        .map(|&d| u64::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| TensorError::NegativeDimension {
            shape: shape.to_vec(),
        })
}

fn requested_output(raw: RawOutput) -> Result<RequestedOutput, String> {
    let parameters = raw.parameters.unwrap_or_default();
    if parameters.contains_key("shared_memory_region") {
        return Err(format!(
            "output `{}`: shared memory is not supported",
            raw.name
        ));
    }
    if parameters
        .get("classification")
        .is_some_and(|v| v.as_u64() != Some(0))
    {
        return Err(format!(
            "output `{}`: the classification extension is not supported",
            raw.name
        ));
    }
    let binary_data = optional_bool(&parameters, "binary_data").map_err(|v| {
        format!(
            "output `{}`: parameters.binary_data must be true or false, not {v}",
            raw.name
        )
    })?;
    Ok(RequestedOutput {
        name: raw.name,
        binary_data,
    })
}

/// A parameter that must be a non-negative integer when present; the offending value otherwise.
fn optional_u64<'a>(
    parameters: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, &'a Value> {
    parameters.get(key).map(|v| v.as_u64().ok_or(v)).transpose()
}

/// A parameter that must be a boolean when present; the offending value otherwise.
fn optional_bool<'a>(
    parameters: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<bool>, &'a Value> {
    parameters
        .get(key)
        .map(|v| v.as_bool().ok_or(v))
        .transpose()
}

/// One named output of an infer response. In JSON it is `{"name", "datatype", "shape",
/// "data"}` with `data` flat; in binary, `data` gives way to `parameters.binary_data_size` and
/// the bytes follow the header.
#[derive(Debug, Clone, PartialEq)]
pub struct InferOutput {
    /// The output's name from the signature.
    pub name: String,
    /// Its value.
    pub tensor: Tensor,
    /// Whether it goes in binary.
    pub binary: bool,
}

impl serde::Serialize for InferOutput {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("datatype", self.tensor.dtype().kserve_name())?;
        map.serialize_entry("shape", self.tensor.shape())?;
        if self.binary {
            let size = self.tensor.raw_data().len() as u64;
            map.serialize_entry(
                "parameters",
                &serde_json::json!({ "binary_data_size": size }),
            )?;
        } else {
            map.serialize_entry("data", &crate::json::FlatData::new(&self.tensor)?)?;
        }
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

/// An infer response ready for the wire: the JSON header and the binary outputs after it, as
/// shared buffers (the outputs' bytes are not copied).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedResponse {
    /// `Some(length of the JSON header)` when binary data follows it: the value of the
    /// `Inference-Header-Content-Length` response header.
    pub header_length: Option<u64>,
    /// The JSON header, then each binary output's bytes in order.
    pub chunks: Vec<Bytes>,
}

impl EncodedResponse {
    /// The whole body's length.
    pub fn len(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }

    /// Whether the body is empty (it never is: the header is at least `{}`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Encode a response: JSON alone, or a JSON header followed by the binary outputs.
///
/// # Errors
/// An output that cannot be written as JSON (a guest's string element that is not UTF-8, asked
/// for in JSON).
///
/// ```
/// use wasmrpc_proto::Tensor;
/// use wasmrpc_proto::kserve::{InferOutput, InferResponse, encode_infer_response};
/// let response = InferResponse {
///     model_name: "add".into(),
///     model_version: "1".into(),
///     id: None,
///     outputs: vec![InferOutput { name: "sum".into(), tensor: Tensor::vector(vec![1u8, 2]), binary: true }],
/// };
/// let encoded = encode_infer_response(&response).unwrap();
/// let header_length = encoded.header_length.unwrap() as usize;
/// assert_eq!(&encoded.chunks[1][..], &[1, 2]);
/// assert!(std::str::from_utf8(&encoded.chunks[0]).unwrap().contains(r#""binary_data_size":2"#));
/// assert_eq!(encoded.chunks[0].len(), header_length);
/// ```
pub fn encode_infer_response(
    response: &InferResponse,
) -> Result<EncodedResponse, serde_json::Error> {
    let header = Bytes::from(serde_json::to_vec(response)?);
    let binary: Vec<Bytes> = response
        .outputs
        .iter()
        .filter(|o| o.binary && !o.tensor.raw_data().is_empty())
        .map(|o| o.tensor.raw_bytes().clone())
        .collect();
    if !response.outputs.iter().any(|o| o.binary) {
        return Ok(EncodedResponse {
            header_length: None,
            chunks: vec![header],
        });
    }
    let header_length = Some(header.len() as u64);
    let mut chunks = Vec::with_capacity(binary.len() + 1);
    chunks.push(header);
    chunks.extend(binary);
    Ok(EncodedResponse {
        header_length,
        chunks,
    })
}

/// An infer request ready for the wire, every input in binary: a JSON header, then each input's
/// bytes (shared with the tensors, not copied).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRequest {
    /// The value of the `Inference-Header-Content-Length` request header.
    pub header_length: u64,
    /// The JSON header, then each input's bytes in order.
    pub chunks: Vec<Bytes>,
}

/// Encode a request with every input in binary and every output asked for in binary
/// (`binary_data_output`), with `timeout_us` as `parameters.timeout` when given.
///
/// ```
/// use bytes::Bytes;
/// use wasmrpc_proto::Tensor;
/// use wasmrpc_proto::kserve::{decode_infer_request, encode_infer_request};
/// let a = Tensor::vector(vec![1i32, 2]);
/// let encoded = encode_infer_request(&[("a", &a)], Some(5_000));
/// let body: Vec<u8> = encoded.chunks.concat();
/// let request = decode_infer_request(&Bytes::from(body), Some(encoded.header_length)).unwrap();
/// assert_eq!(request.inputs[0].tensor, a);
/// assert_eq!(request.timeout_us, Some(5_000));
/// assert!(request.binary_data_output);
/// ```
pub fn encode_infer_request(inputs: &[(&str, &Tensor)], timeout_us: Option<u64>) -> EncodedRequest {
    let mut parameters = Map::new();
    parameters.insert("binary_data_output".into(), Value::Bool(true));
    if let Some(t) = timeout_us {
        parameters.insert("timeout".into(), Value::from(t));
    }
    let header = serde_json::json!({
        "inputs": inputs.iter().map(|(name, t)| serde_json::json!({
            "name": name,
            "datatype": t.dtype().kserve_name(),
            "shape": t.shape(),
            "parameters": {"binary_data_size": t.raw_data().len() as u64},
        })).collect::<Vec<_>>(),
        "parameters": parameters,
    });
    // A `Value` of strings, numbers and maps always serializes.
    let header = Bytes::from(serde_json::to_vec(&header).unwrap_or_default());
    let header_length = header.len() as u64;
    let mut chunks = Vec::with_capacity(inputs.len() + 1);
    chunks.push(header);
    chunks.extend(
        inputs
            .iter()
            .filter(|(_, t)| !t.raw_data().is_empty())
            .map(|(_, t)| t.raw_bytes().clone()),
    );
    EncodedRequest {
        header_length,
        chunks,
    }
}

#[derive(serde::Deserialize)]
struct RawResponse<'a> {
    #[serde(borrow)]
    outputs: Vec<RawInput<'a>>,
}

/// Decode an infer response's outputs, JSON or binary (`header_length` from the response's
/// `Inference-Header-Content-Length`), each checked as a request's inputs are.
///
/// # Errors
/// As [`decode_infer_request`], for a response that does not add up.
///
/// ```
/// use wasmrpc_proto::Tensor;
/// use wasmrpc_proto::kserve::{InferOutput, InferResponse, decode_infer_response, encode_infer_response};
/// let sum = Tensor::vector(vec![3i32, 4]);
/// let response = InferResponse {
///     model_name: "add".into(),
///     model_version: "1".into(),
///     id: None,
///     outputs: vec![InferOutput { name: "sum".into(), tensor: sum.clone(), binary: true }],
/// };
/// let encoded = encode_infer_response(&response).unwrap();
/// let body = bytes::Bytes::from(encoded.chunks.concat());
/// let outputs = decode_infer_response(&body, encoded.header_length).unwrap();
/// assert_eq!(outputs[0].name, "sum");
/// assert_eq!(outputs[0].tensor, sum);
/// ```
pub fn decode_infer_response(
    body: &Bytes,
    header_length: Option<u64>,
) -> Result<Vec<InferInput>, InferRequestError> {
    let (header, binary) = split_header(body, header_length)?;
    let raw: RawResponse<'_> =
        serde_json::from_slice(header).map_err(|e| InferRequestError::Body(e.to_string()))?;
    named_tensors(raw.outputs, header_length.is_some(), binary, "output")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::MAX_RANK;

    fn binary_body(header: &str, data: &[u8]) -> (Bytes, Option<u64>) {
        let mut body = header.as_bytes().to_vec();
        body.extend_from_slice(data);
        (Bytes::from(body), Some(header.len() as u64))
    }

    fn input_error(header: &str, data: &[u8]) -> String {
        let (body, n) = binary_body(header, data);
        decode_infer_request(&body, n).unwrap_err().to_string()
    }

    #[test]
    fn shapes_past_the_rank_limit_are_refused_json_or_binary_without_reading_them_whole() {
        for rank in [MAX_RANK + 1, 100_000, 1_000_000] {
            let dims = vec!["1"; rank].join(",");
            let json = format!(
                r#"{{"inputs": [{{"name": "a", "datatype": "UINT8", "shape": [{dims}], "data": [1]}}]}}"#
            );
            let err = decode_infer_request(&Bytes::from(json), None).unwrap_err();
            assert!(err.to_string().contains("65 dimensions or more"), "{err}");
            assert!(err.to_string().len() < 300, "{err}");
            let header = format!(
                r#"{{"inputs": [{{"name": "a", "datatype": "UINT8", "shape": [{dims}],
                    "parameters": {{"binary_data_size": 1}}}}]}}"#
            );
            let err = input_error(&header, &[1]);
            assert!(err.contains("65 dimensions or more"), "{err}");
            assert!(err.len() < 300, "{err}");
        }
        // Not read past the 65th dimension: what follows is not even JSON.
        let broken = format!(
            r#"{{"inputs": [{{"name": "a", "datatype": "UINT8", "shape": [{},1,@@@"#,
            vec!["1"; MAX_RANK + 1].join(",")
        );
        let err = decode_infer_request(&Bytes::from(broken), None).unwrap_err();
        assert!(err.to_string().contains("65 dimensions or more"), "{err}");
    }

    /// What a client reads is held to the same limit: an answer (v1 or v2) with an output of
    /// more than 64 dimensions is refused, not built.
    #[test]
    fn answers_with_an_output_past_the_rank_limit_are_refused_by_the_client_too() {
        let dims = vec!["1"; MAX_RANK + 1].join(",");
        let v2 = format!(
            r#"{{"outputs": [{{"name": "y", "datatype": "UINT8", "shape": [{dims}], "data": [1]}}]}}"#
        );
        let err = decode_infer_response(&Bytes::from(v2), None).unwrap_err();
        assert!(err.to_string().contains("65 dimensions or more"), "{err}");
        let v1 =
            format!(r#"{{"outputs": [{{"dtype": "uint8", "shape": [{dims}], "data": [1]}}]}}"#);
        let err = serde_json::from_str::<crate::CallResponse>(&v1).unwrap_err();
        assert!(err.to_string().contains("65 dimensions or more"), "{err}");
    }

    #[test]
    fn binary_inputs_are_slices_of_the_body() {
        let (body, n) = binary_body(
            r#"{"inputs": [{"name": "a", "datatype": "FP32", "shape": [2],
                "parameters": {"binary_data_size": 8}}]}"#,
            &[0, 0, 128, 63, 0, 0, 0, 64],
        );
        let request = decode_infer_request(&body, n).unwrap();
        let tensor = &request.inputs[0].tensor;
        assert_eq!(tensor.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        // The same allocation as the body: no copy was made.
        assert_eq!(
            tensor.raw_data().as_ptr(),
            body[n.unwrap() as usize..].as_ptr()
        );
    }

    #[test]
    fn bytes_elements_are_length_prefixed_in_binary() {
        let (body, n) = binary_body(
            r#"{"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2],
                "parameters": {"binary_data_size": 11}}]}"#,
            &[2, 0, 0, 0, b'h', b'i', 1, 0, 0, 0, b'x'],
        );
        let request = decode_infer_request(&body, n).unwrap();
        assert_eq!(
            request.inputs[0].tensor.to_strings().unwrap(),
            vec![b"hi".to_vec(), b"x".to_vec()]
        );
    }

    #[test]
    fn json_and_binary_inputs_mix_in_order() {
        let (body, n) = binary_body(
            r#"{"inputs": [
                {"name": "a", "datatype": "UINT8", "shape": [1], "parameters": {"binary_data_size": 1}},
                {"name": "b", "datatype": "UINT8", "shape": [1], "data": [7]},
                {"name": "c", "datatype": "UINT8", "shape": [2], "parameters": {"binary_data_size": 2}}]}"#,
            &[1, 2, 3],
        );
        let request = decode_infer_request(&body, n).unwrap();
        let values: Vec<Vec<u8>> = request
            .inputs
            .iter()
            .map(|i| i.tensor.to_vec::<u8>().unwrap())
            .collect();
        assert_eq!(values, vec![vec![1], vec![7], vec![2, 3]]);
    }

    #[test]
    fn sizes_that_do_not_add_up_are_refused_with_the_reason() {
        let one = r#"{"inputs": [{"name": "a", "datatype": "INT32", "shape": [2],
            "parameters": {"binary_data_size": 8}}]}"#;
        // Disagrees with the shape.
        let e = input_error(&one.replace('8', "4"), &[0; 4]);
        assert!(e.contains("needs 8 bytes of data, got 4"), "{e}");
        // Runs past the body.
        let e = input_error(one, &[0; 4]);
        assert!(e.contains("runs past the end of the body"), "{e}");
        // Bytes nobody claims.
        let e = input_error(one, &[0; 12]);
        assert!(e.contains("4 bytes of binary data"), "{e}");
        // Negative and huge sizes.
        let e = input_error(&one.replace('8', "-8"), &[0; 8]);
        assert!(e.contains("whole number of bytes, not -8"), "{e}");
        let e = input_error(&one.replace('8', "18446744073709551615"), &[0; 8]);
        assert!(e.contains("runs past the end of the body"), "{e}");
        let e = input_error(&one.replace('8', "1e30"), &[0; 8]);
        assert!(e.contains("whole number of bytes"), "{e}");
        // A header length past the body.
        let body = Bytes::from_static(b"{}");
        let e = decode_infer_request(&body, Some(u64::MAX)).unwrap_err();
        assert!(
            e.to_string().contains("past the end of the 2-byte body"),
            "{e}"
        );
        // Binary data claimed with no binary part at all.
        let e = decode_infer_request(&Bytes::from(one.to_string()), None).unwrap_err();
        assert!(
            e.to_string().contains("no Inference-Header-Content-Length"),
            "{e}"
        );
        // Both forms at once, and neither.
        let e = input_error(
            r#"{"inputs": [{"name": "a", "datatype": "UINT8", "shape": [1], "data": [1],
                "parameters": {"binary_data_size": 1}}]}"#,
            &[1],
        );
        assert!(e.contains("not both"), "{e}");
        let e = input_error(
            r#"{"inputs": [{"name": "a", "datatype": "UINT8", "shape": [1]}]}"#,
            &[],
        );
        assert!(e.contains("has no value"), "{e}");
        // A negative dimension with binary data.
        let e = input_error(
            r#"{"inputs": [{"name": "a", "datatype": "UINT8", "shape": [-1],
                "parameters": {"binary_data_size": 1}}]}"#,
            &[1],
        );
        assert!(e.contains("negative dimension"), "{e}");
    }

    #[test]
    fn output_parameters_choose_binary_per_output_or_for_all() {
        let body = Bytes::from_static(
            br#"{"inputs": [], "parameters": {"binary_data_output": true},
                 "outputs": [{"name": "x", "parameters": {"binary_data": false}}, {"name": "y"}]}"#,
        );
        let request = decode_infer_request(&body, None).unwrap();
        let outputs = request.outputs.as_ref().unwrap();
        assert!(!request.wants_binary(Some(&outputs[0])));
        assert!(request.wants_binary(Some(&outputs[1])));
        assert!(request.wants_binary(None));
        let e = decode_infer_request(
            &Bytes::from_static(
                br#"{"inputs": [], "outputs": [{"name": "x", "parameters": {"binary_data": 1}}]}"#,
            ),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("true or false"), "{e}");
    }

    #[test]
    fn a_response_with_no_binary_output_is_plain_json() {
        let response = InferResponse {
            model_name: "m".into(),
            model_version: "1".into(),
            id: Some("x".into()),
            outputs: vec![InferOutput {
                name: "y".into(),
                tensor: Tensor::vector(vec![1i32]),
                binary: false,
            }],
        };
        let encoded = encode_infer_response(&response).unwrap();
        assert_eq!(encoded.header_length, None);
        assert_eq!(encoded.chunks.len(), 1);
        let json: Value = serde_json::from_slice(&encoded.chunks[0]).unwrap();
        assert_eq!(json["outputs"][0]["data"], serde_json::json!([1]));
        assert_eq!(json["id"], "x");
    }
}

//! `ModelInfer` messages to and from wasmrpc's own infer request and response
//! ([`crate::kserve::InferRequest`], [`crate::kserve::InferResponse`]), so that the gRPC and the
//! HTTP forms of the protocol meet in one type and run the same code after it.
//!
//! An input comes either raw (`raw_input_contents`, one entry per input: exactly a [`Tensor`]'s
//! layout, little-endian, `BYTES` elements each a 4-byte little-endian length and the bytes), a
//! slice of the received message with no copy, or typed (`contents`): 8- and 16-bit integers in
//! `int_contents` / `uint_contents`, `FP16` and `BF16` in `fp32_contents` (each value must fit),
//! `BYTES` in `bytes_contents`. Every value is checked as over HTTP. Outputs always go back raw
//! (`raw_output_contents`), the form tritonclient decodes, sharing the outputs' buffers.
//!
//! ```
//! use bytes::Bytes;
//! use wasmrpc_proto::grpc::{ModelInferRequest, model_infer_request::InferInputTensor};
//! use wasmrpc_proto::grpc::infer::decode_request;
//! let request = ModelInferRequest {
//!     inputs: vec![InferInputTensor {
//!         name: "a".into(),
//!         datatype: "INT32".into(),
//!         shape: vec![2],
//!         ..Default::default()
//!     }],
//!     raw_input_contents: vec![Bytes::from_static(&[1, 0, 0, 0, 2, 0, 0, 0])],
//!     ..Default::default()
//! };
//! let decoded = decode_request(request).unwrap();
//! assert_eq!(decoded.inputs[0].tensor.to_vec::<i32>().unwrap(), vec![1, 2]);
//! ```

use std::collections::HashMap;

use bytes::Bytes;

use super::infer_parameter::ParameterChoice;
use super::model_infer_request::InferInputTensor;
use super::model_infer_response::InferOutputTensor;
use super::{InferParameter, InferTensorContents, ModelInferRequest, ModelInferResponse};
use crate::dtype::DType;
use crate::kserve::{InferInput, InferRequest, InferRequestError, InferResponse, RequestedOutput};
use crate::tensor::{Element, Tensor, TensorError};

/// A `ModelInferRequest` as wasmrpc's infer request: inputs checked and in the order sent,
/// outputs asked for by name, `parameters.timeout` (microseconds) as the deadline. The model's
/// name and version stay in the message; `binary_data_output` means nothing here (outputs are
/// always raw).
///
/// # Errors
/// [`InferRequestError::Body`] for a request that does not add up (raw contents for some inputs
/// and not others, a parameter of the wrong type), [`InferRequestError::Input`] naming the
/// first input that is not a valid tensor.
pub fn decode_request(request: ModelInferRequest) -> Result<InferRequest, InferRequestError> {
    let body = InferRequestError::Body;
    let timeout_us = match request.parameters.get("timeout") {
        None => None,
        Some(p) => Some(whole_number(p).ok_or_else(|| {
            body(format!(
                "parameters.timeout must be a whole number of microseconds (int64_param or \
                 uint64_param), not {}",
                describe(p)
            ))
        })?),
    };
    let raw = request.raw_input_contents;
    if !raw.is_empty() && raw.len() != request.inputs.len() {
        return Err(body(format!(
            "raw_input_contents has {} entries for {} inputs: send every input raw (one entry \
             each, in order) or none",
            raw.len(),
            request.inputs.len()
        )));
    }
    let mut raw = raw.into_iter();
    let inputs = request
        .inputs
        .into_iter()
        .map(|input| {
            let tensor =
                input_tensor(&input, raw.next()).map_err(|error| InferRequestError::Input {
                    name: input.name.clone(),
                    error,
                })?;
            Ok(InferInput {
                name: input.name,
                tensor,
            })
        })
        .collect::<Result<Vec<_>, InferRequestError>>()?;
    let outputs = if request.outputs.is_empty() {
        None
    } else {
        Some(
            request
                .outputs
                .into_iter()
                .map(|o| {
                    if o.parameters.contains_key("shared_memory_region") {
                        return Err(body(format!(
                            "output `{}`: shared memory is not supported",
                            o.name
                        )));
                    }
                    if o.parameters
                        .get("classification")
                        .is_some_and(|p| whole_number(p) != Some(0))
                    {
                        return Err(body(format!(
                            "output `{}`: the classification extension is not supported",
                            o.name
                        )));
                    }
                    Ok(RequestedOutput {
                        name: o.name,
                        binary_data: None,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    Ok(InferRequest {
        id: (!request.id.is_empty()).then_some(request.id),
        inputs,
        outputs,
        timeout_us,
        binary_data_output: true,
    })
}

/// A non-negative integer parameter.
fn whole_number(p: &InferParameter) -> Option<u64> {
    match p.parameter_choice {
        Some(ParameterChoice::Int64Param(v)) => u64::try_from(v).ok(),
        Some(ParameterChoice::Uint64Param(v)) => Some(v),
        _ => None,
    }
}

/// A parameter's value, for a message.
fn describe(p: &InferParameter) -> String {
    match &p.parameter_choice {
        None => "an empty parameter".into(),
        Some(ParameterChoice::BoolParam(v)) => format!("bool_param {v}"),
        Some(ParameterChoice::Int64Param(v)) => format!("int64_param {v}"),
        Some(ParameterChoice::StringParam(v)) => format!("string_param {v:?}"),
        Some(ParameterChoice::DoubleParam(v)) => format!("double_param {v}"),
        Some(ParameterChoice::Uint64Param(v)) => format!("uint64_param {v}"),
    }
}

/// One input's tensor, from its raw bytes or its typed contents.
///
/// # Errors
/// An unknown datatype, a bad shape, both forms or neither, contents in the wrong field for the
/// datatype, values that do not fit it, or a count or length that disagrees with the shape.
pub fn input_tensor(input: &InferInputTensor, raw: Option<Bytes>) -> Result<Tensor, TensorError> {
    let value = TensorError::Value;
    let dtype = crate::kserve::infer::datatype(&input.datatype)?;
    if input.parameters.contains_key("shared_memory_region") {
        return Err(value(
            "shared memory is not supported: send the data in raw_input_contents or contents"
                .into(),
        ));
    }
    let shape = crate::kserve::infer::checked_shape(&input.shape)?;
    let contents = input.contents.as_ref().filter(|c| !is_empty(c));
    match (raw, contents) {
        (Some(_), Some(_)) => Err(value(
            "give either raw_input_contents or contents, not both".into(),
        )),
        (Some(raw), None) => Tensor::from_raw(dtype, shape, raw),
        (None, Some(contents)) => typed_tensor(dtype, shape, contents),
        (None, None) => typed_tensor(dtype, shape, &InferTensorContents::default()),
    }
}

fn is_empty(c: &InferTensorContents) -> bool {
    c.bool_contents.is_empty()
        && c.int_contents.is_empty()
        && c.int64_contents.is_empty()
        && c.uint_contents.is_empty()
        && c.uint64_contents.is_empty()
        && c.fp32_contents.is_empty()
        && c.fp64_contents.is_empty()
        && c.bytes_contents.is_empty()
}

/// The contents field that carries `dtype`'s values.
fn field_of(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "bool_contents",
        DType::UInt8 | DType::UInt16 | DType::UInt32 => "uint_contents",
        DType::UInt64 => "uint64_contents",
        DType::Int8 | DType::Int16 | DType::Int32 => "int_contents",
        DType::Int64 => "int64_contents",
        DType::Float16 | DType::BFloat16 | DType::Float32 => "fp32_contents",
        DType::Float64 => "fp64_contents",
        DType::String => "bytes_contents",
    }
}

/// The names of the fields of `c` that hold values.
fn filled_fields(c: &InferTensorContents) -> Vec<&'static str> {
    [
        ("bool_contents", c.bool_contents.is_empty()),
        ("int_contents", c.int_contents.is_empty()),
        ("int64_contents", c.int64_contents.is_empty()),
        ("uint_contents", c.uint_contents.is_empty()),
        ("uint64_contents", c.uint64_contents.is_empty()),
        ("fp32_contents", c.fp32_contents.is_empty()),
        ("fp64_contents", c.fp64_contents.is_empty()),
        ("bytes_contents", c.bytes_contents.is_empty()),
    ]
    .into_iter()
    .filter(|(_, empty)| !empty)
    .map(|(name, _)| name)
    .collect()
}

fn typed_tensor(
    dtype: DType,
    shape: Vec<u64>,
    c: &InferTensorContents,
) -> Result<Tensor, TensorError> {
    let field = field_of(dtype);
    if let Some(other) = filled_fields(c).into_iter().find(|&f| f != field) {
        return Err(TensorError::Value(format!(
            "{} values go in contents.{field} (or raw_input_contents), not in contents.{other}",
            dtype.kserve_name()
        )));
    }
    fn narrow<S: Copy + std::fmt::Display, T: Element + TryFrom<S>>(
        values: &[S],
        dtype: DType,
    ) -> Result<Vec<T>, TensorError> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                T::try_from(v).map_err(|_| {
                    TensorError::Value(format!("element {i}: {v} is out of range for {dtype}"))
                })
            })
            .collect()
    }
    fn halves<T: Element>(
        values: &[f32],
        dtype: DType,
        convert: impl Fn(f32) -> T,
        finite: impl Fn(T) -> bool,
    ) -> Result<Vec<T>, TensorError> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let h = convert(v);
                if v.is_finite() && !finite(h) {
                    return Err(TensorError::Value(format!(
                        "element {i}: {v} is out of range for {dtype}"
                    )));
                }
                Ok(h)
            })
            .collect()
    }
    match dtype {
        DType::Bool => Tensor::from_vec(shape, c.bool_contents.clone()),
        DType::UInt8 => Tensor::from_vec(shape, narrow::<u32, u8>(&c.uint_contents, dtype)?),
        DType::UInt16 => Tensor::from_vec(shape, narrow::<u32, u16>(&c.uint_contents, dtype)?),
        DType::UInt32 => Tensor::from_vec(shape, c.uint_contents.clone()),
        DType::UInt64 => Tensor::from_vec(shape, c.uint64_contents.clone()),
        DType::Int8 => Tensor::from_vec(shape, narrow::<i32, i8>(&c.int_contents, dtype)?),
        DType::Int16 => Tensor::from_vec(shape, narrow::<i32, i16>(&c.int_contents, dtype)?),
        DType::Int32 => Tensor::from_vec(shape, c.int_contents.clone()),
        DType::Int64 => Tensor::from_vec(shape, c.int64_contents.clone()),
        DType::Float16 => Tensor::from_vec(
            shape,
            halves(
                &c.fp32_contents,
                dtype,
                half::f16::from_f32,
                half::f16::is_finite,
            )?,
        ),
        DType::BFloat16 => Tensor::from_vec(
            shape,
            halves(
                &c.fp32_contents,
                dtype,
                half::bf16::from_f32,
                half::bf16::is_finite,
            )?,
        ),
        DType::Float32 => Tensor::from_vec(shape, c.fp32_contents.clone()),
        DType::Float64 => Tensor::from_vec(shape, c.fp64_contents.clone()),
        DType::String => Tensor::from_strings(shape, c.bytes_contents.iter()),
    }
}

/// wasmrpc's infer response as a `ModelInferResponse`: every output raw, its bytes shared with
/// the tensor (no copy).
pub fn encode_response(response: InferResponse) -> ModelInferResponse {
    let mut raw = Vec::with_capacity(response.outputs.len());
    let outputs = response
        .outputs
        .into_iter()
        .map(|output| {
            raw.push(output.tensor.raw_bytes().clone());
            InferOutputTensor {
                name: output.name,
                datatype: output.tensor.dtype().kserve_name().to_owned(),
                shape: output
                    .tensor
                    .shape()
                    .iter()
                    .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
                    .collect(),
                parameters: HashMap::new(),
                contents: None,
            }
        })
        .collect();
    ModelInferResponse {
        model_name: response.model_name,
        model_version: response.model_version,
        id: response.id.unwrap_or_default(),
        parameters: HashMap::new(),
        outputs,
        raw_output_contents: raw,
    }
}

/// A `ModelInferResponse`'s outputs as tensors: raw (`raw_output_contents`) or typed, each
/// checked as a request's inputs are. For clients.
///
/// # Errors
/// As [`decode_request`], for a response that does not add up.
pub fn decode_response(response: ModelInferResponse) -> Result<Vec<InferInput>, InferRequestError> {
    let as_request = ModelInferRequest {
        inputs: response
            .outputs
            .into_iter()
            .map(|o| InferInputTensor {
                name: o.name,
                datatype: o.datatype,
                shape: o.shape,
                parameters: o.parameters,
                contents: o.contents,
            })
            .collect(),
        raw_input_contents: response.raw_output_contents,
        ..ModelInferRequest::default()
    };
    decode_request(as_request).map(|r| r.inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(datatype: &str, shape: &[i64], contents: InferTensorContents) -> InferInputTensor {
        InferInputTensor {
            name: "x".into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            parameters: HashMap::new(),
            contents: Some(contents),
        }
    }

    fn typed(datatype: &str, shape: &[i64], contents: InferTensorContents) -> Tensor {
        input_tensor(&input(datatype, shape, contents), None).unwrap()
    }

    fn typed_error(datatype: &str, shape: &[i64], contents: InferTensorContents) -> String {
        input_tensor(&input(datatype, shape, contents), None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn every_datatype_reads_from_its_typed_field() {
        let c = InferTensorContents::default;
        let t = typed(
            "BOOL",
            &[2],
            InferTensorContents {
                bool_contents: vec![true, false],
                ..c()
            },
        );
        assert_eq!(t.to_vec::<bool>().unwrap(), vec![true, false]);
        let ints = InferTensorContents {
            int_contents: vec![-3, 4],
            ..c()
        };
        assert_eq!(
            typed("INT8", &[2], ints.clone()).to_vec::<i8>().unwrap(),
            [-3, 4]
        );
        assert_eq!(
            typed("INT16", &[2], ints.clone()).to_vec::<i16>().unwrap(),
            [-3, 4]
        );
        assert_eq!(typed("INT32", &[2], ints).to_vec::<i32>().unwrap(), [-3, 4]);
        let uints = InferTensorContents {
            uint_contents: vec![3, 4],
            ..c()
        };
        assert_eq!(
            typed("UINT8", &[2], uints.clone()).to_vec::<u8>().unwrap(),
            [3, 4]
        );
        assert_eq!(
            typed("UINT16", &[2], uints.clone())
                .to_vec::<u16>()
                .unwrap(),
            [3, 4]
        );
        assert_eq!(
            typed("UINT32", &[2], uints).to_vec::<u32>().unwrap(),
            [3, 4]
        );
        let t = typed(
            "INT64",
            &[1],
            InferTensorContents {
                int64_contents: vec![i64::MIN],
                ..c()
            },
        );
        assert_eq!(t.to_vec::<i64>().unwrap(), [i64::MIN]);
        let t = typed(
            "UINT64",
            &[1],
            InferTensorContents {
                uint64_contents: vec![u64::MAX],
                ..c()
            },
        );
        assert_eq!(t.to_vec::<u64>().unwrap(), [u64::MAX]);
        let floats = InferTensorContents {
            fp32_contents: vec![0.5, -2.0],
            ..c()
        };
        assert_eq!(
            typed("FP32", &[2], floats.clone()).to_vec::<f32>().unwrap(),
            [0.5, -2.0]
        );
        assert_eq!(
            typed("FP16", &[2], floats.clone())
                .to_vec::<half::f16>()
                .unwrap(),
            [half::f16::from_f32(0.5), half::f16::from_f32(-2.0)]
        );
        assert_eq!(
            typed("BF16", &[2], floats).to_vec::<half::bf16>().unwrap(),
            [half::bf16::from_f32(0.5), half::bf16::from_f32(-2.0)]
        );
        let t = typed(
            "FP64",
            &[1],
            InferTensorContents {
                fp64_contents: vec![1e300],
                ..c()
            },
        );
        assert_eq!(t.to_vec::<f64>().unwrap(), [1e300]);
        let t = typed(
            "BYTES",
            &[2],
            InferTensorContents {
                bytes_contents: vec![Bytes::from_static(b"hi"), Bytes::new()],
                ..c()
            },
        );
        assert_eq!(t.to_strings().unwrap(), vec![b"hi".to_vec(), Vec::new()]);
    }

    #[test]
    fn values_that_do_not_fit_and_fields_that_do_not_match_are_refused_by_name() {
        let c = InferTensorContents::default;
        let e = typed_error(
            "INT8",
            &[1],
            InferTensorContents {
                int_contents: vec![200],
                ..c()
            },
        );
        assert_eq!(e, "element 0: 200 is out of range for int8");
        let e = typed_error(
            "FP16",
            &[1],
            InferTensorContents {
                fp32_contents: vec![1e10],
                ..c()
            },
        );
        assert!(e.contains("out of range for float16"), "{e}");
        let e = typed_error(
            "FP32",
            &[1],
            InferTensorContents {
                int_contents: vec![1],
                ..c()
            },
        );
        assert_eq!(
            e,
            "FP32 values go in contents.fp32_contents (or raw_input_contents), not in \
             contents.int_contents"
        );
        let e = typed_error(
            "INT32",
            &[3],
            InferTensorContents {
                int_contents: vec![1],
                ..c()
            },
        );
        assert_eq!(e, "shape [3] needs 3 elements, got 1");
        let e = typed_error("INT32", &[-1], c());
        assert!(e.contains("negative dimension"), "{e}");
        let e = typed_error("FLOAT", &[1], c());
        assert!(e.starts_with("unknown datatype `FLOAT`"), "{e}");
    }

    #[test]
    fn raw_contents_are_slices_of_the_message_and_must_cover_every_input() {
        let raw = Bytes::from(vec![0u8, 0, 128, 63]);
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor {
                name: "x".into(),
                datatype: "FP32".into(),
                shape: vec![1],
                ..Default::default()
            }],
            raw_input_contents: vec![raw.clone()],
            ..Default::default()
        };
        let decoded = decode_request(request.clone()).unwrap();
        assert_eq!(decoded.inputs[0].tensor.raw_data().as_ptr(), raw.as_ptr());
        let mut two = request.clone();
        two.inputs.push(two.inputs[0].clone());
        let e = decode_request(two).unwrap_err().to_string();
        assert!(
            e.contains("raw_input_contents has 1 entries for 2 inputs"),
            "{e}"
        );
        let mut both = request;
        both.inputs[0].contents = Some(InferTensorContents {
            fp32_contents: vec![1.0],
            ..Default::default()
        });
        let e = decode_request(both).unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn raw_bytes_elements_are_length_prefixed() {
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor {
                name: "s".into(),
                datatype: "BYTES".into(),
                shape: vec![2],
                ..Default::default()
            }],
            raw_input_contents: vec![Bytes::from_static(&[2, 0, 0, 0, b'h', b'i', 0, 0, 0, 0])],
            ..Default::default()
        };
        let decoded = decode_request(request).unwrap();
        assert_eq!(
            decoded.inputs[0].tensor.to_strings().unwrap(),
            vec![b"hi".to_vec(), Vec::new()]
        );
    }

    #[test]
    fn the_timeout_parameter_is_microseconds_and_a_whole_number() {
        let mut request = ModelInferRequest::default();
        request.parameters.insert(
            "timeout".into(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::Int64Param(500_000)),
            },
        );
        assert_eq!(
            decode_request(request.clone()).unwrap().timeout_us,
            Some(500_000)
        );
        request.parameters.insert(
            "timeout".into(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::StringParam("1s".into())),
            },
        );
        let e = decode_request(request).unwrap_err().to_string();
        assert!(e.contains("whole number of microseconds"), "{e}");
    }

    #[test]
    fn responses_go_back_raw_and_read_back_the_same() {
        let sum = Tensor::from_vec([2, 1], vec![3i32, 4]).unwrap();
        let words = Tensor::from_strings([1], ["hé"]).unwrap();
        let response = encode_response(InferResponse {
            model_name: "add".into(),
            model_version: "1".into(),
            id: Some("7".into()),
            outputs: vec![
                crate::kserve::InferOutput {
                    name: "sum".into(),
                    tensor: sum.clone(),
                    binary: true,
                },
                crate::kserve::InferOutput {
                    name: "words".into(),
                    tensor: words.clone(),
                    binary: true,
                },
            ],
        });
        assert_eq!(response.outputs[0].shape, [2, 1]);
        assert_eq!(response.outputs[1].datatype, "BYTES");
        assert_eq!(response.id, "7");
        let back = decode_response(response).unwrap();
        assert_eq!(back[0].tensor, sum);
        assert_eq!(back[1].tensor, words);
    }
}

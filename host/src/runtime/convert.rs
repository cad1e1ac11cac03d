//! Conversions between the generated WIT types and the wire types of `wasmrpc-client`.
//!
//! Both sides use the same byte layout, so tensors move across without re-encoding their data.

use wasmrpc_proto::{Code, DType, Dim, MethodSignature, Tensor, TensorSpec};

use super::bindings::{self, Dtype, GuestError};
use super::lifted::{Items, SignatureOut, SpecOut};

/// The wire dtype of a WIT dtype.
pub fn dtype_from_wit(d: Dtype) -> DType {
    match d {
        Dtype::Bool => DType::Bool,
        Dtype::U8 => DType::UInt8,
        Dtype::U16 => DType::UInt16,
        Dtype::U32 => DType::UInt32,
        Dtype::U64 => DType::UInt64,
        Dtype::I8 => DType::Int8,
        Dtype::I16 => DType::Int16,
        Dtype::I32 => DType::Int32,
        Dtype::I64 => DType::Int64,
        Dtype::F16 => DType::Float16,
        Dtype::Bf16 => DType::BFloat16,
        Dtype::F32 => DType::Float32,
        Dtype::F64 => DType::Float64,
        Dtype::Bytes => DType::String,
    }
}

/// The WIT dtype of a wire dtype.
pub fn dtype_to_wit(d: DType) -> Dtype {
    match d {
        DType::Bool => Dtype::Bool,
        DType::UInt8 => Dtype::U8,
        DType::UInt16 => Dtype::U16,
        DType::UInt32 => Dtype::U32,
        DType::UInt64 => Dtype::U64,
        DType::Int8 => Dtype::I8,
        DType::Int16 => Dtype::I16,
        DType::Int32 => Dtype::I32,
        DType::Int64 => Dtype::I64,
        DType::Float16 => Dtype::F16,
        DType::BFloat16 => Dtype::Bf16,
        DType::Float32 => Dtype::F32,
        DType::Float64 => Dtype::F64,
        DType::String => Dtype::Bytes,
    }
}

/// A wire tensor as the guest receives it: borrowed, so lowering copies its bytes straight from
/// wherever they are (a request body, for the binary infer form) into the guest's memory.
pub fn tensor_to_wit(t: &Tensor) -> bindings::TensorParam<'_> {
    bindings::TensorParam {
        dtype: dtype_to_wit(t.dtype()),
        shape: t.shape(),
        data: t.raw_data(),
    }
}

/// A guest's output, checked like any untrusted tensor.
///
/// # Errors
/// The tensor's bytes do not match its dtype and shape.
pub fn tensor_from_wit(
    dtype: Dtype,
    shape: Vec<u64>,
    data: bytes::Bytes,
) -> Result<Tensor, wasmrpc_proto::TensorError> {
    Tensor::from_raw(dtype_from_wit(dtype), shape, data)
}

fn spec_from_wit(s: SpecOut) -> TensorSpec {
    TensorSpec {
        name: s.name.into_inner(),
        dtype: dtype_from_wit(s.dtype.into_inner()),
        shape: s.shape.into_inner().map(|Items(dims)| {
            dims.into_iter()
                .map(|d| d.map_or(Dim::Dynamic, Dim::Fixed))
                .collect()
        }),
    }
}

/// A method signature, as `signatures()` returned it, as the API shows it.
pub fn signature_from_wit(s: SignatureOut) -> MethodSignature {
    MethodSignature {
        name: s.name.into_inner(),
        inputs: s
            .inputs
            .into_inner()
            .0
            .into_iter()
            .map(spec_from_wit)
            .collect(),
        outputs: s
            .outputs
            .into_inner()
            .0
            .into_iter()
            .map(spec_from_wit)
            .collect(),
        doc: s.doc.into_inner(),
    }
}

/// The canonical code and message of a guest's error value.
pub fn guest_error(e: GuestError) -> (Code, String) {
    match e {
        GuestError::InvalidArgument(m) => (Code::InvalidArgument, m),
        GuestError::FailedPrecondition(m) => (Code::FailedPrecondition, m),
        GuestError::OutOfRange(m) => (Code::OutOfRange, m),
        GuestError::Unimplemented(m) => (Code::Unimplemented, m),
        GuestError::Internal(m) => (Code::Internal, m),
        GuestError::ResourceExhausted(m) => (Code::ResourceExhausted, m),
        GuestError::NotFound(m) => (Code::NotFound, m),
    }
}

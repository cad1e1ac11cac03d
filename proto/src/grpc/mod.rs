//! The Open Inference Protocol (KServe v2) over gRPC: the messages, the server trait and the
//! client of `inference.GRPCInferenceService`, generated at build time from
//! `proto/grpc/inference.proto` (feature `grpc`), and their mapping onto wasmrpc's own types
//! ([`infer`]: requests, tensors and responses; [`messages`]: metadata, configuration,
//! statistics). The server's implementation is in `wasmrpc-host` (`host/src/grpc`); the mapping
//! is documented in docs/kserve.md.

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    tonic::include_proto!("inference");
}

pub use generated::*;

pub mod infer;
pub mod messages;

/// The encoded `FileDescriptorSet` of `inference.proto`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/inference_descriptor.bin"));

/// The service's full name, as reflection lists it and health checks name it.
pub const SERVICE_NAME: &str = "inference.GRPCInferenceService";

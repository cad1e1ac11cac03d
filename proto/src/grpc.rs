//! The Open Inference Protocol (KServe v2) over gRPC: the messages, the server trait and the
//! client of `inference.GRPCInferenceService`, generated at build time from
//! `proto/grpc/inference.proto` (feature `grpc`). The server's implementation is in
//! `wasmrpc-host` (`host/src/grpc`); the mapping of tensors and errors is documented in
//! docs/kserve.md.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("inference");

/// The encoded `FileDescriptorSet` of `inference.proto`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/inference_descriptor.bin"));

//! Generates `wasmrpc_proto::grpc` from `grpc/inference.proto` when the `grpc` feature is on.
//! protox parses the file in Rust, so no system `protoc` is needed; the descriptor set is kept
//! too, for the server's gRPC reflection.

fn main() {
    println!("cargo::rerun-if-changed=grpc");
    #[cfg(feature = "grpc")]
    generate_grpc().expect("generate the gRPC code from grpc/inference.proto");
}

#[cfg(feature = "grpc")]
fn generate_grpc() -> Result<(), Box<dyn std::error::Error>> {
    use protox::prost::Message as _;
    let descriptors = protox::compile(["inference.proto"], ["grpc"])?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("inference_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        // Tensor bytes stay `Bytes`: slices of the received message, no copy.
        .bytes(".inference")
        .compile_fds(descriptors)?;
    Ok(())
}

//! A component that uses the network, which wasmrpc forbids: its one method opens a TCP connection,
//! so the component imports `wasi:sockets/…` and the host must refuse it at upload, naming the
//! import.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-forbidden-net`.

use wasmrpc_guest::{Error, Tensor};

/// Connects to `127.0.0.1:9` (discard) over TCP: uint8 scalar 1 if it connected.
#[wasmrpc_guest::method]
pub fn connect() -> Result<Tensor<u8>, Error> {
    std::net::TcpStream::connect("127.0.0.1:9")
        .map(|_| Tensor::scalar(1))
        .map_err(|e| Error::failed_precondition(format!("cannot connect to 127.0.0.1:9: {e}")))
}

wasmrpc_guest::export!(connect);

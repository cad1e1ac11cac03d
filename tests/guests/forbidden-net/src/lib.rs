//! A component that reaches for the network, which a guest does not get: it imports
//! `wasi:sockets/…` (Rust's std does for any socket), uploads, and every attempt fails inside the
//! guest, which says so in its answer (the sandbox denies every socket and name lookup).
//!
//! | method | what it does | what the host should answer |
//! |---|---|---|
//! | `connect` | connects a TCP socket to `127.0.0.1:PORT` (`port`, an int32 scalar) | FAILED_PRECONDITION naming the guest's I/O error |
//! | `listen` | binds a TCP listener to `127.0.0.1:0` | FAILED_PRECONDITION naming the guest's I/O error |
//! | `udp` | binds a UDP socket and sends a datagram to `127.0.0.1:PORT` | FAILED_PRECONDITION naming the guest's I/O error |
//! | `resolve` | looks up the name `localhost` | FAILED_PRECONDITION naming the guest's I/O error |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-forbidden-net`.

use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};

use wasmrpc_guest::{Error, Tensor};

fn port_of(port: &Tensor<i32>) -> Result<u16, Error> {
    port.as_slice()
        .first()
        .and_then(|p| u16::try_from(*p).ok())
        .ok_or_else(|| Error::invalid_argument("`port` must be a port number"))
}

/// Connects to `127.0.0.1:port` over TCP: uint8 scalar 1 if it connected.
#[wasmrpc_guest::method]
pub fn connect(port: Tensor<i32>) -> Result<Tensor<u8>, Error> {
    let port = port_of(&port)?;
    TcpStream::connect(("127.0.0.1", port))
        .map(|_| Tensor::scalar(1))
        .map_err(|e| Error::failed_precondition(format!("cannot connect to 127.0.0.1:{port}: {e}")))
}

/// Listens on a TCP port of its own: uint8 scalar 1 if it could.
#[wasmrpc_guest::method]
pub fn listen() -> Result<Tensor<u8>, Error> {
    TcpListener::bind("127.0.0.1:0")
        .map(|_| Tensor::scalar(1))
        .map_err(|e| Error::failed_precondition(format!("cannot listen on 127.0.0.1:0: {e}")))
}

/// Sends a UDP datagram to `127.0.0.1:port`: uint8 scalar 1 if it was sent.
#[wasmrpc_guest::method]
pub fn udp(port: Tensor<i32>) -> Result<Tensor<u8>, Error> {
    let port = port_of(&port)?;
    let socket = UdpSocket::bind("127.0.0.1:0")
        .map_err(|e| Error::failed_precondition(format!("cannot bind a UDP socket: {e}")))?;
    socket
        .send_to(b"wasmrpc guest", ("127.0.0.1", port))
        .map(|_| Tensor::scalar(1))
        .map_err(|e| Error::failed_precondition(format!("cannot send to 127.0.0.1:{port}: {e}")))
}

/// Looks up `localhost`: the number of addresses as an int64 scalar.
#[wasmrpc_guest::method]
pub fn resolve() -> Result<Tensor<i64>, Error> {
    ("localhost", 80)
        .to_socket_addrs()
        .map(|addrs| Tensor::scalar(addrs.count() as i64))
        .map_err(|e| Error::failed_precondition(format!("cannot resolve localhost: {e}")))
}

wasmrpc_guest::export!(connect, listen, udp, resolve);

//! A component that reaches for the host's files and environment, which a guest does not get:
//! it imports `wasi:filesystem/types`, `wasi:filesystem/preopens` and `wasi:cli/environment`
//! (Rust's std does for any of these), uploads, and every attempt fails inside the guest, which
//! says so in its answer (the sandbox has no preopened directory, no variables, no arguments).
//!
//! | method | what it does | what the host should answer |
//! |---|---|---|
//! | `read` | reads `/etc/passwd` | NOT_FOUND naming the guest's I/O error |
//! | `list_root` | lists the directory `/` | NOT_FOUND naming the guest's I/O error |
//! | `write` | creates `/tmp/wasmrpc-guest-was-here` | NOT_FOUND naming the guest's I/O error |
//! | `environment` | counts the environment variables, the arguments and the bytes on stdin | int64 `[0, 0, 0]` |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-forbidden-fs`.

use std::io::Read;

use wasmrpc_guest::{Error, Tensor};

/// Reads `/etc/passwd` and returns its length in bytes as an int64 scalar.
#[wasmrpc_guest::method]
pub fn read() -> Result<Tensor<i64>, Error> {
    let text = std::fs::read_to_string("/etc/passwd")
        .map_err(|e| Error::not_found(format!("cannot read /etc/passwd: {e}")))?;
    Ok(Tensor::scalar(
        i64::try_from(text.len()).unwrap_or(i64::MAX),
    ))
}

/// Lists `/`: the number of entries as an int64 scalar.
#[wasmrpc_guest::method]
pub fn list_root() -> Result<Tensor<i64>, Error> {
    let entries =
        std::fs::read_dir("/").map_err(|e| Error::not_found(format!("cannot list /: {e}")))?;
    Ok(Tensor::scalar(entries.count() as i64))
}

/// Creates a file in `/tmp`: int64 scalar 1 if it did.
#[wasmrpc_guest::method]
pub fn write() -> Result<Tensor<i64>, Error> {
    std::fs::write("/tmp/wasmrpc-guest-was-here", b"hello")
        .map_err(|e| Error::not_found(format!("cannot write /tmp/wasmrpc-guest-was-here: {e}")))?;
    Ok(Tensor::scalar(1))
}

/// How many environment variables, arguments and bytes of stdin the guest sees.
#[wasmrpc_guest::method]
pub fn environment() -> Tensor<i64> {
    let mut stdin = Vec::new();
    // An error reads as nothing read.
    let _ = std::io::stdin().read_to_end(&mut stdin);
    Tensor::from_vec(vec![
        std::env::vars_os().count() as i64,
        std::env::args_os().count() as i64,
        stdin.len() as i64,
    ])
}

wasmrpc_guest::export!(read, list_root, write, environment);

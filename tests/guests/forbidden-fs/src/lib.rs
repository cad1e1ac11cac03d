//! A component that uses the filesystem, which wasmrpc forbids: its one method reads
//! `/etc/passwd`, so the component imports `wasi:filesystem/types` and `wasi:filesystem/preopens`
//! and the host must refuse it at upload, naming the import.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-forbidden-fs`.

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

wasmrpc_guest::export!(read);

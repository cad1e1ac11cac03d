//! `wasmrpc._native`: the small native core of the Python SDK.
//!
//! It wraps the Rust client (`wasmrpc-client`) and the embeddable server (`wasmrpc-host`), so
//! Python speaks the protocol through the one implementation the Rust side has. Everything
//! users see (TF's `Client.create`, the per-method attributes, numpy, the exceptions) is plain
//! Python in `python/wasmrpc/` on top of these few types.

mod client;
mod cluster;
mod errors;
mod pending;
mod runtime;
mod server;
mod tensors;
mod trace;

use pyo3::prelude::*;

/// The native module; `wasmrpc` imports it as `wasmrpc._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::NativeClient>()?;
    m.add_class::<cluster::NativeRpc>()?;
    m.add_class::<cluster::NativeCoordinator>()?;
    m.add_function(wrap_pyfunction!(cluster::speaks_nats, m)?)?;
    m.add_class::<pending::NativePending>()?;
    m.add_class::<server::NativeServer>()?;
    m.add_class::<tensors::TensorBuffer>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

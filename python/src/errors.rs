//! A [`Status`] from the Rust side as the Python exception named after its code
//! (`wasmrpc.errors`, e.g. `DeadlineExceededError`), all under `wasmrpc.errors.RpcError`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use wasmrpc_client::{Code, Error as Status};

/// The exception for `code` and `message`, made by `wasmrpc.errors.from_code` so that the
/// classes are defined once, in Python.
pub(crate) fn status_to_pyerr(py: Python<'_>, code: Code, message: &str) -> PyErr {
    let made = py
        .import("wasmrpc.errors")
        .and_then(|m| m.getattr("from_code"))
        .and_then(|f| f.call1((code.as_str(), message)));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(_) => PyRuntimeError::new_err(format!("{}: {message}", code.as_str())),
    }
}

/// [`status_to_pyerr`] for a whole status.
pub(crate) fn to_pyerr(py: Python<'_>, status: &Status) -> PyErr {
    status_to_pyerr(py, status.code(), status.message())
}

/// INVALID_ARGUMENT as a Python exception.
pub(crate) fn invalid_argument(py: Python<'_>, message: impl AsRef<str>) -> PyErr {
    status_to_pyerr(py, Code::InvalidArgument, message.as_ref())
}

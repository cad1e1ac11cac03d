//! [`NativeServer`]: the real wasmrpc server (`wasmrpc_host::Server`) inside the Python process,
//! TF's `rpc.Server`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use wasmrpc_host::{ComponentSource, Server};

use crate::errors::{invalid_argument, to_pyerr};
use crate::runtime::{runtime, wait};

/// An embedded server; its address is bound at creation.
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct NativeServer {
    server: Arc<Server>,
}

/// `host:port` to one socket address, a name such as `localhost` resolved (IPv4 first, as TF's
/// examples' `localhost:PORT` means loopback).
fn resolve(py: Python<'_>, address: &str) -> PyResult<SocketAddr> {
    if let Ok(addr) = address.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let addrs: Vec<SocketAddr> = address
        .to_socket_addrs()
        .map_err(|e| invalid_argument(py, format!("`{address}` is not a usable address: {e}")))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| invalid_argument(py, format!("`{address}` resolves to no address")))
}

#[pymethods]
impl NativeServer {
    /// Bind `address` (port 0 picks one) with a store in a temporary directory.
    #[staticmethod]
    fn create(py: Python<'_>, rpc_layer: String, address: String) -> PyResult<NativeServer> {
        let addr = resolve(py, &address)?.to_string();
        let server = wait(py, async move { Server::create(&rpc_layer, &addr).await })?
            .map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeServer {
            server: Arc::new(server),
        })
    }

    /// Bind `address` with a store in a temporary directory and join the cluster on the NATS
    /// servers `nats` as worker `name` of rank `rank` (Paddle's `init_rpc` in a worker).
    #[staticmethod]
    fn join_cluster(
        py: Python<'_>,
        address: String,
        nats: String,
        name: String,
        rank: u32,
    ) -> PyResult<NativeServer> {
        let addr = resolve(py, &address)?.to_string();
        let server = wait(py, async move {
            Server::join_cluster(&addr, &nats, &name, rank).await
        })?
        .map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeServer {
            server: Arc::new(server),
        })
    }

    /// The bound address, `host:port`.
    #[getter]
    fn address(&self) -> String {
        self.server.address().to_string()
    }

    /// Register a component's bytes, or the file at a path, as `name`; returns its info as
    /// JSON.
    #[pyo3(signature = (name, component=None, path=None, export=None))]
    fn register(
        &self,
        py: Python<'_>,
        name: String,
        component: Option<Vec<u8>>,
        path: Option<PathBuf>,
        export: Option<String>,
    ) -> PyResult<String> {
        let source = match (component, path) {
            (Some(bytes), None) => ComponentSource::Bytes(bytes),
            (None, Some(path)) => ComponentSource::Path(path),
            _ => return Err(invalid_argument(py, "give the component's bytes or a path")),
        };
        let server = self.server.clone();
        let info = wait(py, async move {
            server
                .register_export(&name, source, export.as_deref())
                .await
        })?
        .map_err(|e| to_pyerr(py, &e))?;
        serde_json::to_string(&info).map_err(|e| invalid_argument(py, e.to_string()))
    }

    /// Serve in the background; returns at once.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        let _entered = runtime()?.enter();
        self.server.start().map_err(|e| to_pyerr(py, &e))
    }

    /// Wait (GIL released; Ctrl-C interrupts) until the server has shut down.
    fn join(&self, py: Python<'_>) -> PyResult<()> {
        let server = self.server.clone();
        wait(py, async move { server.join().await })
    }

    /// Stop accepting, drain in-flight calls, and wait for that.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let server = self.server.clone();
        wait(py, async move { server.shutdown().await })
    }
}

//! The cluster from Python: [`NativeRpc`] (Paddle's `paddle.distributed.rpc`) and
//! [`NativeCoordinator`] (TF's `ClusterCoordinator`), over the Rust client's
//! `wasmrpc_client::cluster`; [`speaks_nats`] tells a NATS server from a worker's HTTP port.
//!
//! Which process is a worker and which a client is decided in Python
//! (`wasmrpc/distributed/rpc.py`); these types only carry calls.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyList;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use wasmrpc_client::cluster::WorkerInfo;
use wasmrpc_client::cluster::coordinator::ClusterCoordinator;
use wasmrpc_client::cluster::paddle::Rpc;

use crate::client::NativeClient;
use crate::errors::to_pyerr;
use crate::pending::NativePending;
use crate::runtime::{runtime, wait};
use crate::tensors::{tensors_from_py, tensors_to_py};
use crate::trace;

/// Calls whose value Python cannot see yet. The Rust side counts a call finished when its task
/// ends, a moment before the `NativePending` holding its value is done: what waits for every
/// call (`join`, `done`, `shutdown`) waits for these too, so that every value is done after it.
#[derive(Clone)]
struct Unsettled(Arc<watch::Sender<usize>>);

impl Unsettled {
    fn new() -> Unsettled {
        Unsettled(Arc::new(watch::Sender::new(0)))
    }

    /// A pending value for `call`, counted until Python can see it.
    fn track(
        &self,
        call: impl std::future::Future<
            Output = Result<Vec<wasmrpc_client::Tensor>, wasmrpc_client::Error>,
        > + Send
        + 'static,
    ) -> PyResult<NativePending> {
        self.0.send_modify(|n| *n += 1);
        let count = self.0.clone();
        NativePending::spawn_then(call, move || count.send_modify(|n| *n -= 1))
    }

    /// Resolves once every tracked value is visible.
    fn settled(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut count = self.0.subscribe();
        async move {
            let _ = count.wait_for(|n| *n == 0).await;
        }
    }

    fn none(&self) -> bool {
        *self.0.borrow() == 0
    }
}

/// A worker as `(name, rank, ip, port)`.
type PyWorker = (String, u32, String, u16);

fn worker(w: WorkerInfo) -> PyWorker {
    (w.name, w.rank, w.ip, w.port)
}

/// This process in the cluster: Paddle's RPC state after `init_rpc`.
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct NativeRpc {
    rpc: Rpc,
    /// `rpc_async` calls whose value Python cannot see yet: `shutdown` waits for them.
    unsettled: Unsettled,
}

#[pymethods]
impl NativeRpc {
    /// Attach `client`'s connection as process `name`, waiting (GIL released) for the cluster to
    /// have `world_size` workers when given.
    #[staticmethod]
    #[pyo3(signature = (client, name, world_size=None))]
    fn attach(
        py: Python<'_>,
        client: &NativeClient,
        name: String,
        world_size: Option<usize>,
    ) -> PyResult<NativeRpc> {
        let client = client.client(py)?;
        let rpc = wait(
            py,
            async move { Rpc::attach(client, &name, world_size).await },
        )?
        .map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeRpc {
            rpc,
            unsettled: Unsettled::new(),
        })
    }

    /// Run `method` on worker `to` and wait for its outputs (Paddle's `rpc_sync`), with the
    /// trace context of `traceparent` and `tracestate`, if any.
    #[pyo3(signature = (to, method, args, timeout_s, traceparent=None, tracestate=None))]
    #[allow(clippy::too_many_arguments)]
    fn rpc_sync<'py>(
        &self,
        py: Python<'py>,
        to: String,
        method: String,
        args: &Bound<'py, PyList>,
        timeout_s: f64,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        let trace = trace::context(py, traceparent, tracestate)?;
        let args = tensors_from_py(py, args)?;
        let rpc = self.rpc.clone();
        let outputs = wait(
            py,
            trace::within(trace, async move {
                rpc.rpc_sync(&to, &method, args, timeout_s).await
            }),
        )?
        .map_err(|e| to_pyerr(py, &e))?;
        tensors_to_py(py, &outputs)
    }

    /// Start `method` on worker `to` (Paddle's `rpc_async`); returns at once. The trace
    /// context as for `rpc_sync`.
    #[pyo3(signature = (to, method, args, timeout_s, traceparent=None, tracestate=None))]
    #[allow(clippy::too_many_arguments)]
    fn rpc_async(
        &self,
        py: Python<'_>,
        to: String,
        method: String,
        args: &Bound<'_, PyList>,
        timeout_s: f64,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> PyResult<NativePending> {
        let trace = trace::context(py, traceparent, tracestate)?;
        let args = tensors_from_py(py, args)?;
        // The call is counted as outstanding (for `shutdown`) the moment it starts; its task
        // takes the trace context from here.
        let future = {
            let _entered = runtime()?.enter();
            trace::starting(trace, || self.rpc.rpc_async(&to, &method, args, timeout_s))
        };
        self.unsettled.track(async move { future.wait().await })
    }

    /// The live worker named `name`.
    fn get_worker_info(&self, py: Python<'_>, name: String) -> PyResult<PyWorker> {
        let rpc = self.rpc.clone();
        wait(py, async move { rpc.get_worker_info(&name).await })?
            .map(worker)
            .map_err(|e| to_pyerr(py, &e))
    }

    /// Every live worker, by rank then name.
    fn get_all_worker_infos(&self, py: Python<'_>) -> PyResult<Vec<PyWorker>> {
        let rpc = self.rpc.clone();
        wait(py, async move { rpc.get_all_worker_infos().await })?
            .map(|all| all.into_iter().map(worker).collect())
            .map_err(|e| to_pyerr(py, &e))
    }

    /// This process's worker, or the worker it is connected to.
    fn get_current_worker_info(&self, py: Python<'_>) -> PyResult<PyWorker> {
        let rpc = self.rpc.clone();
        wait(py, async move { rpc.get_current_worker_info().await })?
            .map(worker)
            .map_err(|e| to_pyerr(py, &e))
    }

    /// Wait for this process's outstanding calls, then for the others (Paddle's `shutdown`).
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let rpc = self.rpc.clone();
        let settled = self.unsettled.settled();
        wait(py, async move {
            settled.await;
            rpc.shutdown().await
        })?
        .map_err(|e| to_pyerr(py, &e))
    }
}

/// TF's `ClusterCoordinator` over one client's connection.
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct NativeCoordinator {
    coordinator: ClusterCoordinator,
    /// Scheduled calls whose value Python cannot see yet: `join` and `done` wait for them.
    unsettled: Unsettled,
}

#[pymethods]
impl NativeCoordinator {
    /// A coordinator of the cluster `client` is connected to.
    #[new]
    fn new(py: Python<'_>, client: &NativeClient) -> PyResult<NativeCoordinator> {
        Ok(NativeCoordinator {
            coordinator: ClusterCoordinator::new(client.client(py)?),
            unsettled: Unsettled::new(),
        })
    }

    /// Run `method` on any available worker; returns at once. The trace context as for
    /// `NativeRpc.rpc_sync`.
    #[pyo3(signature = (method, args, traceparent=None, tracestate=None))]
    fn schedule(
        &self,
        py: Python<'_>,
        method: String,
        args: &Bound<'_, PyList>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> PyResult<NativePending> {
        let trace = trace::context(py, traceparent, tracestate)?;
        let args = tensors_from_py(py, args)?;
        // Counted as pending (for `join` and `done`) the moment it is scheduled.
        let value = {
            let _entered = runtime()?.enter();
            trace::starting(trace, || self.coordinator.schedule(&method, args))
        };
        self.unsettled.track(async move { value.fetch().await })
    }

    /// Wait (GIL released) for everything scheduled; raises the first error since the last
    /// `join`.
    fn join(&self, py: Python<'_>) -> PyResult<()> {
        let coordinator = self.coordinator.clone();
        let settled = self.unsettled.settled();
        wait(py, async move {
            let joined = coordinator.join().await;
            settled.await;
            joined
        })?
        .map_err(|e| to_pyerr(py, &e))
    }

    /// Whether everything scheduled has finished (never waits).
    fn done(&self) -> bool {
        self.unsettled.none()
    }
}

/// Whether `address` (`host:port`) is a NATS server: one greets every connection with `INFO`
/// at once, where an HTTP server waits for the client to speak.
#[pyfunction]
#[pyo3(signature = (address, timeout_ms=1000))]
pub(crate) fn speaks_nats(py: Python<'_>, address: String, timeout_ms: u64) -> PyResult<bool> {
    let probe = async move {
        let mut stream = tokio::net::TcpStream::connect(address.as_str())
            .await
            .ok()?;
        let mut greeting = [0u8; 5];
        stream.read_exact(&mut greeting).await.ok()?;
        Some(&greeting == b"INFO ")
    };
    let seen = wait(py, async move {
        tokio::time::timeout(Duration::from_millis(timeout_ms), probe)
            .await
            .ok()
            .flatten()
    })?;
    Ok(seen == Some(true))
}

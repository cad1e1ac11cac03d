//! The tokio runtime every client and server of this process runs on, made lazily per process
//! id: a runtime created before `fork` has no threads in the child, so the child makes its own.
//! tokio is built without its `parking_lot` feature (the workspace's `Cargo.toml`): that crate's
//! locks share one process-wide table of parked threads, which `fork` can copy mid-update, and a
//! child's runtime threads then crashed on it. std's locks keep their state in each lock.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

/// The runtime of the process whose id is stored with it.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// How often a thread that waits with the GIL released comes back to let Python handle signals
/// (Ctrl-C stops a `join()` or a long call's wait).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// This process's runtime, created on first use (and again in a forked child).
pub(crate) fn runtime() -> PyResult<&'static Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, runtime)) = *slot
        && owner == pid
    {
        return Ok(runtime);
    }
    // A runtime inherited through fork is never dropped: its worker threads do not exist here,
    // and shutting it down would wait for them. It stays leaked, as does the new one (it lives
    // as long as the process).
    // Tuned as `wasmrpc serve`'s HTTP workers are (`wasmrpc_host::server_runtime`): a
    // `NativeServer` in this process answers on it.
    let runtime = wasmrpc_host::server_runtime("wasmrpc-runtime")
        .map_err(|e| PyRuntimeError::new_err(format!("starting the wasmrpc runtime: {e}")))?;
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    *slot = Some((pid, runtime));
    Ok(runtime)
}

/// Run `fut` to completion on the runtime with the GIL released, coming back every
/// [`SIGNAL_CHECK`] to let Python raise `KeyboardInterrupt` (the future is then dropped).
pub(crate) fn wait<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let runtime = runtime()?;
    let mut fut = std::pin::pin!(fut);
    loop {
        let step = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_CHECK, fut.as_mut()).await.ok() })
        });
        if let Some(output) = step {
            return Ok(output);
        }
        py.check_signals()?;
    }
}

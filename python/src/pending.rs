//! [`NativePending`]: a call that was started and completes later, behind TF's
//! `StatusOrResult`. Python waits for it with the GIL released, or asks to be called back when
//! it completes (how `await` works without a thread per call).

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyList;
use tokio::sync::watch;
use wasmrpc_client::{Code, Error as Status, Tensor};

use crate::errors::{status_to_pyerr, to_pyerr};
use crate::runtime::{runtime, wait};
use crate::tensors::tensors_to_py;

type CallResult = Result<Vec<Tensor>, Status>;

#[derive(Default)]
struct State {
    result: Option<CallResult>,
    callbacks: Vec<Py<PyAny>>,
}

struct Shared {
    state: Mutex<State>,
    done: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A started call; `wait()` gives its outputs or raises its error.
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct NativePending {
    shared: Arc<Shared>,
    /// The process that started the call: its runtime is the one that completes it.
    pid: u32,
}

impl NativePending {
    /// Run `call` on the runtime; the pending result completes when it does.
    pub(crate) fn spawn(
        call: impl Future<Output = CallResult> + Send + 'static,
    ) -> PyResult<NativePending> {
        NativePending::spawn_then(call, || ())
    }

    /// [`NativePending::spawn`], running `settled` once the result is visible to Python (for
    /// a count of calls not yet settled that must not run ahead of `done()`).
    pub(crate) fn spawn_then(
        call: impl Future<Output = CallResult> + Send + 'static,
        settled: impl FnOnce() + Send + 'static,
    ) -> PyResult<NativePending> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            done: watch::Sender::new(false),
        });
        let task = shared.clone();
        runtime()?.spawn(async move {
            let result = call.await;
            let callbacks = {
                let mut state = task.lock();
                state.result = Some(result);
                std::mem::take(&mut state.callbacks)
            };
            task.done.send_replace(true);
            settled();
            if !callbacks.is_empty() {
                // Python code may block on the GIL: not on a runtime worker.
                tokio::task::spawn_blocking(move || run_callbacks(callbacks));
            }
        });
        Ok(NativePending {
            shared,
            pid: std::process::id(),
        })
    }

    /// Wait (GIL released) until the call completes; CANCELLED for a call started in the parent
    /// of a forked process, which this process can never complete.
    fn wait_done(&self, py: Python<'_>) -> PyResult<()> {
        if *self.shared.done.borrow() {
            return Ok(());
        }
        if self.pid != std::process::id() {
            return Err(status_to_pyerr(
                py,
                Code::Cancelled,
                "the call was started in the parent process before fork and cannot complete \
                 in the child; start it again in the child",
            ));
        }
        let mut done = self.shared.done.subscribe();
        wait(py, async move {
            let _ = done.wait_for(|d| *d).await;
        })
    }
}

fn run_callbacks(callbacks: Vec<Py<PyAny>>) {
    // Not at all during interpreter shutdown.
    Python::try_attach(|py| {
        for callback in callbacks {
            if let Err(e) = callback.call0(py) {
                e.write_unraisable(py, None);
            }
        }
    });
}

#[pymethods]
impl NativePending {
    /// Whether the call has completed (never waits).
    fn done(&self) -> bool {
        *self.shared.done.borrow()
    }

    /// The outputs as `(dtype, shape, data)` triples; raises the call's error.
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.wait_done(py)?;
        let state = self.shared.lock();
        match &state.result {
            Some(Ok(tensors)) => tensors_to_py(py, tensors),
            Some(Err(status)) => Err(to_pyerr(py, status)),
            None => Err(status_to_pyerr(
                py,
                Code::Internal,
                "the call has no result",
            )),
        }
    }

    /// `(code, message)` of a failed call, `None` for a successful one (waits).
    fn error(&self, py: Python<'_>) -> PyResult<Option<(String, String)>> {
        self.wait_done(py)?;
        let state = self.shared.lock();
        Ok(match &state.result {
            Some(Err(status)) => Some((
                status.code().as_str().to_owned(),
                status.message().to_owned(),
            )),
            _ => None,
        })
    }

    /// Call `callback()` (no arguments) once the call completes, from a thread of the runtime;
    /// at once, on this thread, if it already has.
    fn add_done_callback(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        {
            let mut state = self.shared.lock();
            if state.result.is_none() {
                state.callbacks.push(callback);
                return Ok(());
            }
        }
        callback.call0(py).map(drop)
    }
}

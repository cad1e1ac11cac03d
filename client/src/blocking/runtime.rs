//! The runtime thread behind every blocking client: one thread running a single-threaded tokio
//! runtime, where the async client does its work while the calling thread only waits.
//!
//! Kept apart from the facade so that the one piece of machinery that is not a mirror of the
//! async client (starting, feeding and stopping the thread, and refusing to block inside a
//! runtime) lives in one place.

use std::future::Future;
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::code::Code;
use crate::error::Error;

/// Panic, with a message that says what to do instead, when the caller is inside a tokio runtime.
#[track_caller]
pub(super) fn assert_not_in_runtime(what: &str) {
    if Handle::try_current().is_ok() {
        panic!(
            "wasmrpc_client::blocking::{what} was called from inside an async runtime, where \
             blocking would stall the runtime's thread. Use the async wasmrpc_client::Client \
             there (and `.await` it), or call the blocking client from a thread of its own \
             (std::thread::spawn; a tokio spawn_blocking closure counts as inside the runtime)."
        );
    }
}

/// The runtime thread. Tasks reach it through its runtime's handle, which may be used from any
/// thread; the thread itself only drives the runtime until told to stop.
#[derive(Debug)]
pub(super) struct Worker {
    runtime: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl Worker {
    /// Start the thread and its runtime.
    pub(super) fn start() -> Result<Arc<Worker>, Error> {
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("wasmrpc-client-runtime".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(runtime.handle().clone()));
                // A current-thread runtime runs its tasks only while some thread is inside its
                // `block_on`: this one, until the last owner lets go.
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
                // Dropping the runtime cancels whatever still runs, and nobody is left waiting
                // for it.
            })
            .map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("cannot start the client's runtime thread: {e}"),
                )
            })?;
        let runtime = match ready_rx.recv() {
            Ok(Ok(runtime)) => runtime,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(Error::new(
                    Code::Internal,
                    format!("cannot start the client's runtime: {e}"),
                ));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(Error::new(
                    Code::Internal,
                    "the client's runtime thread exited at start",
                ));
            }
        };
        Ok(Arc::new(Worker {
            runtime,
            stop: Some(stop),
            thread_id: thread.thread().id(),
            thread: Some(thread),
        }))
    }

    /// The runtime the thread drives, for starting tasks on it without waiting.
    pub(super) fn runtime(&self) -> &Handle {
        &self.runtime
    }

    /// Run `fut` on the runtime thread and wait for its result.
    ///
    /// # Panics
    /// Inside an async runtime, naming `what` (see [`assert_not_in_runtime`]).
    #[track_caller]
    pub(super) fn run<T: Send + 'static>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        assert_not_in_runtime(what);
        let (tx, rx) = oneshot::channel();
        // The calling thread's trace context goes with the task (`trace::scope_blocking`).
        self.runtime.spawn(crate::trace::carry(async move {
            let _ = tx.send(fut.await);
        }));
        // The worker outlives this call (`self` holds it), so the task can only be dropped
        // unfinished if the runtime failed; say so rather than hang.
        rx.blocking_recv().unwrap_or_else(|_| {
            Err(Error::new(
                Code::Cancelled,
                "the blocking client's runtime thread stopped before the call finished",
            ))
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // Never join from the runtime thread itself, nor block an async caller: the thread
            // then finishes on its own.
            let on_worker = std::thread::current().id() == self.thread_id;
            if !on_worker && Handle::try_current().is_err() {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_thread_runs_work() {
        let worker = Worker::start().unwrap();
        let answer = worker.run("test", async { Ok::<_, Error>(6 * 7) }).unwrap();
        assert_eq!(answer, 42);
    }

    #[test]
    #[should_panic(expected = "was called from inside an async runtime")]
    fn waiting_inside_a_runtime_panics_with_advice() {
        let worker = Worker::start().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = worker.run("test", async { Ok::<_, Error>(()) });
        });
    }
}

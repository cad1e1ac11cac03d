//! The blocking [`StatusOrResult`]: the async [`crate::StatusOrResult`], waited for on the
//! client's runtime thread.
//!
//! It adds no state of its own beyond keeping that thread alive, so both clients agree on when
//! a call completes and on what it reports.

use std::sync::Arc;

use super::runtime::Worker;
use crate::code::Code;
use crate::error::Error;
use crate::tensor::Tensor;

/// The pending result of a blocking client's call: TF's `StatusOrResult`.
///
/// `is_ok`, `get_error` and `get_value` block until the call completes; they may be called any
/// number of times, from any thread. While it exists, it keeps the client's runtime thread alive.
///
/// ```no_run
/// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::Tensor;
/// let result = client.call("addition", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], None, None);
/// // … other work while the call runs …
/// if result.is_ok() {
///     println!("{:?}", result.get_value()?);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct StatusOrResult {
    // Shared with the task that waits for it on the runtime thread.
    inner: Arc<crate::StatusOrResult>,
    worker: Arc<Worker>,
}

impl StatusOrResult {
    pub(super) fn new(inner: crate::StatusOrResult, worker: &Arc<Worker>) -> Self {
        StatusOrResult {
            inner: Arc::new(inner),
            worker: worker.clone(),
        }
    }

    /// Whether the call succeeded (blocks until it completes).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)), even when the call has
    /// already completed: whether a call panics must not depend on timing.
    ///
    /// ```no_run
    /// # fn demo(result: wasmrpc_client::blocking::StatusOrResult) {
    /// if result.is_ok() { println!("done"); }
    /// # }
    /// ```
    #[track_caller]
    pub fn is_ok(&self) -> bool {
        let inner = self.inner.clone();
        self.worker
            .run(
                "StatusOrResult::is_ok",
                async move { Ok(inner.is_ok().await) },
            )
            .unwrap_or(false)
    }

    /// The canonical code and message if the call failed, `None` if it succeeded (blocks until
    /// it completes).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn demo(result: wasmrpc_client::blocking::StatusOrResult) {
    /// if let Some((code, message)) = result.get_error() {
    ///     eprintln!("{code}: {message}");
    /// }
    /// # }
    /// ```
    #[track_caller]
    pub fn get_error(&self) -> Option<(Code, String)> {
        let inner = self.inner.clone();
        self.worker
            .run("StatusOrResult::get_error", async move {
                Ok(inner.get_error().await)
            })
            .unwrap_or_else(|e| Some(e.into_parts()))
    }

    /// The outputs, or the error (blocks until the call completes).
    ///
    /// # Errors
    /// The call's error with its canonical code.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn demo(result: wasmrpc_client::blocking::StatusOrResult) -> Result<(), wasmrpc_client::Error> {
    /// for output in result.get_value()? {
    ///     println!("{} {:?}", output.dtype(), output.shape());
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn get_value(&self) -> Result<Vec<Tensor>, Error> {
        let inner = self.inner.clone();
        self.worker.run("StatusOrResult::get_value", async move {
            inner.get_value().await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Sets its flag when dropped.
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn spawn(
        worker: &Arc<Worker>,
        call: impl Future<Output = Result<Vec<Tensor>, Error>> + Send + 'static,
    ) -> StatusOrResult {
        StatusOrResult::new(
            crate::StatusOrResult::spawn_on(worker.runtime(), call),
            worker,
        )
    }

    #[test]
    fn the_runtime_thread_runs_work_and_stops_when_the_last_owner_drops() {
        let worker = Worker::start().unwrap();
        let answer = worker.run("test", async { Ok::<_, Error>(6 * 7) }).unwrap();
        assert_eq!(answer, 42);

        // A task that never finishes, holding a guard: the drop below must end it.
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = OnDrop(dropped.clone());
        worker.runtime().spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let result = spawn(&worker, std::future::pending());
        drop(worker);
        // The result still holds the thread.
        assert!(!dropped.load(Ordering::SeqCst));
        drop(result);
        // Joined: the runtime is gone, and the task with it.
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn results_can_be_read_many_times_and_from_other_threads() {
        let worker = Worker::start().unwrap();
        let result = Arc::new(spawn(&worker, async { Ok(vec![Tensor::scalar(5i32)]) }));
        let other = {
            let result = result.clone();
            std::thread::spawn(move || result.get_value())
        };
        assert!(result.is_ok());
        assert_eq!(result.get_error(), None);
        assert_eq!(result.get_value().unwrap(), vec![Tensor::scalar(5i32)]);
        assert_eq!(other.join().unwrap().unwrap(), vec![Tensor::scalar(5i32)]);
    }

    #[test]
    #[should_panic(expected = "was called from inside an async runtime")]
    fn reading_a_completed_result_inside_a_runtime_panics_too() {
        let worker = Worker::start().unwrap();
        let result = spawn(&worker, async { Ok(vec![]) });
        assert!(result.is_ok());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = result.get_value();
        });
    }
}

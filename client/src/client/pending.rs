//! [`StatusOrResult`]: the result of a call that was started and not yet awaited, TF's
//! `StatusOrResult`.
//!
//! There is one such type for both clients: the blocking facade wraps this one and waits for it
//! on its runtime thread, so when and how a call completes, and what a cancelled call reports,
//! is decided here once.

use std::future::Future;

use tokio::sync::{Mutex, OnceCell, oneshot};

use crate::code::Code;
use crate::error::Error;
use crate::tensor::Tensor;

/// What a call ends with.
type CallResult = Result<Vec<Tensor>, Error>;

/// The pending result of a call: TF's `StatusOrResult`.
///
/// `is_ok`, `get_error` and `get_value` wait for the call to complete; they may be called any
/// number of times. Dropping it does not cancel the call.
///
/// ```no_run
/// # async fn demo(client: wasmrpc_client::Client) {
/// use wasmrpc_client::Tensor;
/// let result = client.call("addition", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], None, None);
/// match result.get_error().await {
///     None => println!("{:?}", result.get_value().await),
///     Some((code, message)) => eprintln!("{code}: {message}"),
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct StatusOrResult {
    // The receiver is taken by the first waiter; the result it brings is kept for every later one.
    pending: Mutex<Option<oneshot::Receiver<CallResult>>>,
    result: OnceCell<CallResult>,
}

impl StatusOrResult {
    /// Run `call` as a task on `runtime`; the result completes when it does. A task dropped
    /// unfinished (its runtime shut down) reports CANCELLED.
    pub(crate) fn spawn_on(
        runtime: &tokio::runtime::Handle,
        call: impl Future<Output = CallResult> + Send + 'static,
    ) -> Self {
        let (tx, rx) = oneshot::channel();
        // The task takes the caller's trace context along (a new task has none).
        runtime.spawn(crate::trace::carry(async move {
            let _ = tx.send(call.await);
        }));
        StatusOrResult {
            pending: Mutex::new(Some(rx)),
            result: OnceCell::new(),
        }
    }

    /// A result known without a call (arguments refused before sending).
    pub(crate) fn ready(result: CallResult) -> Self {
        StatusOrResult {
            pending: Mutex::new(None),
            result: OnceCell::new_with(Some(result)),
        }
    }

    async fn wait(&self) -> &CallResult {
        self.result
            .get_or_init(|| async {
                let rx = self.pending.lock().await.take();
                match rx {
                    Some(rx) => rx.await.unwrap_or_else(|_| {
                        Err(Error::new(Code::Cancelled, "the call was cancelled"))
                    }),
                    None => Err(Error::new(Code::Internal, "the call has no result")),
                }
            })
            .await
    }

    /// Whether the call succeeded (waits for it).
    ///
    /// ```no_run
    /// # async fn demo(result: wasmrpc_client::StatusOrResult) {
    /// if result.is_ok().await { println!("done"); }
    /// # }
    /// ```
    pub async fn is_ok(&self) -> bool {
        self.wait().await.is_ok()
    }

    /// The canonical code and message if the call failed, `None` if it succeeded (waits for it).
    ///
    /// ```no_run
    /// # async fn demo(result: wasmrpc_client::StatusOrResult) {
    /// if let Some((code, message)) = result.get_error().await {
    ///     eprintln!("{code}: {message}");
    /// }
    /// # }
    /// ```
    pub async fn get_error(&self) -> Option<(Code, String)> {
        self.wait()
            .await
            .as_ref()
            .err()
            .map(|e| (e.code(), e.message().to_owned()))
    }

    /// The outputs, or the error (waits for the call).
    ///
    /// # Errors
    /// The call's error with its canonical code.
    ///
    /// ```no_run
    /// # async fn demo(result: wasmrpc_client::StatusOrResult) -> Result<(), wasmrpc_client::Error> {
    /// for output in result.get_value().await? {
    ///     println!("{} {:?}", output.dtype(), output.shape());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_value(&self) -> Result<Vec<Tensor>, Error> {
        self.wait().await.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_result_is_read_many_times_and_a_ready_one_needs_no_task() {
        let spawned = StatusOrResult::spawn_on(&tokio::runtime::Handle::current(), async {
            Ok(vec![Tensor::scalar(5i32)])
        });
        for _ in 0..2 {
            assert!(spawned.is_ok().await);
            assert_eq!(spawned.get_error().await, None);
            assert_eq!(spawned.get_value().await.unwrap(), [Tensor::scalar(5i32)]);
        }
        let refused = StatusOrResult::ready(Err(Error::new(Code::InvalidArgument, "no")));
        assert!(!refused.is_ok().await);
        assert_eq!(
            refused.get_error().await,
            Some((Code::InvalidArgument, "no".to_owned()))
        );
    }

    #[test]
    fn a_call_whose_runtime_shut_down_is_cancelled() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let result = StatusOrResult::spawn_on(runtime.handle(), std::future::pending());
        drop(runtime);
        let waiter = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (code, _) = waiter.block_on(result.get_error()).unwrap();
        assert_eq!(code, Code::Cancelled);
    }
}

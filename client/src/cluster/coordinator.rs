//! TensorFlow's `tf.distribute.experimental.coordinator.ClusterCoordinator` over a wasmrpc
//! cluster: [`ClusterCoordinator::schedule`] runs a registered method on any available worker and
//! returns a [`RemoteValue`] at once; [`ClusterCoordinator::join`] waits for everything scheduled.
//!
//! | TensorFlow | wasmrpc-client |
//! |---|---|
//! | `coordinator.schedule(fn, args)` | [`ClusterCoordinator::schedule`]`(method, args)` |
//! | `remote_value.fetch()` / `get()` | [`RemoteValue::fetch`] / [`RemoteValue::get`] |
//! | `tf.errors.CancelledError` | an error with code [`Code::Cancelled`] |
//! | `coordinator.join()` / `done()` | [`ClusterCoordinator::join`] / [`ClusterCoordinator::done`] |
//!
//! A scheduled call runs at least once: when its worker dies it runs again on another (the server
//! does that). One that cannot complete because no worker can take it resolves to CANCELLED,
//! never hangs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::Target;
use crate::client::{Client, StatusOrResult};
use crate::code::Code;
use crate::error::Error;
use crate::tensor::Tensor;

/// Schedules calls on the workers of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterCoordinator {
    client: Client,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    pending: AtomicUsize,
    idle: Notify,
    first_error: Mutex<Option<Error>>,
}

/// The value of a scheduled call, once it completes.
#[derive(Debug)]
pub struct RemoteValue(StatusOrResult);

impl RemoteValue {
    /// Wait for the call and return its outputs.
    ///
    /// # Errors
    /// CANCELLED when the call could not complete on any worker; the method's error otherwise.
    pub async fn fetch(&self) -> Result<Vec<Tensor>, Error> {
        self.0.get_value().await
    }

    /// As [`RemoteValue::fetch`] (TensorFlow's `get` returns the tensors where `fetch` returns
    /// numpy values; here both are tensors).
    ///
    /// # Errors
    /// As [`RemoteValue::fetch`].
    pub async fn get(&self) -> Result<Vec<Tensor>, Error> {
        self.fetch().await
    }
}

impl ClusterCoordinator {
    /// A coordinator of the cluster `client` is connected to.
    pub fn new(client: Client) -> Self {
        ClusterCoordinator {
            client,
            state: Arc::default(),
        }
    }

    /// Run `method` with `args` on any available worker; returns at once.
    ///
    /// # Panics
    /// Outside a tokio runtime (the call runs as a task).
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// use wasmrpc_client::cluster::coordinator::ClusterCoordinator;
    /// let coordinator = ClusterCoordinator::new(client);
    /// let value = coordinator.schedule("add", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
    /// coordinator.join().await?;
    /// assert_eq!(value.fetch().await?[0].to_vec::<i32>()?, vec![5]);
    /// # Ok(()) }
    /// ```
    pub fn schedule(&self, method: &str, args: Vec<Tensor>) -> RemoteValue {
        let (client, state, method) = (self.client.clone(), self.state.clone(), method.to_owned());
        state.pending.fetch_add(1, Ordering::AcqRel);
        RemoteValue(StatusOrResult::spawn_on(
            &tokio::runtime::Handle::current(),
            async move {
                let result = client
                    .call_worker(Target::Any, &method, args, Duration::ZERO)
                    .await
                    .map_err(|e| match e.code() {
                        // No worker could take it, or the cluster could not be reached.
                        Code::Unavailable => Error::new(
                            Code::Cancelled,
                            format!("`{method}` could not complete: {}", e.message()),
                        ),
                        _ => e,
                    });
                if let Err(e) = &result {
                    state
                        .first_error
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_or_insert_with(|| e.clone());
                }
                if state.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                    state.idle.notify_waiters();
                }
                result
            },
        ))
    }

    /// Wait for every scheduled call to finish.
    ///
    /// # Errors
    /// The first error of a scheduled call since the last `join` (TensorFlow raises it here).
    pub async fn join(&self) -> Result<(), Error> {
        loop {
            let idle = self.state.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.state.pending.load(Ordering::Acquire) == 0 {
                break;
            }
            idle.await;
        }
        match self
            .state
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether every scheduled call has finished.
    pub fn done(&self) -> bool {
        self.state.pending.load(Ordering::Acquire) == 0
    }
}

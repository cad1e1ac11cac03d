//! The blocking [`MethodHandle`]: the async [`crate::MethodHandle`], with its waits done on the
//! client's runtime thread.

use std::sync::Arc;
use std::time::Duration;

use super::StatusOrResult;
use super::runtime::Worker;
use crate::error::Error;
use crate::signature::{MethodInfo, MethodSignature};
use crate::tensor::Tensor;

/// A handle for one method of a blocking [`Client`](super::Client): TF's `client.<method>(…)`
/// ([`call`]) and `client.<method>_blocking(…)` ([`call_blocking`]).
///
/// Arguments are checked against the signature (arity, dtype, shape with dynamic dimensions)
/// before anything is sent.
///
/// [`call`]: MethodHandle::call
/// [`call_blocking`]: MethodHandle::call_blocking
///
/// ```no_run
/// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::Tensor;
/// let addition = client.method("addition")?;
/// let pending = addition.call(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
/// let sum = addition.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])?;
/// assert_eq!(pending.get_value()?, sum);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MethodHandle {
    inner: crate::MethodHandle,
    worker: Arc<Worker>,
}

impl MethodHandle {
    pub(super) fn new(inner: crate::MethodHandle, worker: Arc<Worker>) -> MethodHandle {
        MethodHandle { inner, worker }
    }

    /// The name the method is registered under.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) {
    /// assert_eq!(addition.name(), "addition");
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The method's signature.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) {
    /// println!("takes {} argument(s)", addition.signature().inputs.len());
    /// # }
    /// ```
    pub fn signature(&self) -> &MethodSignature {
        self.inner.signature()
    }

    /// The method's registration metadata.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) {
    /// println!("version {}", addition.info().version);
    /// # }
    /// ```
    pub fn info(&self) -> &MethodInfo {
        self.inner.info()
    }

    /// Start a call and return at once, with the client's default timeout. Arguments that do
    /// not fit the signature make the result INVALID_ARGUMENT without anything being sent.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) {
    /// use wasmrpc_client::Tensor;
    /// let result = addition.call(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
    /// assert!(result.is_ok());
    /// # }
    /// ```
    pub fn call(&self, args: Vec<Tensor>) -> StatusOrResult {
        StatusOrResult::new(
            self.inner.call_on(self.worker.runtime(), args),
            &self.worker,
        )
    }

    /// Call and wait for the outputs (TF's `<method>_blocking`), with the client's default
    /// timeout.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for arguments off the signature (nothing sent), or the call's error.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let sum = addition.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])?;
    /// assert_eq!(sum[0].to_vec::<i32>()?, vec![5]);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call_blocking(&self, args: Vec<Tensor>) -> Result<Vec<Tensor>, Error> {
        let inner = self.inner.clone();
        self.worker.run("MethodHandle::call_blocking", async move {
            inner.call_blocking(args).await
        })
    }

    /// [`MethodHandle::call_blocking`] with an explicit timeout (`ZERO`: none).
    ///
    /// # Errors
    /// As [`MethodHandle::call_blocking`]; DEADLINE_EXCEEDED past `timeout`.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::blocking::MethodHandle) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::Tensor;
    /// let args = vec![Tensor::scalar(2i32), Tensor::scalar(3i32)];
    /// let sum = addition.call_with_timeout(args, Duration::from_millis(250))?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call_with_timeout(
        &self,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let inner = self.inner.clone();
        self.worker
            .run("MethodHandle::call_with_timeout", async move {
                inner.call_with_timeout(args, timeout).await
            })
    }
}

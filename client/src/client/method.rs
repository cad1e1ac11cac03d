//! [`MethodHandle`]: one method of a [`Client`], standing in for the `client.<method>` and
//! `client.<method>_blocking` attributes TensorFlow adds at run time, which Rust cannot.
//!
//! A handle carries the signature known when it was made, so arguments that do not fit it are
//! refused here, without a request.

use std::time::Duration;

use super::{Client, StatusOrResult};
use crate::code::Code;
use crate::error::Error;
use crate::signature::{MethodInfo, MethodSignature};
use crate::tensor::Tensor;

/// A handle for one method: `call` (returns at once) and `call_blocking`-style awaiting.
///
/// It stands in for TF's dynamically added `client.<method>` and `client.<method>_blocking`.
/// The signature is the one known when the handle was made; arguments are checked against it
/// (arity, dtype, shape with dynamic dimensions) before anything is sent.
///
/// ```no_run
/// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::Tensor;
/// let addition = client.method("addition")?;
/// let sum = addition.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]).await?;
/// // A float32 argument is refused here, without a request.
/// let err = addition.call_blocking(vec![Tensor::scalar(2f32), Tensor::scalar(3f32)]).await;
/// assert!(err.unwrap_err().is_invalid_argument());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MethodHandle {
    client: Client,
    info: MethodInfo,
}

impl MethodHandle {
    pub(super) fn new(client: Client, info: MethodInfo) -> MethodHandle {
        MethodHandle { client, info }
    }

    /// The method's signature.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::MethodHandle) {
    /// println!("{} takes {} argument(s)", addition.name(), addition.signature().inputs.len());
    /// # }
    /// ```
    pub fn signature(&self) -> &MethodSignature {
        &self.info.signature
    }

    /// The method's registration metadata.
    ///
    /// ```no_run
    /// # fn demo(addition: wasmrpc_client::MethodHandle) {
    /// println!("version {} ({})", addition.info().version, addition.info().digest);
    /// # }
    /// ```
    pub fn info(&self) -> &MethodInfo {
        &self.info
    }

    /// The name the method is registered under.
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// assert_eq!(client.method("addition")?.name(), "addition");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.info.name
    }

    fn check(&self, args: &[Tensor]) -> Result<(), Error> {
        self.info
            .signature
            .check_args(args)
            .map_err(|why| Error::new(Code::InvalidArgument, why))
    }

    /// Start a call and return at once (TF's `client.<method>(args…)`), with the client's
    /// default timeout. Arguments that do not fit the signature make the result an
    /// INVALID_ARGUMENT error without anything being sent.
    ///
    /// # Panics
    /// Outside a tokio runtime, as [`Client::call`].
    ///
    /// ```no_run
    /// # async fn demo(addition: wasmrpc_client::MethodHandle) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let result = addition.call(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
    /// assert!(result.is_ok().await);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call(&self, args: Vec<Tensor>) -> StatusOrResult {
        self.call_on(&tokio::runtime::Handle::current(), args)
    }

    /// [`MethodHandle::call`] on `runtime` (the blocking client's runtime thread).
    pub(crate) fn call_on(
        &self,
        runtime: &tokio::runtime::Handle,
        args: Vec<Tensor>,
    ) -> StatusOrResult {
        if let Err(e) = self.check(&args) {
            return StatusOrResult::ready(Err(e));
        }
        self.client
            .call_on(runtime, &self.info.name, args, None, None)
    }

    /// Call and wait for the outputs (the async form of TF's `<method>_blocking`), with the
    /// client's default timeout.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for arguments off the signature (nothing sent), or the call's error.
    ///
    /// ```no_run
    /// # async fn demo(addition: wasmrpc_client::MethodHandle) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let sum = addition.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]).await?;
    /// assert_eq!(sum[0].to_vec::<i32>()?, vec![5]);
    /// # Ok(()) }
    /// ```
    pub async fn call_blocking(&self, args: Vec<Tensor>) -> Result<Vec<Tensor>, Error> {
        self.check(&args)?;
        self.client
            .call_async(&self.info.name, args, None, None)
            .await
    }

    /// [`MethodHandle::call_blocking`] with an explicit timeout (`ZERO`: none).
    ///
    /// # Errors
    /// As [`MethodHandle::call_blocking`]; DEADLINE_EXCEEDED past `timeout`.
    ///
    /// ```no_run
    /// # async fn demo(addition: wasmrpc_client::MethodHandle) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::Tensor;
    /// let args = vec![Tensor::scalar(2i32), Tensor::scalar(3i32)];
    /// let sum = addition.call_with_timeout(args, Duration::from_millis(250)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_with_timeout(
        &self,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        self.check(&args)?;
        self.client
            .call_async(&self.info.name, args, None, Some(timeout))
            .await
    }
}

//! The blocking client: the async [`crate::Client`] driven by a runtime thread of its own.
//!
//! Modelled on `reqwest::blocking`: each [`Client`] starts one thread running a single-threaded
//! tokio runtime; every request runs there as a task and is answered on a oneshot, so the
//! calling thread only waits. Many calls may be in flight at once ([`Client::call`] returns at
//! once), and they share one HTTP/2 connection. The thread stops, and is joined, when the last
//! [`Client`], [`MethodHandle`] and [`StatusOrResult`] that use it are dropped; calls still in
//! flight then are cancelled.
//!
//! Every type here is a thin mirror of its async namesake and wraps it: the same builder
//! settings, the same checks, the same pending result. The files follow the async client's:
//! this one holds the [`Client`], `builder` connects, `method` is the per-method handle,
//! `pending` the result that completes later, and `runtime` the thread they all wait on.
//!
//! # Panics
//!
//! Every method that waits panics when called from inside an async runtime (a tokio task, a
//! `block_on`, or a `spawn_blocking` closure): blocking there would stall the runtime. Use the
//! async [`crate::Client`] there, or move the blocking client to a thread of its own.
//!
//! ```no_run
//! use std::time::Duration;
//! use wasmrpc_client::{Tensor, blocking::Client};
//!
//! # fn main() -> Result<(), wasmrpc_client::Error> {
//! let client = Client::create("http", "127.0.0.1:8080", "demo", Duration::from_secs(5))?;
//! let (a, b) = (Tensor::scalar(2i32), Tensor::scalar(3i32));
//!
//! let result = client.call("addition", vec![a.clone(), b.clone()], None, None);
//! if result.is_ok() {
//!     println!("{:?}", result.get_value()?[0].to_vec::<i32>()?);
//! }
//! let addition = client.method("addition")?;
//! let pending = addition.call(vec![a.clone(), b.clone()]); // TF: client.addition(a, b)
//! let sum = addition.call_blocking(vec![a, b])?;           // TF: client.addition_blocking(a, b)
//! assert_eq!(sum[0].to_vec::<i32>()?, vec![5]);
//! # Ok(()) }
//! ```

mod builder;
mod cluster;
mod method;
mod pending;
mod runtime;

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::signature::{MethodInfo, TensorSpec};
use crate::tensor::Tensor;
use runtime::Worker;

pub use builder::ClientBuilder;
pub use method::MethodHandle;
pub use pending::StatusOrResult;

/// A blocking connection to one wasmrpc server: [`crate::Client`] without `.await`.
///
/// Cloning is cheap; clones share the runtime thread, the HTTP/2 connection and the method
/// list. See the [module documentation](self) for the threading model.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> Result<(), wasmrpc_client::Error> {
/// let client = wasmrpc_client::blocking::Client::create(
///     "http", "127.0.0.1:8080", "demo", Duration::from_secs(5))?;
/// for m in client.list_registered_methods() {
///     println!("{}", m.name);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    worker: Arc<Worker>,
}

impl Client {
    /// Start the runtime thread, connect to the server at `address` and fetch its methods, like
    /// TF's `Client.create` (see [`crate::Client::create`]).
    ///
    /// `rpc_layer` is `"http"` or `"https"` (see [`Client::builder`] for a private CA or a key);
    /// `name` identifies this client in the server's logs; `timeout` is the default for every
    /// call and bounds creation itself (`Duration::ZERO`: no timeout).
    ///
    /// # Errors
    /// INVALID_ARGUMENT for an unsupported rpc layer (listing the supported ones) or a bad address;
    /// DEADLINE_EXCEEDED when the server does not answer within `timeout`; UNAVAILABLE when it
    /// cannot be reached.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> Result<(), wasmrpc_client::Error> {
    /// let client = wasmrpc_client::blocking::Client::create(
    ///     "http", "127.0.0.1:8080", "demo", Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn create(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Client, Error> {
        Client::builder(rpc_layer, address)
            .name(name)
            .timeout(timeout)
            .connect_as("Client::create")
    }

    /// A [`ClientBuilder`] for the server at `address` over `rpc_layer`, the blocking mirror of
    /// [`crate::Client::builder`]: [`Client::create`] with an API key or CA certificates to
    /// trust. Nothing starts until [`ClientBuilder::connect`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let client = wasmrpc_client::blocking::Client::builder("https", "localhost:8443")
    ///     .name("demo")
    ///     .timeout(Duration::from_secs(5))
    ///     .ca_cert_pem(std::fs::read("ca.pem")?)
    ///     .connect()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(rpc_layer: &str, address: &str) -> ClientBuilder {
        ClientBuilder::new(rpc_layer, address)
    }

    fn new(inner: crate::Client, worker: Arc<Worker>) -> Client {
        Client { inner, worker }
    }

    /// The client's name, as the server sees it (the `x-wasmrpc-client` header).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) {
    /// println!("calling as {}", client.name());
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The server's address, as `http://host:port` or `https://host:port`.
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) {
    /// println!("connected to {}", client.address());
    /// # }
    /// ```
    pub fn address(&self) -> &str {
        self.inner.address()
    }

    /// Fetch the method list again (after registrations elsewhere).
    ///
    /// # Errors
    /// UNAVAILABLE when the server cannot be reached, or its error.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// client.refresh()?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn refresh(&self) -> Result<(), Error> {
        let inner = self.inner.clone();
        self.worker
            .run("Client::refresh", async move { inner.refresh().await })
    }

    /// The methods known at creation or the last [`Client::refresh`], with full signatures
    /// (TF's `list_registered_methods`), sorted by name. Does not wait.
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) {
    /// let names: Vec<String> = client.list_registered_methods().into_iter().map(|m| m.name).collect();
    /// # }
    /// ```
    pub fn list_registered_methods(&self) -> Vec<MethodInfo> {
        self.inner.list_registered_methods()
    }

    /// A handle for one registered method, TF's dynamically added `client.<method>`. Does not
    /// wait.
    ///
    /// # Errors
    /// NOT_FOUND, listing what exists, when no such method was registered at the last refresh.
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let addition = client.method("addition")?;
    /// let sum = addition.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])?;
    /// # Ok(()) }
    /// ```
    pub fn method(&self, name: &str) -> Result<MethodHandle, Error> {
        Ok(MethodHandle::new(
            self.inner.method(name)?,
            self.worker.clone(),
        ))
    }

    /// Start a call and return at once; the [`StatusOrResult`] waits when asked
    /// (TF's `client.call(args, method_name, output_specs, timeout_in_ms)`).
    ///
    /// Without `output_specs` the value is the flat list of outputs; with them, each output is
    /// checked against its spec and a mismatch is INVALID_ARGUMENT. `timeout`: `None` for the
    /// client's default, `Some(Duration::ZERO)` for none; past it the result is
    /// DEADLINE_EXCEEDED. Arguments that do not fit a known signature are refused without a
    /// request.
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::Tensor;
    /// let result = client.call("addition", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
    ///                          None, Some(Duration::from_millis(500)));
    /// match result.get_error() {
    ///     None => println!("{:?}", result.get_value()?[0].to_vec::<i32>()),
    ///     Some((code, message)) => eprintln!("{code}: {message}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn call(
        &self,
        method_name: &str,
        args: Vec<Tensor>,
        output_specs: Option<Vec<TensorSpec>>,
        timeout: Option<Duration>,
    ) -> StatusOrResult {
        let call = self.inner.call_on(
            self.worker.runtime(),
            method_name,
            args,
            output_specs,
            timeout,
        );
        StatusOrResult::new(call, &self.worker)
    }

    /// Call a pinned version of a method (`?version=N`) and wait for the outputs.
    ///
    /// # Errors
    /// As [`crate::Client::call_version`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let outputs =
    ///     client.call_version("addition", 1, vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], None)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call_version(
        &self,
        method_name: &str,
        version: u32,
        args: Vec<Tensor>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Tensor>, Error> {
        let inner = self.inner.clone();
        let name = method_name.to_owned();
        self.worker.run("Client::call_version", async move {
            inner.call_version(&name, version, args, timeout).await
        })
    }

    /// Register a component under `name` (a new version if the name exists); `export` picks one
    /// method of a multi-method component. [`Client::method`] finds it at once.
    ///
    /// # Errors
    /// As [`crate::Client::register`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// let bytes = std::fs::read("target/guests/wasm32-wasip2/guest/example_add.wasm").unwrap();
    /// let info = client.register("addition", bytes, Some("add"))?;
    /// println!("addition v{}", info.version);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn register(
        &self,
        name: &str,
        component: Vec<u8>,
        export: Option<&str>,
    ) -> Result<MethodInfo, Error> {
        let inner = self.inner.clone();
        let name = name.to_owned();
        let export = export.map(str::to_owned);
        self.worker.run("Client::register", async move {
            inner.register(&name, component, export.as_deref()).await
        })
    }

    /// One method's metadata from the server: signature, versions, digest, size.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// println!("{:?}", client.describe("addition")?.versions);
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn describe(&self, name: &str) -> Result<MethodInfo, Error> {
        let inner = self.inner.clone();
        let name = name.to_owned();
        self.worker.run(
            "Client::describe",
            async move { inner.describe(&name).await },
        )
    }

    /// Unregister every version of `name`; returns the versions removed.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// let removed = client.delete("addition")?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn delete(&self, name: &str) -> Result<Vec<u32>, Error> {
        let inner = self.inner.clone();
        let name = name.to_owned();
        self.worker
            .run("Client::delete", async move { inner.delete(&name).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Code;

    #[test]
    // The message names what the caller called, not the builder behind it.
    #[should_panic(expected = "blocking::Client::create was called from inside an async runtime")]
    fn creating_a_blocking_client_inside_a_runtime_panics_with_advice() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = Client::create("http", "127.0.0.1:1", "t", Duration::ZERO);
        });
    }

    #[test]
    fn an_unsupported_layer_is_refused_by_the_blocking_client_too() {
        let err = Client::create("carrier-pigeon", "127.0.0.1:1", "t", Duration::ZERO).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("http"), "{err}");
    }
}

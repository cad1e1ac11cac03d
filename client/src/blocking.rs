//! The blocking client: the async [`crate::Client`] driven by a runtime thread of its own.
//!
//! Modelled on `reqwest::blocking`: each [`Client`] starts one thread running a single-threaded
//! tokio runtime; every request is sent to that thread over a channel and answered on a oneshot,
//! so the calling thread only waits. Many calls may be in flight at once
//! ([`Client::call`] returns at once), and they share one HTTP/2 connection. The thread stops,
//! and is joined, when the last [`Client`], [`MethodHandle`] and [`StatusOrResult`] that use it
//! are dropped; calls still in flight then are cancelled.
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

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, ThreadId};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::client::ClientOptions;
use crate::code::Code;
use crate::error::Error;
use crate::signature::{MethodInfo, MethodSignature, TensorSpec};
use crate::tensor::Tensor;

/// What a call ends with.
type CallResult = Result<Vec<Tensor>, Error>;

/// Work for the runtime thread: a future it spawns.
type Job = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Panic, with a message that says what to do instead, when the caller is inside a tokio runtime.
#[track_caller]
fn assert_not_in_runtime(what: &str) {
    if tokio::runtime::Handle::try_current().is_ok() {
        panic!(
            "wasmrpc_client::blocking::{what} was called from inside an async runtime, where \
             blocking would stall the runtime's thread. Use the async wasmrpc_client::Client \
             there (and `.await` it), or call the blocking client from a thread of its own \
             (std::thread::spawn; a tokio spawn_blocking closure counts as inside the runtime)."
        );
    }
}

fn stopped() -> Error {
    Error::new(
        Code::Cancelled,
        "the blocking client's runtime thread stopped before the call finished",
    )
}

/// The runtime thread and the channel that feeds it.
#[derive(Debug)]
struct Worker {
    jobs: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
    thread_id: ThreadId,
}

impl Worker {
    /// Start the thread and its runtime.
    fn start() -> Result<Arc<Worker>, Error> {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
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
                let _ = ready_tx.send(Ok(()));
                runtime.block_on(async move {
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job);
                    }
                });
                // Every sender is gone: dropping the runtime cancels whatever still runs, and
                // nobody is left waiting for it.
            })
            .map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("cannot start the client's runtime thread: {e}"),
                )
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
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
        }
        Ok(Arc::new(Worker {
            jobs: Some(jobs),
            thread_id: thread.thread().id(),
            thread: Some(thread),
        }))
    }

    /// Run `fut` on the runtime thread; the receiver gets its result (or closes, if the thread
    /// has stopped).
    fn submit<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::pin(async move {
            let _ = tx.send(fut.await);
        });
        if let Some(jobs) = &self.jobs {
            // On failure the job, and with it `tx`, is dropped: `rx` reports the stop.
            let _ = jobs.send(job);
        }
        rx
    }

    /// Run `fut` on the runtime thread and wait for its result.
    #[track_caller]
    fn run<T: Send + 'static>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, Error>> + Send + 'static,
    ) -> Result<T, Error> {
        assert_not_in_runtime(what);
        self.submit(fut)
            .blocking_recv()
            .unwrap_or_else(|_| Err(stopped()))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            // Never join from the runtime thread itself, nor block an async caller: the thread
            // then finishes on its own.
            let on_worker = std::thread::current().id() == self.thread_id;
            if !on_worker && tokio::runtime::Handle::try_current().is_err() {
                let _ = thread.join();
            }
        }
    }
}

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
    /// `rpc_layer` is `"http"` or `"https"`; `name` identifies this client in the server's logs;
    /// `timeout` is the default for every call and bounds creation itself (`Duration::ZERO`: no
    /// timeout).
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
        Client::create_with_key(rpc_layer, address, name, timeout, None)
    }

    /// [`Client::create`] with an API key sent as `Authorization: Bearer <key>`.
    ///
    /// # Errors
    /// As [`Client::create`]; INVALID_ARGUMENT for a key that is not a valid header value.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> Result<(), wasmrpc_client::Error> {
    /// let client = wasmrpc_client::blocking::Client::create_with_key(
    ///     "http", "127.0.0.1:8080", "demo", Duration::from_secs(5), Some("my-tenant-key"))?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn create_with_key(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
        key: Option<&str>,
    ) -> Result<Client, Error> {
        let options = ClientOptions {
            key: key.map(str::to_owned),
            ..ClientOptions::default()
        };
        Client::create_with_options(rpc_layer, address, name, timeout, options)
    }

    /// [`Client::create`] with [`ClientOptions`]: an API key, and CA certificates to trust for
    /// `https` besides the webpki roots (see [`crate::Client::create_with_options`]).
    ///
    /// # Errors
    /// As [`crate::Client::create_with_options`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use wasmrpc_client::ClientOptions;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let options = ClientOptions::default().with_ca_cert_pem(std::fs::read("ca.pem")?);
    /// let client = wasmrpc_client::blocking::Client::create_with_options(
    ///     "https", "localhost:8443", "demo", Duration::from_secs(5), options)?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn create_with_options(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        assert_not_in_runtime("Client::create");
        let worker = Worker::start()?;
        let (rpc_layer, address, name) =
            (rpc_layer.to_owned(), address.to_owned(), name.to_owned());
        let inner = worker.run("Client::create", async move {
            crate::Client::create_with_options(&rpc_layer, &address, &name, timeout, options).await
        })?;
        Ok(Client { inner, worker })
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
        Ok(MethodHandle {
            inner: self.inner.method(name)?,
            worker: self.worker.clone(),
        })
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
        let inner = self.inner.clone();
        let name = method_name.to_owned();
        StatusOrResult::submit(&self.worker, async move {
            inner
                .call_async(&name, args, output_specs.as_deref(), timeout)
                .await
        })
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

/// A handle for one method of a blocking [`Client`]: TF's `client.<method>(…)` ([`call`]) and
/// `client.<method>_blocking(…)` ([`call_blocking`]).
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
        if let Err(why) = self.signature().check_args(&args) {
            return StatusOrResult::ready(
                &self.worker,
                Err(Error::new(Code::InvalidArgument, why)),
            );
        }
        let inner = self.inner.clone();
        StatusOrResult::submit(&self.worker, async move { inner.call_blocking(args).await })
    }

    /// Call and wait for the outputs (TF's `<method>_blocking`), with the client's default
    /// timeout.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for arguments off the signature (nothing sent), or the call's error.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
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
    /// Inside an async runtime (see the [module documentation](self)).
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
    pending: Mutex<Option<oneshot::Receiver<CallResult>>>,
    result: OnceLock<CallResult>,
    _worker: Arc<Worker>,
}

impl StatusOrResult {
    fn submit(
        worker: &Arc<Worker>,
        call: impl Future<Output = CallResult> + Send + 'static,
    ) -> Self {
        StatusOrResult {
            pending: Mutex::new(Some(worker.submit(call))),
            result: OnceLock::new(),
            _worker: worker.clone(),
        }
    }

    fn ready(worker: &Arc<Worker>, result: CallResult) -> Self {
        StatusOrResult {
            pending: Mutex::new(None),
            result: OnceLock::from(result),
            _worker: worker.clone(),
        }
    }

    #[track_caller]
    fn wait(&self, what: &str) -> &CallResult {
        // Checked even when the result is in: whether a call panics must not depend on timing.
        assert_not_in_runtime(what);
        self.result.get_or_init(|| {
            let rx = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            match rx {
                Some(rx) => rx.blocking_recv().unwrap_or_else(|_| Err(stopped())),
                None => Err(Error::new(Code::Internal, "the call has no result")),
            }
        })
    }

    /// Whether the call succeeded (blocks until it completes).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
    ///
    /// ```no_run
    /// # fn demo(result: wasmrpc_client::blocking::StatusOrResult) {
    /// if result.is_ok() { println!("done"); }
    /// # }
    /// ```
    #[track_caller]
    pub fn is_ok(&self) -> bool {
        self.wait("StatusOrResult::is_ok").is_ok()
    }

    /// The canonical code and message if the call failed, `None` if it succeeded (blocks until
    /// it completes).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
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
        self.wait("StatusOrResult::get_error")
            .as_ref()
            .err()
            .map(|e| (e.code(), e.message().to_owned()))
    }

    /// The outputs, or the error (blocks until the call completes).
    ///
    /// # Errors
    /// The call's error with its canonical code.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](self)).
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
        self.wait("StatusOrResult::get_value").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Sets its flag when dropped.
    struct OnDrop(Arc<AtomicBool>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_runtime_thread_runs_work_and_stops_when_the_last_owner_drops() {
        let worker = Worker::start().unwrap();
        let answer = worker.run("test", async { Ok::<_, Error>(6 * 7) }).unwrap();
        assert_eq!(answer, 42);

        // A task that never finishes, holding a guard: the drop below must end it.
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = OnDrop(dropped.clone());
        let _never = worker.submit(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let result = StatusOrResult::submit(&worker, std::future::pending());
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
        let result = Arc::new(StatusOrResult::submit(&worker, async {
            Ok(vec![Tensor::scalar(5i32)])
        }));
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
        let err = Client::create("grpc", "127.0.0.1:1", "t", Duration::ZERO).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("http"), "{err}");
    }
}

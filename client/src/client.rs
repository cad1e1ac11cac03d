//! The async client, a mirror of `tf.distribute.experimental.rpc.Client`.
//!
//! `Client::create` connects and lists the server's methods; `call` returns a [`StatusOrResult`]
//! at once; `method("name")` gives a handle whose arguments are checked against the signature
//! before anything is sent. Every call shares one HTTP/2 connection.
//!
//! For programs without an async runtime, [`crate::blocking`] wraps this client.
//!
//! ```no_run
//! # async fn demo() -> Result<(), wasmrpc_client::Error> {
//! use std::time::Duration;
//! use wasmrpc_client::{Client, Tensor};
//!
//! let client = Client::create("http", "127.0.0.1:8080", "demo", Duration::from_secs(5)).await?;
//! let a = Tensor::scalar(2i32);
//! let b = Tensor::scalar(3i32);
//! let result = client.call("addition", vec![a.clone(), b.clone()], None, None);
//! if result.is_ok().await {
//!     println!("{:?}", result.get_value().await?[0].to_vec::<i32>());
//! }
//! let addition = client.method("addition")?;
//! let sum = addition.call_blocking(vec![a, b]).await?;
//! assert_eq!(sum[0].to_vec::<i32>()?, vec![5]);
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use tokio::sync::{Mutex, OnceCell, oneshot};

use crate::code::Code;
use crate::error::Error;
use crate::signature::{MethodInfo, MethodSignature, TensorSpec};
use crate::tensor::Tensor;
use crate::transport::Transport;
use crate::{CallRequest, CallResponse, MethodList};

/// The rpc layers a client can speak: `http` (HTTP/2 with prior knowledge over TCP) and `https`
/// (HTTP/2 over TLS).
///
/// ```
/// assert_eq!(wasmrpc_client::client::RPC_LAYERS, &["http", "https"]);
/// ```
pub const RPC_LAYERS: &[&str] = &["http", "https"];

/// Extra time the client waits past a call's timeout for the server's own DEADLINE_EXCEEDED, which
/// carries a better message; past it the client gives up by itself.
const CLIENT_DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// How long a NOT_FOUND answer may spend refreshing the method list it shows.
const NOT_FOUND_REFRESH: Duration = Duration::from_secs(2);

/// A connection to one wasmrpc server.
///
/// Cloning is cheap and clones share the connection and the method list. Every call of every
/// clone is multiplexed over one HTTP/2 connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmrpc_client::Error> {
/// use std::time::Duration;
/// let client = wasmrpc_client::Client::create("http", "127.0.0.1:8080", "demo",
///                                             Duration::from_secs(5)).await?;
/// let other = client.clone(); // same connection, same method list
/// assert_eq!(other.name(), "demo");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    transport: Transport,
    name: String,
    default_timeout: Duration,
    methods: RwLock<BTreeMap<String, MethodInfo>>,
}

/// Names are checked here with the contract's one rule, so a name the server would refuse is
/// never sent (and never needs percent-encoding in a path).
fn check_name(name: &str) -> Result<(), Error> {
    wasmrpc_proto::names::check_name(name).map_err(|why| Error::new(Code::InvalidArgument, why))
}

/// `host:port` or `{rpc_layer}://host:port` → `{rpc_layer}://host:port`; an address whose scheme
/// is not the rpc layer is refused rather than silently sent over the other one.
fn base_url(rpc_layer: &str, address: &str) -> Result<String, Error> {
    match address.split_once("://") {
        None => Ok(format!("{rpc_layer}://{address}")),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case(rpc_layer) => {
            Ok(format!("{rpc_layer}://{}", &address[scheme.len() + 3..]))
        }
        Some((scheme, _)) => Err(Error::new(
            Code::InvalidArgument,
            format!(
                "the address `{address}` is {scheme} but rpc_layer is `{rpc_layer}`: use \
                 rpc_layer `{scheme}` with it, or give the address as host:port"
            ),
        )),
    }
}

/// How [`Client::create_with_options`] connects, beyond the address: the API key and, for the
/// `https` layer, the CA certificates trusted besides the webpki roots (a private CA, or a
/// self-signed server certificate).
///
/// ```
/// use wasmrpc_client::ClientOptions;
/// # fn demo() -> std::io::Result<()> {
/// let options = ClientOptions::default()
///     .with_key("my-tenant-key")
///     .with_ca_cert_pem(std::fs::read("ca.pem")?);
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ClientOptions {
    /// API key, sent as `Authorization: Bearer <key>`.
    pub key: Option<String>,
    /// Extra trusted CA certificates for `https`, each a PEM file's contents (one or more
    /// `-----BEGIN CERTIFICATE-----` blocks). The webpki roots are always trusted; `http`
    /// ignores these.
    pub ca_certs_pem: Vec<Vec<u8>>,
}

impl ClientOptions {
    /// Send `key` as `Authorization: Bearer <key>`.
    ///
    /// ```
    /// let options = wasmrpc_client::ClientOptions::default().with_key("k");
    /// assert_eq!(options.key.as_deref(), Some("k"));
    /// ```
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Also trust the CA certificates in `pem` (a PEM file's contents) for `https`.
    ///
    /// ```
    /// let pem = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
    /// let options = wasmrpc_client::ClientOptions::default().with_ca_cert_pem(pem);
    /// assert_eq!(options.ca_certs_pem.len(), 1);
    /// ```
    pub fn with_ca_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_certs_pem.push(pem.into());
        self
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ClientOptions")
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field(
                "ca_certs_pem",
                &format_args!("{} PEM file(s)", self.ca_certs_pem.len()),
            )
            .finish()
    }
}

impl Client {
    /// Connect to the server at `address` and fetch its methods, like TF's `Client.create`.
    ///
    /// `rpc_layer` is `"http"` or `"https"` (TLS, trusting the webpki roots; see
    /// [`Client::create_with_options`] for a private CA); `address` is `host:port` or a URL of
    /// that scheme. `name` identifies this client in the server's logs; `timeout` is the default
    /// for every call and bounds creation itself (`Duration::ZERO`: no timeout).
    ///
    /// # Errors
    /// INVALID_ARGUMENT for an unsupported rpc layer (listing the supported ones) or a bad address;
    /// DEADLINE_EXCEEDED when the server does not answer within `timeout`; UNAVAILABLE when it
    /// cannot be reached.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// let client = wasmrpc_client::Client::create("http", "127.0.0.1:8080", "me",
    ///                                             Duration::from_secs(5)).await?;
    /// for m in client.list_registered_methods() { println!("{}", m.name); }
    /// # Ok(()) }
    /// ```
    pub async fn create(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<Client, Error> {
        Client::create_with_key(rpc_layer, address, name, timeout, None).await
    }

    /// [`Client::create`] with an API key sent as `Authorization: Bearer <key>`.
    ///
    /// # Errors
    /// As [`Client::create`]; INVALID_ARGUMENT for a key that is not a valid header value.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// let client = wasmrpc_client::Client::create_with_key(
    ///     "http", "127.0.0.1:8080", "me", Duration::from_secs(5), Some("my-tenant-key")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_with_key(
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
        Client::create_with_options(rpc_layer, address, name, timeout, options).await
    }

    /// [`Client::create`] with [`ClientOptions`]: an API key, and CA certificates to trust for
    /// `https` besides the webpki roots.
    ///
    /// With `rpc_layer` `"https"` the address is `host:port` or `https://host:port`; calls go
    /// over one HTTP/2 connection negotiated by TLS ALPN, and the server's certificate must
    /// be valid for `host`.
    ///
    /// # Errors
    /// As [`Client::create`]; INVALID_ARGUMENT for a key that is not a valid header value, a CA
    /// certificate that is not PEM, or an address whose scheme is not `rpc_layer`; UNAVAILABLE
    /// (naming the certificate problem) when the server's certificate cannot be verified.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use wasmrpc_client::{Client, ClientOptions};
    /// let options = ClientOptions::default().with_ca_cert_pem(std::fs::read("ca.pem")?);
    /// let client = Client::create_with_options(
    ///     "https", "localhost:8443", "me", Duration::from_secs(5), options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_with_options(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        if !RPC_LAYERS.contains(&rpc_layer) {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "unsupported rpc_layer `{rpc_layer}`; supported layers: {}",
                    RPC_LAYERS.join(", ")
                ),
            ));
        }
        let transport = Transport::with_options(&base_url(rpc_layer, address)?, name, &options)?;
        let client = Client {
            inner: Arc::new(Inner {
                transport,
                name: name.to_owned(),
                default_timeout: timeout,
                methods: RwLock::new(BTreeMap::new()),
            }),
        };
        with_timeout(timeout, "creating the client", client.refresh()).await?;
        Ok(client)
    }

    /// The client's name, as the server sees it (the `x-wasmrpc-client` header).
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) {
    /// println!("calling as {}", client.name());
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The server's address, as `http://host:port` or `https://host:port`.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) {
    /// println!("connected to {}", client.address());
    /// # }
    /// ```
    pub fn address(&self) -> &str {
        self.inner.transport.base()
    }

    /// Fetch the method list again (after registrations elsewhere).
    ///
    /// # Errors
    /// UNAVAILABLE when the server cannot be reached, or its error.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// client.refresh().await?;
    /// let addition = client.method("addition")?; // registered by someone else meanwhile
    /// # Ok(()) }
    /// ```
    pub async fn refresh(&self) -> Result<(), Error> {
        let body = self
            .inner
            .transport
            .send(Method::GET, "/v1/methods", None)
            .await?;
        let list: MethodList = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *methods = list
            .methods
            .into_iter()
            .map(|m| (m.name.clone(), m))
            .collect();
        Ok(())
    }

    /// The methods known at creation or the last [`Client::refresh`], with full signatures
    /// (TF's `list_registered_methods`), sorted by name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) {
    /// for m in client.list_registered_methods() {
    ///     let inputs: Vec<String> = m.signature.inputs.iter()
    ///         .map(|s| format!("{}: {}{}", s.name, s.dtype, s.shape_text())).collect();
    ///     println!("{}({})", m.name, inputs.join(", "));
    /// }
    /// # }
    /// ```
    pub fn list_registered_methods(&self) -> Vec<MethodInfo> {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        methods.values().cloned().collect()
    }

    fn known(&self, name: &str) -> Option<MethodInfo> {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        methods.get(name).cloned()
    }

    /// A handle for one registered method, TF's dynamically added `client.<method>`.
    ///
    /// # Errors
    /// NOT_FOUND, listing what exists, when no such method was registered at the last refresh.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let addition = client.method("addition")?;          // TF: client.addition
    /// let pending = addition.call(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
    /// let sum = pending.get_value().await?;
    /// assert!(client.method("nope").unwrap_err().is_not_found());
    /// # Ok(()) }
    /// ```
    pub fn method(&self, name: &str) -> Result<MethodHandle, Error> {
        match self.known(name) {
            Some(info) => Ok(MethodHandle {
                client: self.clone(),
                info,
            }),
            None => Err(Error::new(
                Code::NotFound,
                format!(
                    "no method named `{name}` is registered; {}",
                    self.registered_names()
                ),
            )),
        }
    }

    /// `registered methods: a, b` (or `none`), from the last refresh.
    fn registered_names(&self) -> String {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        if methods.is_empty() {
            "registered methods: none".into()
        } else {
            let names: Vec<&str> = methods.keys().map(String::as_str).collect();
            format!("registered methods: {}", names.join(", "))
        }
    }

    /// Start a call and return at once; the [`StatusOrResult`] completes when the call does
    /// (TF's `client.call(args, method_name, output_specs, timeout_in_ms)`).
    ///
    /// Without `output_specs` the value is the flat list of outputs; with them, each output is
    /// checked against its spec and a mismatch is INVALID_ARGUMENT. `timeout`: `None` for the
    /// client's default, `Some(Duration::ZERO)` for none; past it the result is
    /// DEADLINE_EXCEEDED, and the host stops the guest.
    ///
    /// # Panics
    /// Outside a tokio runtime: the call runs as a spawned task. Use [`crate::blocking::Client`]
    /// in programs without one.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::{DType, Tensor, TensorSpec};
    /// let specs = vec![TensorSpec { name: "sum".into(), dtype: DType::Int32, shape: Some(vec![]) }];
    /// let result = client.call("addition", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
    ///                          Some(specs), Some(Duration::from_millis(500)));
    /// if result.is_ok().await {
    ///     assert_eq!(result.get_value().await?[0].to_vec::<i32>()?, vec![5]);
    /// } else if let Some((code, message)) = result.get_error().await {
    ///     eprintln!("{code}: {message}");
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
        let client = self.clone();
        let name = method_name.to_owned();
        StatusOrResult::spawn(async move {
            client
                .call_async(&name, args, output_specs.as_deref(), timeout)
                .await
        })
    }

    /// The call itself, awaited: outputs, or the error with its canonical code.
    ///
    /// Arguments and timeout are as for [`Client::call`]; this form needs no spawned task.
    ///
    /// # Errors
    /// INVALID_ARGUMENT when the args do not fit a known signature (nothing is sent then) or the
    /// outputs do not fit `output_specs`; DEADLINE_EXCEEDED past the timeout; NOT_FOUND, listing
    /// the registered methods, for an unknown method; the server's or the guest's error.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let outputs = client
    ///     .call_async("addition", vec![Tensor::vector(vec![1i32, 2]), Tensor::vector(vec![10i32, 20])],
    ///                 None, None)
    ///     .await?;
    /// assert_eq!(outputs[0].to_vec::<i32>()?, vec![11, 22]);
    /// # Ok(()) }
    /// ```
    pub async fn call_async(
        &self,
        method_name: &str,
        args: Vec<Tensor>,
        output_specs: Option<&[TensorSpec]>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Tensor>, Error> {
        check_name(method_name)?;
        if let Some(info) = self.known(method_name) {
            info.signature
                .check_args(&args)
                .map_err(|why| Error::new(Code::InvalidArgument, why))?;
        }
        let timeout = timeout.unwrap_or(self.inner.default_timeout);
        let outputs = match self.send_call(method_name, None, args, timeout).await {
            Ok(outputs) => outputs,
            Err(e) if e.is_not_found() => return Err(self.not_found_listing(e).await),
            Err(e) => return Err(e),
        };
        if let Some(specs) = output_specs {
            check_outputs(specs, &outputs)?;
        }
        Ok(outputs)
    }

    /// NOT_FOUND from the server, with the methods that do exist: the list is refreshed first
    /// (briefly; on failure the last one is shown), so that a deletion elsewhere shows too.
    async fn not_found_listing(&self, e: Error) -> Error {
        let _ = tokio::time::timeout(NOT_FOUND_REFRESH, self.refresh()).await;
        Error::new(
            e.code(),
            format!("{}; {}", e.message(), self.registered_names()),
        )
    }

    /// Call a pinned version of a method (`?version=N`); arguments are checked by the server
    /// only, and the outputs are not checked.
    ///
    /// # Errors
    /// As [`Client::call_async`]; NOT_FOUND for a version that does not exist.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let outputs = client
    ///     .call_version("addition", 1, vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], None)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_version(
        &self,
        method_name: &str,
        version: u32,
        args: Vec<Tensor>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Tensor>, Error> {
        check_name(method_name)?;
        let timeout = timeout.unwrap_or(self.inner.default_timeout);
        self.send_call(method_name, Some(version), args, timeout)
            .await
    }

    async fn send_call(
        &self,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let body = serde_json::to_vec(&CallRequest {
            args,
            timeout_ms: timeout_ms(timeout),
        })
        .map_err(|e| Error::new(Code::InvalidArgument, format!("encoding the args: {e}")))?;
        let path = match version {
            Some(v) => format!("/v1/methods/{name}/call?version={v}"),
            None => format!("/v1/methods/{name}/call"),
        };
        let send = self.inner.transport.send(
            Method::POST,
            &path,
            Some((Bytes::from(body), "application/json")),
        );
        let limit = if timeout.is_zero() {
            Duration::ZERO
        } else {
            timeout + CLIENT_DEADLINE_GRACE
        };
        let answer = if limit.is_zero() {
            send.await?
        } else {
            // Past the grace the server has not answered; the message names the caller's
            // timeout, not the grace added to it.
            tokio::time::timeout(limit, send).await.map_err(|_| {
                Error::new(
                    Code::DeadlineExceeded,
                    format!(
                        "the call to `{name}` did not finish within its timeout of {} ms \
                         (no answer from the server)",
                        timeout.as_millis()
                    ),
                )
            })??
        };
        let response: CallResponse = decode(&answer)?;
        Ok(response.outputs)
    }

    /// Register a component under `name` (a new version if the name exists); `export` picks one
    /// method of a multi-method component. The new method is added to the client's list, so
    /// [`Client::method`] finds it at once.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a name or export outside `[A-Za-z0-9_.-]`; the server's refusal
    /// (INVALID_ARGUMENT with the reason for a bad component, RESOURCE_EXHAUSTED past a quota).
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let bytes = std::fs::read("target/guests/wasm32-wasip2/guest/example_add.wasm").unwrap();
    /// let info = client.register("addition", bytes, Some("add")).await?;
    /// println!("addition v{} ({})", info.version, info.digest);
    /// # Ok(()) }
    /// ```
    pub async fn register(
        &self,
        name: &str,
        component: Vec<u8>,
        export: Option<&str>,
    ) -> Result<MethodInfo, Error> {
        check_name(name)?;
        let path = match export {
            Some(e) => {
                check_name(e)?;
                format!("/v1/methods/{name}?export={e}")
            }
            None => format!("/v1/methods/{name}"),
        };
        let body = self
            .inner
            .transport
            .send(
                Method::PUT,
                &path,
                Some((Bytes::from(component), "application/wasm")),
            )
            .await?;
        let info: MethodInfo = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        methods.insert(info.name.clone(), info.clone());
        Ok(info)
    }

    /// One method's metadata from the server: signature, versions, digest, size.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let info = client.describe("addition").await?;
    /// println!("versions {:?}: {}", info.versions, info.signature.doc);
    /// # Ok(()) }
    /// ```
    pub async fn describe(&self, name: &str) -> Result<MethodInfo, Error> {
        check_name(name)?;
        let body = self
            .inner
            .transport
            .send(Method::GET, &format!("/v1/methods/{name}"), None)
            .await?;
        decode(&body)
    }

    /// Unregister every version of `name`; returns the versions removed.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let removed = client.delete("addition").await?;
    /// println!("removed versions {removed:?}");
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self, name: &str) -> Result<Vec<u32>, Error> {
        check_name(name)?;
        let body = self
            .inner
            .transport
            .send(Method::DELETE, &format!("/v1/methods/{name}"), None)
            .await?;
        #[derive(serde::Deserialize)]
        struct Deleted {
            deleted_versions: Vec<u32>,
        }
        let deleted: Deleted = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        methods.remove(name);
        Ok(deleted.deleted_versions)
    }
}

/// A timeout in whole milliseconds for the wire, rounded up: a non-zero timeout under 1 ms must
/// not become 0, which means "the server's default".
fn timeout_ms(timeout: Duration) -> u64 {
    let ms = timeout.as_millis() + u128::from(!timeout.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| {
        Error::new(
            Code::Internal,
            format!("the server's answer could not be read: {e}"),
        )
    })
}

async fn with_timeout<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    if limit.is_zero() {
        return fut.await;
    }
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result,
        Err(_) => Err(Error::new(
            Code::DeadlineExceeded,
            format!("{what} did not finish within {} ms", limit.as_millis()),
        )),
    }
}

fn check_outputs(specs: &[TensorSpec], outputs: &[Tensor]) -> Result<(), Error> {
    if specs.len() != outputs.len() {
        return Err(Error::new(
            Code::InvalidArgument,
            format!(
                "output_specs has {} specs but the method returned {} outputs",
                specs.len(),
                outputs.len()
            ),
        ));
    }
    for (i, (spec, out)) in specs.iter().zip(outputs).enumerate() {
        if let Some(why) = spec.mismatch(out) {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "output {i} does not match output_specs[{i}] (`{}`): {why}",
                    spec.name
                ),
            ));
        }
    }
    Ok(())
}

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
    pub fn call(&self, args: Vec<Tensor>) -> StatusOrResult {
        if let Err(e) = self.check(&args) {
            return StatusOrResult::ready(Err(e));
        }
        self.client.call(&self.info.name, args, None, None)
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
    pending: Mutex<Option<oneshot::Receiver<CallResult>>>,
    result: OnceCell<CallResult>,
}

impl StatusOrResult {
    fn spawn(
        call: impl std::future::Future<Output = Result<Vec<Tensor>, Error>> + Send + 'static,
    ) -> Self {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(call.await);
        });
        StatusOrResult {
            pending: Mutex::new(Some(rx)),
            result: OnceCell::new(),
        }
    }

    fn ready(result: Result<Vec<Tensor>, Error>) -> Self {
        StatusOrResult {
            pending: Mutex::new(None),
            result: OnceCell::new_with(Some(result)),
        }
    }

    async fn wait(&self) -> &Result<Vec<Tensor>, Error> {
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

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(timeout_ms(Duration::ZERO), 0);
        assert_eq!(timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(timeout_ms(Duration::from_millis(300)), 300);
        assert_eq!(timeout_ms(Duration::from_micros(300_001)), 301);
        assert_eq!(timeout_ms(Duration::MAX), u64::MAX);
    }

    fn create(rpc_layer: &str, address: &str, options: ClientOptions) -> Result<Client, Error> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(Client::create_with_options(
                rpc_layer,
                address,
                "t",
                Duration::from_secs(5),
                options,
            ))
    }

    #[test]
    fn only_http_and_https_are_supported_layers_and_the_error_lists_both() {
        let err = create("grpc", "127.0.0.1:1", ClientOptions::default()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("supported layers: http, https"),
            "{err}"
        );
    }

    #[test]
    fn an_address_without_a_scheme_takes_the_rpc_layers() {
        assert_eq!(base_url("http", "h:1").unwrap(), "http://h:1");
        assert_eq!(base_url("https", "h:1").unwrap(), "https://h:1");
        assert_eq!(base_url("https", "https://h:1").unwrap(), "https://h:1");
        assert_eq!(base_url("https", "HTTPS://h:1").unwrap(), "https://h:1");
    }

    #[test]
    fn an_https_address_with_the_http_layer_is_invalid_argument_saying_so() {
        let err = create("http", "https://127.0.0.1:1", ClientOptions::default()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("is https but rpc_layer is `http`"),
            "{err}"
        );
    }

    #[test]
    fn an_http_address_with_the_https_layer_is_invalid_argument_saying_so() {
        let err = create("https", "http://127.0.0.1:1", ClientOptions::default()).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("is http but rpc_layer is `https`"),
            "{err}"
        );
    }

    #[test]
    fn a_ca_certificate_that_is_not_pem_is_invalid_argument() {
        let options = ClientOptions::default().with_ca_cert_pem(b"no certificate here".to_vec());
        let err = create("https", "127.0.0.1:1", options).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("CA certificate 0"), "{err}");
    }

    #[test]
    fn an_https_server_nobody_listens_on_is_unavailable() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let err = create(
            "https",
            &format!("127.0.0.1:{port}"),
            ClientOptions::default(),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err}");
    }

    #[test]
    fn client_options_never_print_the_key() {
        let options = ClientOptions::default()
            .with_key("secret-key")
            .with_ca_cert_pem(b"pem".to_vec());
        let text = format!("{options:?}");
        assert!(!text.contains("secret-key"), "{text}");
        assert!(text.contains("1 PEM file(s)"), "{text}");
    }

    #[test]
    fn a_server_that_never_answers_a_call_is_deadline_exceeded_in_the_client() {
        // Accepts connections (the kernel does) and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", silent.local_addr().unwrap());
        let client = Client {
            inner: Arc::new(Inner {
                transport: Transport::new(&base, "t", None).unwrap(),
                name: "t".into(),
                default_timeout: Duration::from_millis(100),
                methods: RwLock::new(BTreeMap::new()),
            }),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let err = rt
            .block_on(client.call_async("m", vec![], None, None))
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert!(err.message().contains("timeout of 100 ms"), "{err}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100) + CLIENT_DEADLINE_GRACE,
            "{took:?}"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn output_specs_check_count_dtype_and_shape() {
        let spec = |dtype, shape| TensorSpec {
            name: "out".into(),
            dtype,
            shape,
        };
        let out = vec![Tensor::vector(vec![1i32, 2])];
        assert!(check_outputs(&[spec(crate::DType::Int32, None)], &out).is_ok());
        let dynamic = Some(vec![crate::Dim::Dynamic]);
        assert!(check_outputs(&[spec(crate::DType::Int32, dynamic)], &out).is_ok());
        let e = check_outputs(&[spec(crate::DType::Float32, None)], &out).unwrap_err();
        assert!(e.message().contains("output 0"), "{e}");
        let fixed = Some(vec![crate::Dim::Fixed(3)]);
        assert!(check_outputs(&[spec(crate::DType::Int32, fixed)], &out).is_err());
        assert!(check_outputs(&[], &out).is_err());
    }
}

//! The async client, a mirror of `tf.distribute.experimental.rpc.Client`.
//!
//! `Client::create` connects and lists the server's methods; `call` returns a [`StatusOrResult`]
//! at once; `method("name")` gives a handle whose arguments are checked against the signature
//! before anything is sent. Every call shares one HTTP/2 connection.

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

/// The rpc layers a client can speak.
pub const RPC_LAYERS: &[&str] = &["http"];

/// Extra time the client waits past a call's timeout for the server's own DEADLINE_EXCEEDED, which
/// carries a better message; past it the client gives up by itself.
const CLIENT_DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// A connection to one wasmrpc server.
///
/// Cloning is cheap and clones share the connection and the method list.
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

/// Percent-encode nothing: names are restricted to `[A-Za-z0-9_.-]` by the server, so a name
/// outside that set is refused here rather than sent.
fn check_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            Code::InvalidArgument,
            format!("`{name}` is not a valid method name (letters, digits, `_`, `-`, `.`)"),
        ))
    }
}

/// `host:port` or `http://host:port` → `http://host:port`.
fn base_url(rpc_layer: &str, address: &str) -> String {
    if address.contains("://") {
        address.to_owned()
    } else {
        format!("{rpc_layer}://{address}")
    }
}

impl Client {
    /// Connect to the server at `address` and fetch its methods, like TF's `Client.create`.
    ///
    /// `rpc_layer` is `"http"`; `name` identifies this client in the server's logs; `timeout` is
    /// the default for every call and bounds creation itself (`Duration::ZERO`: no timeout).
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
    /// As [`Client::create`].
    pub async fn create_with_key(
        rpc_layer: &str,
        address: &str,
        name: &str,
        timeout: Duration,
        key: Option<&str>,
    ) -> Result<Client, Error> {
        if !RPC_LAYERS.contains(&rpc_layer) {
            let hint = if rpc_layer == "https" {
                " (TLS is not built into this client yet; put a TLS-terminating proxy in front)"
            } else {
                ""
            };
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "unsupported rpc_layer `{rpc_layer}`{hint}; supported layers: {}",
                    RPC_LAYERS.join(", ")
                ),
            ));
        }
        let transport = Transport::new(&base_url(rpc_layer, address), name, key)?;
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

    /// The client's name, as the server sees it.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The server's address.
    pub fn address(&self) -> &str {
        self.inner.transport.base()
    }

    /// Fetch the method list again (after registrations elsewhere).
    ///
    /// # Errors
    /// UNAVAILABLE when the server cannot be reached, or its error.
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

    /// The methods known at creation or the last [`Client::refresh`], with full signatures.
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
    pub fn method(&self, name: &str) -> Result<MethodHandle, Error> {
        match self.known(name) {
            Some(info) => Ok(MethodHandle {
                client: self.clone(),
                info,
            }),
            None => {
                let names: Vec<String> = self
                    .list_registered_methods()
                    .into_iter()
                    .map(|m| m.name)
                    .collect();
                Err(Error::new(
                    Code::NotFound,
                    format!(
                        "no method named `{name}` is registered; registered methods: {}",
                        if names.is_empty() {
                            "none".into()
                        } else {
                            names.join(", ")
                        }
                    ),
                ))
            }
        }
    }

    /// Start a call and return at once; the [`StatusOrResult`] completes when the call does.
    ///
    /// Without `output_specs` the value is the flat list of outputs; with them, each output is
    /// checked against its spec. `timeout`: `None` for the client's default, `Some(ZERO)` for none.
    /// Must be called inside a tokio runtime (it spawns the call).
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
    /// # Errors
    /// INVALID_ARGUMENT when the args do not fit a known signature (nothing is sent then) or the
    /// outputs do not fit `output_specs`; DEADLINE_EXCEEDED past the timeout; the server's error.
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
        let outputs = self.send_call(method_name, None, args, timeout).await?;
        if let Some(specs) = output_specs {
            check_outputs(specs, &outputs)?;
        }
        Ok(outputs)
    }

    /// Call a pinned version of a method.
    ///
    /// # Errors
    /// As [`Client::call_async`].
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
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
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
        let answer = with_timeout(limit, "the call", send).await?;
        let response: CallResponse = decode(&answer)?;
        Ok(response.outputs)
    }

    /// Register a component under `name` (a new version if the name exists); `export` picks one
    /// method of a multi-method component. Refreshes the method list.
    ///
    /// # Errors
    /// The server's refusal (INVALID_ARGUMENT with the reason for a bad component).
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

    /// One method's metadata from the server.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered.
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
    /// NOT_FOUND when it is not registered.
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
#[derive(Clone, Debug)]
pub struct MethodHandle {
    client: Client,
    info: MethodInfo,
}

impl MethodHandle {
    /// The method's signature.
    pub fn signature(&self) -> &MethodSignature {
        &self.info.signature
    }

    /// The method's registration metadata.
    pub fn info(&self) -> &MethodInfo {
        &self.info
    }

    fn check(&self, args: &[Tensor]) -> Result<(), Error> {
        self.info
            .signature
            .check_args(args)
            .map_err(|why| Error::new(Code::InvalidArgument, why))
    }

    /// Start a call and return at once. Arguments that do not fit the signature make the result
    /// an INVALID_ARGUMENT error without anything being sent.
    pub fn call(&self, args: Vec<Tensor>) -> StatusOrResult {
        if let Err(e) = self.check(&args) {
            return StatusOrResult::ready(Err(e));
        }
        self.client.call(&self.info.name, args, None, None)
    }

    /// Call and wait for the outputs (the async form of TF's `<method>_blocking`).
    ///
    /// # Errors
    /// INVALID_ARGUMENT for arguments off the signature (nothing sent), or the call's error.
    pub async fn call_blocking(&self, args: Vec<Tensor>) -> Result<Vec<Tensor>, Error> {
        self.check(&args)?;
        self.client
            .call_async(&self.info.name, args, None, None)
            .await
    }

    /// [`MethodHandle::call_blocking`] with an explicit timeout (`ZERO`: none).
    ///
    /// # Errors
    /// As [`MethodHandle::call_blocking`].
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
/// number of times.
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
    pub async fn is_ok(&self) -> bool {
        self.wait().await.is_ok()
    }

    /// The canonical code and message if the call failed (waits for it).
    pub async fn get_error(&self) -> Option<(Code, String)> {
        self.wait()
            .await
            .as_ref()
            .err()
            .map(|e| (e.code, e.message.clone()))
    }

    /// The outputs, or the error (waits for the call).
    ///
    /// # Errors
    /// The call's error with its canonical code.
    pub async fn get_value(&self) -> Result<Vec<Tensor>, Error> {
        self.wait().await.clone()
    }
}

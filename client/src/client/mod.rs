//! The async client, a mirror of `tf.distribute.experimental.rpc.Client`.
//!
//! [`Client::create`] connects and lists the server's methods (TF's `Client.create`);
//! [`Client::builder`] does the same with a key or extra CA certificates. `call` returns a
//! [`StatusOrResult`] at once; `method("name")` gives a handle whose arguments are checked
//! against the signature before anything is sent. Every call shares one HTTP/2 connection.
//!
//! One job per file: this one holds the [`Client`] itself and the helpers its parts share;
//! `builder` connects, `address` turns an rpc layer and an address into a URL, `registry` keeps
//! the method list and changes it on the server, `call` sends calls, `method` is the per-method
//! handle and `pending` the result that completes later.
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

mod address;
mod builder;
pub(crate) mod call;
mod method;
mod pending;
mod registry;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::code::Code;
use crate::error::Error;
use crate::grpc::{GrpcChannel, InferenceClient};
use crate::signature::MethodInfo;
use crate::transport::Transport;

pub(crate) use address::Protocol;

pub use address::RPC_LAYERS;
pub use builder::ClientBuilder;
pub use method::MethodHandle;
pub use pending::StatusOrResult;
// Also here, where it was before it got a module of its own, so old paths keep working.
pub use crate::options::{ClientOptions, Encoding};

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
    /// The gRPC service on the same connection (the `grpc` and `grpcs` layers call with it).
    channel: GrpcChannel,
    /// `{rpc_layer}://host:port`.
    address: String,
    protocol: Protocol,
    name: String,
    default_timeout: Duration,
    encoding: Encoding,
    methods: RwLock<BTreeMap<String, MethodInfo>>,
    /// Input names of methods the list does not hold, or of pinned versions, from their v2
    /// metadata: the binary call names its inputs.
    input_names: RwLock<HashMap<ModelKey, Vec<String>>>,
}

/// A method's name and, when pinned, its version.
type ModelKey = (String, Option<u32>);

impl Client {
    /// Connect to the server at `address` and fetch its methods, like TF's `Client.create`.
    ///
    /// `rpc_layer` is `"http"` or `"https"` (TLS, trusting the webpki roots; see
    /// [`Client::builder`] for a private CA or a key); `address` is `host:port` or a URL of that
    /// scheme. `name` identifies this client in the server's logs; `timeout` is the default for
    /// every call and bounds creation itself (`Duration::ZERO`: no timeout).
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
        Client::builder(rpc_layer, address)
            .name(name)
            .timeout(timeout)
            .connect()
            .await
    }

    /// A [`ClientBuilder`] for the server at `address` over `rpc_layer`: [`Client::create`]
    /// with everything else a connection can take (an API key, CA certificates to trust).
    ///
    /// Nothing is checked or sent until [`ClientBuilder::connect`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let client = wasmrpc_client::Client::builder("https", "localhost:8443")
    ///     .name("me")
    ///     .timeout(Duration::from_secs(5))
    ///     .key("my-tenant-key")
    ///     .ca_cert_pem(std::fs::read("ca.pem")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(rpc_layer: &str, address: &str) -> ClientBuilder {
        ClientBuilder::new(rpc_layer, address)
    }

    /// A client over `transport` that knows no methods yet; [`Client::refresh`] fills them in.
    /// Calls travel by `protocol`; the address it shows is `transport`'s under `rpc_layer`.
    fn new(
        transport: Transport,
        rpc_layer: &str,
        protocol: Protocol,
        name: String,
        default_timeout: Duration,
        encoding: Encoding,
    ) -> Client {
        let host_port = transport
            .base()
            .split_once("://")
            .map_or(transport.base(), |(_, rest)| rest);
        Client {
            inner: Arc::new(Inner {
                channel: GrpcChannel::new(&transport),
                address: format!("{rpc_layer}://{host_port}"),
                protocol,
                transport,
                name,
                default_timeout,
                encoding,
                methods: RwLock::new(BTreeMap::new()),
                input_names: RwLock::new(HashMap::new()),
            }),
        }
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

    /// The server's address under the client's rpc layer: `http://host:port`,
    /// `https://host:port`, `grpc://host:port` or `grpcs://host:port`.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) {
    /// println!("connected to {}", client.address());
    /// # }
    /// ```
    pub fn address(&self) -> &str {
        &self.inner.address
    }

    /// The generated gRPC client of `inference.GRPCInferenceService` on this client's
    /// connection, with its key and name: every RPC of the service (health, metadata,
    /// statistics, the repository), whatever the rpc layer. Answers are tonic's; map a
    /// [`tonic::Status`] to this crate's [`Error`] with [`crate::grpc::status_to_error`].
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use wasmrpc_client::grpc::ModelStatisticsRequest;
    /// let stats = client
    ///     .grpc()
    ///     .model_statistics(ModelStatisticsRequest { name: "add".into(), version: String::new() })
    ///     .await?
    ///     .into_inner();
    /// println!("{:?}", stats.model_stats);
    /// # Ok(()) }
    /// ```
    pub fn grpc(&self) -> InferenceClient {
        self.inner.channel.client()
    }

    /// The connection (the cluster's routes use it).
    pub(crate) fn transport(&self) -> &Transport {
        &self.inner.transport
    }
}

/// Names are checked here with the contract's one rule, so a name the server would refuse is
/// never sent (and never needs percent-encoding in a path).
fn check_name(name: &str) -> Result<(), Error> {
    wasmrpc_proto::names::check_name(name).map_err(|why| Error::new(Code::InvalidArgument, why))
}

/// A server answer that does not parse is the server's fault, not the caller's: INTERNAL.
fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| {
        Error::new(
            Code::Internal,
            format!("the server's answer could not be read: {e}"),
        )
    })
}

/// `fut`, or DEADLINE_EXCEEDED naming `what` past `limit` (`ZERO`: no limit).
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

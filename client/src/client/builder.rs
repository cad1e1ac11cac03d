//! [`ClientBuilder`]: the one way to configure a connection beyond TF's four arguments.
//!
//! [`Client::create`] keeps TensorFlow's shape (layer, address, name, timeout) and is this
//! builder with those four set; anything a connection may need on top (a key, CA certificates)
//! is a builder method rather than another variant of `create`, so adding a setting never
//! multiplies the constructors of both the async and the blocking client.

use std::time::Duration;

use super::{Client, address, with_timeout};
use crate::error::Error;
use crate::options::{ClientOptions, Encoding};
use crate::transport::Transport;

/// The name a client sends when [`ClientBuilder::name`] is not called.
const DEFAULT_NAME: &str = "wasmrpc-client";

/// Configures and connects a [`Client`]; made by [`Client::builder`].
///
/// Every setting is optional: the name defaults to `wasmrpc-client`, the timeout to
/// `Duration::ZERO` (TF's default: no limit in the client, the server's default deadline
/// applies to each call), no key is sent and only the webpki roots are trusted. Nothing is
/// checked or sent until [`ClientBuilder::connect`]. Its `Debug` never prints the key.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use wasmrpc_client::Client;
///
/// let client = Client::builder("https", "localhost:8443")
///     .name("trainer-1")
///     .timeout(Duration::from_secs(5))
///     .key("my-tenant-key")
///     .ca_cert_pem(std::fs::read("ca.pem")?)
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    rpc_layer: String,
    address: String,
    name: String,
    timeout: Duration,
    options: ClientOptions,
}

impl ClientBuilder {
    pub(super) fn new(rpc_layer: &str, address: &str) -> ClientBuilder {
        ClientBuilder {
            rpc_layer: rpc_layer.to_owned(),
            address: address.to_owned(),
            name: DEFAULT_NAME.to_owned(),
            timeout: Duration::ZERO,
            options: ClientOptions::default(),
        }
    }

    /// The client's name, sent in the `x-wasmrpc-client` header: the server shows it in its logs
    /// and counts requests by it in `/metrics`.
    ///
    /// ```
    /// let builder = wasmrpc_client::Client::builder("http", "127.0.0.1:8080").name("trainer-1");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The default timeout of every call, which also bounds [`connect`](Self::connect)
    /// (`Duration::ZERO`: no limit in the client).
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = wasmrpc_client::Client::builder("http", "127.0.0.1:8080")
    ///     .timeout(Duration::from_secs(5));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Send `key` with every request, as `Authorization: Bearer <key>` (a sensitive header:
    /// never printed, never indexed by HPACK).
    ///
    /// ```
    /// let builder = wasmrpc_client::Client::builder("http", "127.0.0.1:8080").key("my-tenant-key");
    /// assert!(!format!("{builder:?}").contains("my-tenant-key"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.options = self.options.with_key(key);
        self
    }

    /// Also trust the CA certificates in `pem` (a PEM file's contents, one or more
    /// `-----BEGIN CERTIFICATE-----` blocks) for `https`, besides the webpki roots. May be
    /// called again for more; `http` ignores them.
    ///
    /// ```no_run
    /// # fn demo() -> std::io::Result<()> {
    /// let builder = wasmrpc_client::Client::builder("https", "localhost:8443")
    ///     .ca_cert_pem(std::fs::read("ca.pem")?);
    /// # Ok(()) }
    /// ```
    pub fn ca_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.options = self.options.with_ca_cert_pem(pem);
        self
    }

    /// How calls send and receive tensors: [`Encoding::Binary`] (the default) or
    /// [`Encoding::Json`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Encoding;
    /// let client = wasmrpc_client::Client::builder("http", "127.0.0.1:8080")
    ///     .encoding(Encoding::Json)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.options = self.options.with_encoding(encoding);
        self
    }

    /// Send `ctx` as the W3C trace context (`traceparent`, `tracestate`) of every request that
    /// has no other: a [`trace::scope`](crate::trace::scope) around a call wins over it, and it
    /// wins over OpenTelemetry's current span (feature `opentelemetry`).
    ///
    /// ```
    /// use wasmrpc_client::trace::TraceContext;
    /// let parent: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap();
    /// let builder = wasmrpc_client::Client::builder("http", "127.0.0.1:8080").trace_context(parent);
    /// ```
    pub fn trace_context(mut self, ctx: crate::trace::TraceContext) -> Self {
        self.options = self.options.with_trace_context(ctx);
        self
    }

    /// Connect and fetch the server's methods, within the timeout.
    ///
    /// With rpc layer `"https"` calls go over one HTTP/2 connection negotiated by TLS ALPN, and
    /// the server's certificate must be valid for the address's host.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for an unsupported rpc layer (listing the supported ones), an address
    /// whose scheme is not the rpc layer, a name or key that is not a valid header value, or a
    /// CA certificate that is not PEM; DEADLINE_EXCEEDED when the server does not answer within
    /// the timeout; UNAVAILABLE when it cannot be reached, or (naming the certificate problem)
    /// when its certificate cannot be verified.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), wasmrpc_client::Error> {
    /// let client = wasmrpc_client::Client::builder("http", "127.0.0.1:8080").connect().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self) -> Result<Client, Error> {
        let resolved = address::resolve(&self.rpc_layer, &self.address)?;
        if resolved.protocol == address::Protocol::Grpc && self.options.encoding == Encoding::Json {
            return Err(Error::new(
                crate::code::Code::InvalidArgument,
                format!(
                    "rpc_layer `{}` calls over gRPC, whose tensors are binary: the JSON \
                     encoding is for the `http` and `https` layers",
                    self.rpc_layer
                ),
            ));
        }
        let transport = Transport::with_options(&resolved.base, &self.name, &self.options)?;
        let client = Client::new(
            transport,
            &self.rpc_layer,
            resolved.protocol,
            self.name,
            self.timeout,
            self.options.encoding,
        );
        with_timeout(self.timeout, "creating the client", client.refresh()).await?;
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Code;
    use crate::test_support::RecordingServer;

    fn connect(builder: ClientBuilder) -> Result<Client, Error> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(builder.connect())
    }

    fn create(rpc_layer: &str, address: &str) -> Result<Client, Error> {
        connect(
            Client::builder(rpc_layer, address)
                .name("t")
                .timeout(Duration::from_secs(5)),
        )
    }

    #[test]
    fn an_unsupported_layer_is_invalid_argument_listing_the_four() {
        let err = create("carrier-pigeon", "127.0.0.1:1").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .contains("supported layers: http, https, grpc, grpcs"),
            "{err}"
        );
    }

    #[test]
    fn json_over_a_grpc_layer_is_invalid_argument() {
        let builder = Client::builder("grpc", "127.0.0.1:1").encoding(Encoding::Json);
        let err = connect(builder).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("JSON encoding"), "{err}");
    }

    #[test]
    fn an_https_address_with_the_http_layer_is_invalid_argument_saying_so() {
        let err = create("http", "https://127.0.0.1:1").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("is https but rpc_layer is `http`"),
            "{err}"
        );
    }

    #[test]
    fn an_http_address_with_the_https_layer_is_invalid_argument_saying_so() {
        let err = create("https", "http://127.0.0.1:1").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("is http but rpc_layer is `https`"),
            "{err}"
        );
    }

    #[test]
    fn a_ca_certificate_that_is_not_pem_is_invalid_argument() {
        let builder = Client::builder("https", "127.0.0.1:1")
            .name("t")
            .timeout(Duration::from_secs(5))
            .ca_cert_pem(b"no certificate here".to_vec());
        let err = connect(builder).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("CA certificate 0"), "{err}");
    }

    #[test]
    fn an_https_server_nobody_listens_on_is_unavailable() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let err = create("https", &format!("127.0.0.1:{port}")).unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err}");
    }

    #[test]
    fn a_key_or_name_that_is_not_a_header_value_is_invalid_argument() {
        let err = connect(Client::builder("http", "127.0.0.1:1").key("two\nlines")).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("key"), "{err}");
        let err = connect(Client::builder("http", "127.0.0.1:1").name("two\nlines")).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("client name"), "{err}");
    }

    #[test]
    fn the_builder_starts_from_the_documented_defaults_and_keeps_every_setting() {
        let builder = Client::builder("https", "localhost:8443");
        assert_eq!(builder.name, "wasmrpc-client");
        assert_eq!(builder.timeout, Duration::ZERO);
        assert_eq!(builder.options.key, None);
        assert!(builder.options.ca_certs_pem.is_empty());

        let builder = builder
            .name("trainer-1")
            .timeout(Duration::from_millis(1500))
            .key("k")
            .ca_cert_pem("first")
            .ca_cert_pem(b"second".to_vec());
        assert_eq!(
            (builder.rpc_layer.as_str(), builder.address.as_str()),
            ("https", "localhost:8443")
        );
        assert_eq!(builder.name, "trainer-1");
        assert_eq!(builder.timeout, Duration::from_millis(1500));
        assert_eq!(builder.options.key.as_deref(), Some("k"));
        assert_eq!(
            builder.options.ca_certs_pem,
            [b"first".to_vec(), b"second".to_vec()]
        );
    }

    #[test]
    fn a_builder_never_prints_its_key() {
        let builder = Client::builder("http", "127.0.0.1:1").key("secret-key");
        let text = format!("{builder:?}");
        assert!(!text.contains("secret-key"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }

    #[tokio::test]
    async fn the_builder_sends_its_name_and_key_and_create_sends_no_key() {
        let server = RecordingServer::start();
        let client = Client::builder("http", &server.address)
            .name("trainer-1")
            .timeout(Duration::from_secs(5))
            .key("my-tenant-key")
            .connect()
            .await
            .unwrap();
        assert_eq!(client.name(), "trainer-1");
        assert_eq!(client.address(), format!("http://{}", server.address));
        assert_eq!(client.inner.default_timeout, Duration::from_secs(5));
        let seen = server.take_requests();
        assert_eq!(seen.len(), 1, "connecting lists the methods once");
        assert_eq!(seen[0].path, "/v1/methods");
        assert_eq!(seen[0].header("x-wasmrpc-client"), Some("trainer-1"));
        assert_eq!(
            seen[0].header("authorization"),
            Some("Bearer my-tenant-key")
        );

        let plain = Client::create("http", &server.address, "plain", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(plain.name(), "plain");
        let seen = server.take_requests();
        assert_eq!(seen[0].header("x-wasmrpc-client"), Some("plain"));
        assert_eq!(seen[0].header("authorization"), None);

        let unnamed = Client::builder("http", &server.address)
            .connect()
            .await
            .unwrap();
        assert_eq!(unnamed.name(), "wasmrpc-client");
        assert_eq!(unnamed.inner.default_timeout, Duration::ZERO);
        let seen = server.take_requests();
        assert_eq!(seen[0].header("x-wasmrpc-client"), Some("wasmrpc-client"));
    }

    #[tokio::test]
    async fn the_builders_timeout_bounds_connecting() {
        // The kernel accepts the connection; nobody ever answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = silent.local_addr().unwrap().to_string();
        let started = std::time::Instant::now();
        let err = Client::builder("http", &address)
            .timeout(Duration::from_millis(100))
            .connect()
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert!(err.message().contains("creating the client"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

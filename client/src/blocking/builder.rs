//! The blocking [`ClientBuilder`]: the async [`crate::ClientBuilder`] with a `connect` that
//! starts the runtime thread and waits.
//!
//! The settings are the async builder's own (each setter forwards to it), so a setting added
//! there needs one forwarding method here and nothing else.

use std::time::Duration;

use super::Client;
use super::runtime::{Worker, assert_not_in_runtime};
use crate::error::Error;

/// Configures and connects a blocking [`Client`]; made by [`Client::builder`]. The settings and
/// their defaults are those of the async [`crate::ClientBuilder`].
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use wasmrpc_client::blocking::Client;
///
/// let client = Client::builder("https", "localhost:8443")
///     .name("my-script")
///     .timeout(Duration::from_secs(5))
///     .key("my-tenant-key")
///     .ca_cert_pem(std::fs::read("ca.pem")?)
///     .connect()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct ClientBuilder {
    inner: crate::ClientBuilder,
}

impl ClientBuilder {
    pub(super) fn new(rpc_layer: &str, address: &str) -> ClientBuilder {
        ClientBuilder {
            inner: crate::Client::builder(rpc_layer, address),
        }
    }

    /// The client's name, sent in the `x-wasmrpc-client` header (as
    /// [`crate::ClientBuilder::name`]).
    ///
    /// ```
    /// let builder = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080").name("me");
    /// ```
    pub fn name(self, name: impl Into<String>) -> Self {
        ClientBuilder {
            inner: self.inner.name(name),
        }
    }

    /// The default timeout of every call, which also bounds [`connect`](Self::connect)
    /// (`Duration::ZERO`: no limit in the client; as [`crate::ClientBuilder::timeout`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080")
    ///     .timeout(Duration::from_secs(5));
    /// ```
    pub fn timeout(self, timeout: Duration) -> Self {
        ClientBuilder {
            inner: self.inner.timeout(timeout),
        }
    }

    /// Send `key` as `Authorization: Bearer <key>` (as [`crate::ClientBuilder::key`]).
    ///
    /// ```
    /// let builder = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080")
    ///     .key("my-tenant-key");
    /// assert!(!format!("{builder:?}").contains("my-tenant-key"));
    /// ```
    pub fn key(self, key: impl Into<String>) -> Self {
        ClientBuilder {
            inner: self.inner.key(key),
        }
    }

    /// Also trust the CA certificates in `pem` for `https` (as
    /// [`crate::ClientBuilder::ca_cert_pem`]).
    ///
    /// ```no_run
    /// # fn demo() -> std::io::Result<()> {
    /// let builder = wasmrpc_client::blocking::Client::builder("https", "localhost:8443")
    ///     .ca_cert_pem(std::fs::read("ca.pem")?);
    /// # Ok(()) }
    /// ```
    pub fn ca_cert_pem(self, pem: impl Into<Vec<u8>>) -> Self {
        ClientBuilder {
            inner: self.inner.ca_cert_pem(pem),
        }
    }

    /// How calls send and receive tensors: [`Encoding::Binary`](crate::Encoding::Binary) (the
    /// default) or [`Encoding::Json`](crate::Encoding::Json).
    ///
    /// ```no_run
    /// let builder = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080")
    ///     .encoding(wasmrpc_client::Encoding::Json);
    /// ```
    pub fn encoding(self, encoding: crate::Encoding) -> Self {
        ClientBuilder {
            inner: self.inner.encoding(encoding),
        }
    }

    /// Send `ctx` as the W3C trace context of every request that has no other (as
    /// [`crate::ClientBuilder::trace_context`]; a
    /// [`trace::scope_blocking`](crate::trace::scope_blocking) around a call wins).
    ///
    /// ```
    /// let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap();
    /// let builder = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080")
    ///     .trace_context(parent);
    /// ```
    pub fn trace_context(self, ctx: crate::trace::TraceContext) -> Self {
        ClientBuilder {
            inner: self.inner.trace_context(ctx),
        }
    }

    /// Start the runtime thread, connect and fetch the server's methods, within the timeout.
    ///
    /// # Errors
    /// As [`crate::ClientBuilder::connect`]; INTERNAL when the runtime thread cannot start.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), wasmrpc_client::Error> {
    /// let client = wasmrpc_client::blocking::Client::builder("http", "127.0.0.1:8080").connect()?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn connect(self) -> Result<Client, Error> {
        self.connect_as("ClientBuilder::connect")
    }

    /// [`ClientBuilder::connect`], naming `what` the caller called if it panics.
    #[track_caller]
    pub(super) fn connect_as(self, what: &str) -> Result<Client, Error> {
        // Checked before the thread starts: a panic must not leave a thread behind.
        assert_not_in_runtime(what);
        let worker = Worker::start()?;
        let inner = worker.run(what, self.inner.connect())?;
        Ok(Client::new(inner, worker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::Code;
    use crate::test_support::RecordingServer;

    #[test]
    fn the_blocking_builder_sends_its_name_and_key() {
        let server = RecordingServer::start();
        let client = Client::builder("http", &server.address)
            .name("script-1")
            .timeout(Duration::from_secs(5))
            .key("my-tenant-key")
            .ca_cert_pem(b"ignored over http".to_vec())
            .connect()
            .unwrap();
        assert_eq!(client.name(), "script-1");
        assert_eq!(client.address(), format!("http://{}", server.address));
        let seen = server.take_requests();
        assert_eq!(seen.len(), 1, "connecting lists the methods once");
        assert_eq!(seen[0].header("x-wasmrpc-client"), Some("script-1"));
        assert_eq!(
            seen[0].header("authorization"),
            Some("Bearer my-tenant-key")
        );
    }

    #[test]
    fn the_blocking_builder_refuses_what_the_async_one_refuses() {
        let err = Client::builder("https", "127.0.0.1:1")
            .ca_cert_pem(b"no certificate here".to_vec())
            .connect()
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("CA certificate 0"), "{err}");
    }

    #[test]
    fn a_blocking_builder_never_prints_its_key() {
        let builder = Client::builder("http", "127.0.0.1:1").key("secret-key");
        assert!(!format!("{builder:?}").contains("secret-key"));
    }

    #[test]
    #[should_panic(expected = "blocking::ClientBuilder::connect was called from inside an async")]
    fn connecting_inside_a_runtime_panics_with_advice() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let _ = Client::builder("http", "127.0.0.1:1").connect();
        });
    }
}

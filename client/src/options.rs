//! [`ClientOptions`]: what a connection needs beyond its address and name (the API key, the CA
//! certificates trusted for `https`).
//!
//! It lives apart from the client so that [`crate::transport`], which applies these settings,
//! and [`crate::client`], which collects them in its builder, both depend on it and never on
//! each other's internals: the dependency runs client → transport → options.

use crate::trace::TraceContext;

/// How a connection authenticates itself and whom it trusts: the API key and, for `https`, the
/// CA certificates trusted besides the webpki roots (a private CA, or a self-signed server
/// certificate).
///
/// A client sets these through its builder ([`Client::builder`](crate::Client::builder)`…`
/// [`.key`](crate::ClientBuilder::key), [`.ca_cert_pem`](crate::ClientBuilder::ca_cert_pem));
/// this type is what the builder hands to the [`Transport`](crate::transport::Transport), and
/// what a raw transport takes.
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
    /// How tensors travel on calls: [`Encoding::Binary`] unless set.
    pub encoding: Encoding,
    /// The W3C trace context every request carries when no [`trace::scope`](crate::trace::scope)
    /// around it gives one (see [`crate::trace`]).
    pub trace_context: Option<TraceContext>,
}

/// How a call's tensors travel.
///
/// ```
/// use wasmrpc_client::{ClientOptions, Encoding};
/// assert_eq!(ClientOptions::default().encoding, Encoding::Binary);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encoding {
    /// The KServe v2 infer route with binary tensor data: each tensor's little-endian bytes after
    /// a small JSON header, both ways. The default: nothing is turned into text and back.
    #[default]
    Binary,
    /// The v1 call route in JSON, every element a number or a string: readable on the wire, and
    /// what curl sends.
    Json,
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

    /// Send and receive tensors as `encoding`.
    ///
    /// ```
    /// use wasmrpc_client::{ClientOptions, Encoding};
    /// let options = ClientOptions::default().with_encoding(Encoding::Json);
    /// assert_eq!(options.encoding, Encoding::Json);
    /// ```
    pub fn with_encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// Send `ctx` as the trace context of every request that has no other (see
    /// [`crate::trace`] for which one wins).
    ///
    /// ```
    /// use wasmrpc_client::{ClientOptions, trace::TraceContext};
    /// let parent: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap();
    /// let options = ClientOptions::default().with_trace_context(parent.clone());
    /// assert_eq!(options.trace_context, Some(parent));
    /// ```
    pub fn with_trace_context(mut self, ctx: TraceContext) -> Self {
        self.trace_context = Some(ctx);
        self
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key: options end up in builders and clients that get logged.
        f.debug_struct("ClientOptions")
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field(
                "ca_certs_pem",
                &format_args!("{} PEM file(s)", self.ca_certs_pem.len()),
            )
            .field("encoding", &self.encoding)
            .field("trace_context", &self.trace_context)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_options_never_print_the_key() {
        let options = ClientOptions::default()
            .with_key("secret-key")
            .with_ca_cert_pem(b"pem".to_vec());
        let text = format!("{options:?}");
        assert!(!text.contains("secret-key"), "{text}");
        assert!(text.contains("1 PEM file(s)"), "{text}");
    }
}

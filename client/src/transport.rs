//! One HTTP/2 connection per client (`connection.rs`): with prior knowledge over plain TCP
//! (`http://`) or over TLS by ALPN (`https://`), so many concurrent calls share one connection;
//! every request names the client and carries its key.
//!
//! It knows nothing of the client above it: it takes a base URL, a name and [`ClientOptions`],
//! so it can also be used alone (tests poll a TLS server's `/readyz` with it).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::body::Chunks;
use crate::code::Code;
use crate::connection::{self, Connection, Target};
use crate::error::{Error, ErrorBody};
use crate::options::ClientOptions;
use crate::trace::{self, TraceContext};

/// The header carrying the client's name; the server logs it with every request.
///
/// ```
/// assert_eq!(wasmrpc_client::transport::CLIENT_NAME_HEADER, "x-wasmrpc-client");
/// ```
pub const CLIENT_NAME_HEADER: &str = wasmrpc_proto::headers::CLIENT_NAME;

/// An HTTP/2 connection to one server, shared by its clones.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::transport::Transport;
/// let transport = Transport::new("http://127.0.0.1:8080", "raw", None)?;
/// let body = transport.send(http::Method::GET, "/v1/methods", None).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Transport {
    base: String,
    name: HeaderValue,
    key: Option<HeaderValue>,
    tls: bool,
    /// The trace context of requests that have no other (`ClientOptions::trace_context`).
    trace_context: Option<TraceContext>,
    connection: Arc<Connection>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.base)
            .field("name", &self.name)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// A transport to `base` (`http://host:port`, or `https://host:port` verified against the
    /// webpki roots), naming itself `name`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a malformed address, name or key.
    ///
    /// ```
    /// use wasmrpc_client::transport::Transport;
    /// assert!(Transport::new("http://127.0.0.1:8080", "me", None).is_ok());
    /// assert!(Transport::new("https://127.0.0.1:8443", "me", None).is_ok());
    /// assert!(Transport::new("127.0.0.1:8080", "me", None).unwrap_err().is_invalid_argument());
    /// ```
    pub fn new(base: &str, name: &str, key: Option<&str>) -> Result<Self, Error> {
        let options = ClientOptions {
            key: key.map(str::to_owned),
            ..ClientOptions::default()
        };
        Transport::with_options(base, name, &options)
    }

    /// A transport to `base` (`http://host:port` or `https://host:port`) with `options`: the
    /// key, and for `https` the CA certificates trusted besides the webpki roots.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a malformed address, name or key, or a CA certificate that is not
    /// PEM.
    ///
    /// ```
    /// use wasmrpc_client::{ClientOptions, transport::Transport};
    /// let options = ClientOptions::default().with_key("my-tenant-key");
    /// assert!(Transport::with_options("https://127.0.0.1:8443", "me", &options).is_ok());
    /// let bad_ca = ClientOptions::default().with_ca_cert_pem(b"not a certificate".to_vec());
    /// let err = Transport::with_options("https://127.0.0.1:8443", "me", &bad_ca).unwrap_err();
    /// assert!(err.is_invalid_argument());
    /// ```
    pub fn with_options(base: &str, name: &str, options: &ClientOptions) -> Result<Self, Error> {
        let base = base.trim_end_matches('/').to_owned();
        let not_an_address = || {
            Error::new(
                Code::InvalidArgument,
                format!(
                    "`{base}` is not a server address like http://127.0.0.1:8080 or \
                     https://example.com:8443"
                ),
            )
        };
        let uri = base.parse::<Uri>().map_err(|_| not_an_address())?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(not_an_address()),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(not_an_address)?;
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let name = HeaderValue::from_str(name).map_err(|_| {
            Error::new(
                Code::InvalidArgument,
                format!("client name `{name}` is not a valid header value"),
            )
        })?;
        let key = options
            .key
            .as_deref()
            .map(|k| {
                // Sensitive: never printed by Debug, never added to HPACK's dynamic table.
                HeaderValue::from_str(&format!("Bearer {k}")).map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
            })
            .transpose()
            .map_err(|_| {
                Error::new(Code::InvalidArgument, "the key is not a valid header value")
            })?;
        let tls_to = if tls {
            // The certificate must name the host (an IP address's brackets are not part of it).
            let server = ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
                .map_err(|_| not_an_address())?;
            Some((
                connection::tls_connector(tls_config(&options.ca_certs_pem)?),
                server,
            ))
        } else {
            None
        };
        let connection = Connection::new(Target {
            address: format!("{host}:{port}"),
            tls: tls_to,
        });
        Ok(Transport {
            base,
            name,
            key,
            tls,
            trace_context: options.trace_context.clone(),
            connection: Arc::new(connection),
        })
    }

    /// The server's base address.
    ///
    /// ```
    /// let t = wasmrpc_client::transport::Transport::new("http://127.0.0.1:8080/", "me", None).unwrap();
    /// assert_eq!(t.base(), "http://127.0.0.1:8080");
    /// ```
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Send a request and read the whole answer; non-2xx answers become the server's [`Error`].
    ///
    /// # Errors
    /// UNAVAILABLE when the server cannot be reached; the server's error otherwise.
    ///
    /// ```no_run
    /// # async fn demo(t: wasmrpc_client::transport::Transport) -> Result<(), wasmrpc_client::Error> {
    /// let answer = t.send(http::Method::GET, "/healthz", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
    ) -> Result<Bytes, Error> {
        let body = body.map(|(bytes, content_type)| (Chunks::from(bytes), content_type));
        self.exchange(method, path_and_query, body, &[])
            .await
            .map(|(_, body)| body)
    }

    /// [`Transport::send`] with `extra` request headers, answering the response's headers too
    /// (the binary infer form frames its body with one). The body is [`Chunks`]: buffers sent one
    /// after another, so a binary infer request goes out without joining its tensors into one.
    ///
    /// # Errors
    /// As [`Transport::send`]. A `/v2` error (`{"error": "..."}`) carries the code the server
    /// put in `x-wasmrpc-code`, or one made from the status.
    ///
    /// ```no_run
    /// # async fn demo(t: wasmrpc_client::transport::Transport) -> Result<(), wasmrpc_client::Error> {
    /// let (headers, body) = t.exchange(http::Method::GET, "/v2", None, &[]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn exchange(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Chunks, &'static str)>,
        extra: &[(&'static str, HeaderValue)],
    ) -> Result<(HeaderMap, Bytes), Error> {
        let uri = format!("{}{}", self.base, path_and_query);
        let (chunks, content_type) = body.unwrap_or((Chunks::new(Vec::new()), "application/json"));
        let mut req = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header(CLIENT_NAME_HEADER, self.name.clone())
            .header(header::CONTENT_TYPE, content_type);
        if let Some(key) = &self.key {
            req = req.header(header::AUTHORIZATION, key.clone());
        }
        for (name, value) in extra {
            req = req.header(*name, value.clone());
        }
        if let Some(headers) = req.headers_mut() {
            self.insert_trace_context(headers);
        }
        // As hyper does: a length for any body, and for an empty one where a body is expected.
        let length = chunks.len();
        if length > 0 || [Method::POST, Method::PUT, Method::PATCH].contains(&method) {
            req = req.header(header::CONTENT_LENGTH, length);
        }
        let req = req.body(()).map_err(|e| {
            Error::new(Code::InvalidArgument, format!("bad request for {uri}: {e}"))
        })?;
        let response = self
            .connection
            .send(req, &chunks)
            .await
            .map_err(|failure| self.unreachable(&failure))?;
        let (parts, body) = response.into_parts();
        let expected = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let body = crate::body::gather(body, expected).await.map_err(|e| {
            Error::new(Code::Unavailable, format!("reading the answer failed: {e}"))
        })?;
        if parts.status.is_success() {
            Ok((parts.headers, body))
        } else {
            Err(error_from_response(parts.status, &parts.headers, &body))
        }
    }
}

impl Transport {
    /// UNAVAILABLE for a request that could not be exchanged, naming the server and, where the
    /// low-level error usually means something in this API's terms, what to do about it.
    pub(crate) fn unreachable(&self, failure: &connection::Failure) -> Error {
        let chain = error_chain(failure.error.as_ref());
        let hint = if chain.contains("invalid peer certificate") {
            "; to trust a private CA, give its certificate (Client::builder(..).ca_cert_pem, \
             or --ca-cert in the CLI)"
        } else if self.tls && chain.contains("InvalidContentType") {
            "; the server does not seem to speak TLS: try rpc_layer `http` (an http:// address)"
        } else if !self.tls && chain.contains("frame with invalid size") {
            "; the server may be serving TLS: try rpc_layer `https` (an https:// address)"
        } else {
            ""
        };
        Error::new(
            Code::Unavailable,
            format!("cannot reach the server at {}: {chain}{hint}", self.base),
        )
    }

    /// Add the trace context this request carries, if any (`traceparent`, `tracestate`): the
    /// scope's, else this transport's own, else OpenTelemetry's ([`crate::trace`]).
    pub(crate) fn insert_trace_context(&self, headers: &mut HeaderMap) {
        if let Some(ctx) = trace::outgoing(self.trace_context.as_ref()) {
            ctx.insert_into(headers);
        }
    }

    /// The connection, its name header and its key, for the gRPC channel over it.
    pub(crate) fn parts(&self) -> (&Arc<Connection>, &HeaderValue, Option<&HeaderValue>) {
        (&self.connection, &self.name, self.key.as_ref())
    }
}

/// A TLS client configuration trusting the webpki roots and `extra_cas` (PEM, each one or more
/// certificates), with the `ring` provider so no process-wide default is needed.
fn tls_config(extra_cas: &[Vec<u8>]) -> Result<rustls::ClientConfig, Error> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (i, pem) in extra_cas.iter().enumerate() {
        let invalid = |why: String| {
            Error::new(
                Code::InvalidArgument,
                format!("CA certificate {i} (counting from 0) {why}"),
            )
        };
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("is not valid PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid(
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| invalid(format!("cannot be trusted: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(Code::Internal, format!("setting up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The error an unsuccessful answer carries: a v1 error body, a v2 one with its code in
/// `x-wasmrpc-code`, or one made from the status.
fn error_from_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Error {
    if let Ok(b) = serde_json::from_slice::<ErrorBody>(body) {
        return b.into();
    }
    let from_status = || Code::from_http_status(status.as_u16());
    if let Ok(v2) = serde_json::from_slice::<wasmrpc_proto::kserve::ErrorBody>(body) {
        let code = headers
            .get(wasmrpc_proto::headers::CODE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<Code>().ok())
            .unwrap_or_else(from_status);
        return Error::new(code, v2.error);
    }
    Error::new(
        from_status(),
        format!(
            "the server answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(512)])
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::test_support::RecordingServer;

    #[tokio::test]
    async fn a_closed_connection_is_opened_again_for_the_next_request() {
        let first = RecordingServer::start();
        let address = first.address.clone();
        let transport = Transport::new(&format!("http://{address}"), "t", None).unwrap();
        transport
            .send(Method::GET, "/v1/methods", None)
            .await
            .unwrap();
        drop(first); // the server stops, and its connection with it
        // Let this runtime see the connection close (a request racing that close could be lost
        // with it, and is not sent again: it may have reached the server).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = RecordingServer::start_on(&address);
        let answer = transport.send(Method::GET, "/v1/methods", None).await;
        assert_eq!(&answer.unwrap()[..], br#"{"methods":[]}"#);
        assert_eq!(
            second.take_requests().len(),
            1,
            "sent once, on a new connection"
        );
    }

    #[tokio::test]
    async fn a_request_carries_its_length_and_name_and_a_get_no_length() {
        let server = RecordingServer::start();
        let transport = Transport::new(&format!("http://{}", server.address), "t", None).unwrap();
        let body = Chunks::new(vec![
            Bytes::from_static(b"{\"a\":"),
            Bytes::from_static(b"1}"),
        ]);
        transport
            .exchange(Method::POST, "/v1/x", Some((body, "application/json")), &[])
            .await
            .unwrap();
        transport
            .send(Method::GET, "/v1/methods", None)
            .await
            .unwrap();
        let seen = server.take_requests();
        assert_eq!(seen[0].header("content-length"), Some("7"));
        assert_eq!(seen[0].header("x-wasmrpc-client"), Some("t"));
        assert_eq!(
            seen[1].header("content-length"),
            None,
            "a GET without a body has none"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_unavailable_and_says_where() {
        let address = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        }; // nothing listens there now
        let transport = Transport::new(&format!("http://{address}"), "t", None).unwrap();
        let err = transport
            .send(Method::GET, "/healthz", None)
            .await
            .unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(err.to_string().contains(&address.to_string()), "{err}");
    }
}

//! One HTTP connection pool per client: HTTP/2 with prior knowledge over plain TCP (`http://`)
//! or HTTP/2 over TLS by ALPN (`https://`), so many concurrent calls share one connection; every
//! request names the client and carries its key.
//!
//! It knows nothing of the client above it: it takes a base URL, a name and [`ClientOptions`],
//! so it can also be used alone (tests poll a TLS server's `/readyz` with it).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::body::Chunks;
use crate::code::Code;
use crate::error::{Error, ErrorBody};
use crate::options::ClientOptions;

/// The header carrying the client's name; the server logs it with every request.
///
/// ```
/// assert_eq!(wasmrpc_client::transport::CLIENT_NAME_HEADER, "x-wasmrpc-client");
/// ```
pub const CLIENT_NAME_HEADER: &str = wasmrpc_proto::headers::CLIENT_NAME;

/// A pooled HTTP/2 connection to one server.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::transport::Transport;
/// let transport = Transport::new("http://127.0.0.1:8080", "raw", None)?;
/// let body = transport.send(http::Method::GET, "/v1/methods", None).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Transport {
    base: String,
    name: HeaderValue,
    key: Option<HeaderValue>,
    http: Pool,
}

/// The connection pool, cleartext or TLS: the connector types differ.
#[derive(Clone, Debug)]
enum Pool {
    Plain(HyperClient<HttpConnector, Chunks>),
    Tls(HyperClient<HttpsConnector<HttpConnector>, Chunks>),
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
        let tls = base
            .parse::<Uri>()
            .ok()
            .filter(|u| u.authority().is_some())
            .and_then(|u| match u.scheme_str() {
                Some("http") => Some(false),
                Some("https") => Some(true),
                _ => None,
            })
            .ok_or_else(|| {
                Error::new(
                    Code::InvalidArgument,
                    format!(
                        "`{base}` is not a server address like http://127.0.0.1:8080 or \
                         https://example.com:8443"
                    ),
                )
            })?;
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
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        // HTTP/2 only, over TLS too (ALPN offers just `h2`): every call shares one connection.
        let mut builder = HyperClient::builder(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .http2_only(true)
            // Tensors are megabytes: windows and frames sized for them, not for web pages (a
            // 16 MiB tensor took a thousand 16 KiB frames and many window updates).
            .http2_initial_stream_window_size(8 << 20)
            .http2_initial_connection_window_size(16 << 20)
            .http2_max_frame_size(1 << 20)
            .http2_keep_alive_interval(Some(Duration::from_secs(20)));
        let http = if tls {
            // The TLS connector hands `https` addresses to the TCP connector below it.
            connector.enforce_http(false);
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls_config(&options.ca_certs_pem)?)
                .https_only()
                .enable_http2()
                .wrap_connector(connector);
            Pool::Tls(builder.build(connector))
        } else {
            Pool::Plain(builder.build(connector))
        };
        Ok(Transport {
            base,
            name,
            key,
            http,
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
        let mut req = Request::builder()
            .method(method)
            .uri(&uri)
            .header(CLIENT_NAME_HEADER, self.name.clone());
        if let Some(key) = &self.key {
            req = req.header(header::AUTHORIZATION, key.clone());
        }
        for (name, value) in extra {
            req = req.header(*name, value.clone());
        }
        let (chunks, content_type) = body.unwrap_or((Chunks::new(Vec::new()), "application/json"));
        let req = req
            .header(header::CONTENT_TYPE, content_type)
            .body(chunks)
            .map_err(|e| {
                Error::new(Code::InvalidArgument, format!("bad request for {uri}: {e}"))
            })?;
        let response = match &self.http {
            Pool::Plain(http) => http.request(req).await,
            Pool::Tls(http) => http.request(req).await,
        };
        let response = response.map_err(|e| {
            let chain = error_chain(&e);
            let tls = matches!(self.http, Pool::Tls(_));
            // What these low-level errors usually mean, said in the terms of this API.
            let hint = if chain.contains("invalid peer certificate") {
                "; to trust a private CA, give its certificate (Client::builder(..).ca_cert_pem, \
                 or --ca-cert in the CLI)"
            } else if tls && chain.contains("InvalidContentType") {
                "; the server does not seem to speak TLS: try rpc_layer `http` (an http:// address)"
            } else if !tls && chain.contains("frame with invalid size") {
                "; the server may be serving TLS: try rpc_layer `https` (an https:// address)"
            } else {
                ""
            };
            Error::new(
                Code::Unavailable,
                format!("cannot reach the server at {}: {chain}{hint}", self.base),
            )
        })?;
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

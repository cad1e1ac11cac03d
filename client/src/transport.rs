//! One HTTP connection pool per client: HTTP/2 with prior knowledge over plain TCP, so many
//! concurrent calls share one connection; every request names the client and carries its key.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::code::Code;
use crate::error::{Error, ErrorBody};

/// The header carrying the client's name; the server logs it with every request.
///
/// ```
/// assert_eq!(wasmrpc_client::transport::CLIENT_NAME_HEADER, "x-wasmrpc-client");
/// ```
pub const CLIENT_NAME_HEADER: &str = "x-wasmrpc-client";

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
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

impl Transport {
    /// A transport to `base` (`http://host:port`), naming itself `name`.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a malformed address, name or key.
    ///
    /// ```
    /// use wasmrpc_client::transport::Transport;
    /// assert!(Transport::new("http://127.0.0.1:8080", "me", None).is_ok());
    /// assert!(Transport::new("127.0.0.1:8080", "me", None).unwrap_err().is_invalid_argument());
    /// ```
    pub fn new(base: &str, name: &str, key: Option<&str>) -> Result<Self, Error> {
        let base = base.trim_end_matches('/').to_owned();
        base.parse::<Uri>()
            .ok()
            .filter(|u| u.scheme_str() == Some("http") && u.authority().is_some())
            .ok_or_else(|| {
                Error::new(
                    Code::InvalidArgument,
                    format!("`{base}` is not a server address like http://127.0.0.1:8080"),
                )
            })?;
        let name = HeaderValue::from_str(name).map_err(|_| {
            Error::new(
                Code::InvalidArgument,
                format!("client name `{name}` is not a valid header value"),
            )
        })?;
        let key = key
            .map(|k| HeaderValue::from_str(&format!("Bearer {k}")))
            .transpose()
            .map_err(|_| {
                Error::new(Code::InvalidArgument, "the key is not a valid header value")
            })?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        let http = HyperClient::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .http2_only(true)
            .http2_keep_alive_interval(Some(Duration::from_secs(20)))
            .build(connector);
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
        let uri = format!("{}{}", self.base, path_and_query);
        let mut req = Request::builder()
            .method(method)
            .uri(&uri)
            .header(CLIENT_NAME_HEADER, self.name.clone());
        if let Some(key) = &self.key {
            req = req.header(header::AUTHORIZATION, key.clone());
        }
        let (bytes, content_type) = body.unwrap_or((Bytes::new(), "application/json"));
        let req = req
            .header(header::CONTENT_TYPE, content_type)
            .body(Full::new(bytes))
            .map_err(|e| {
                Error::new(Code::InvalidArgument, format!("bad request for {uri}: {e}"))
            })?;
        let response = self.http.request(req).await.map_err(|e| {
            Error::new(
                Code::Unavailable,
                format!(
                    "cannot reach the server at {}: {}",
                    self.base,
                    error_chain(&e)
                ),
            )
        })?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::new(Code::Unavailable, format!("reading the answer failed: {e}")))?
            .to_bytes();
        if status.is_success() {
            Ok(body)
        } else {
            Err(error_from_response(status, &body))
        }
    }
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

/// The error an unsuccessful answer carries, or one made from its status.
fn error_from_response(status: StatusCode, body: &[u8]) -> Error {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(b) => b.into(),
        Err(_) => Error::new(
            Code::from_http_status(status.as_u16()),
            format!(
                "the server answered {status}: {}",
                String::from_utf8_lossy(&body[..body.len().min(512)])
            ),
        ),
    }
}

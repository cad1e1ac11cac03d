//! The one error type of the native HTTP API and its mapping to status codes.
//!
//! Every failure is `{"error": {"code": "...", "message": "..."}}` with the canonical code's HTTP
//! status. A service failure whose text is the server's own (a store's, a join's, the engine's)
//! is logged with a request id, and the client gets INTERNAL with that id instead of the text.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::{Code, ErrorBody, Status, headers};

use crate::service::ServiceError;
use crate::tenancy::AuthError;

/// An error answered by the native API.
#[derive(Debug)]
pub struct ApiError {
    /// Boxed: handlers return `Result<_, ApiError>`, and the error should not make that large.
    kind: Box<Kind>,
    /// Overrides the code's usual HTTP status (413 for a body over its limit).
    http: Option<StatusCode>,
    /// A header the answer carries (`WWW-Authenticate` on a 401).
    header: Option<Box<(HeaderName, HeaderValue)>>,
    /// Answer with `Connection: close`: the request's body was left unread, so the connection
    /// cannot carry another request.
    close: bool,
}

#[derive(Debug)]
enum Kind {
    /// The API's own refusal (a bad body, path or query): shown as it is.
    Status(Status),
    /// A failure of the service: shown, or withheld when it is the server's own.
    Service(ServiceError),
    /// The server's own failure outside the service (its text stays in the log).
    Internal(String),
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError {
            kind: Box::new(Kind::Status(Status::new(code, message))),
            http: None,
            header: None,
            close: false,
        }
    }

    /// An error answered with a specific HTTP status instead of the code's usual one.
    pub fn with_http(code: Code, http: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            kind: Box::new(Kind::Status(Status::new(code, message))),
            http: Some(http),
            header: None,
            close: false,
        }
    }

    /// The canonical code the client will read.
    pub fn code(&self) -> Code {
        match &*self.kind {
            Kind::Status(status) => status.code(),
            Kind::Service(e) => e.code(),
            Kind::Internal(_) => Code::Internal,
        }
    }

    /// The server's own failure: INTERNAL, its text logged under a request id, never sent.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        ApiError {
            kind: Box::new(Kind::Internal(error.to_string())),
            http: None,
            header: None,
            close: false,
        }
    }

    /// Credentials refused: 401 UNAUTHENTICATED, with `WWW-Authenticate: Bearer`.
    pub fn unauthenticated(e: &AuthError) -> Self {
        ApiError {
            kind: Box::new(Kind::Status(Status::new(
                Code::Unauthenticated,
                e.to_string(),
            ))),
            http: None,
            header: Some(Box::new((
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            ))),
            close: false,
        }
    }

    /// The same refusal with another message when it is the body-over-its-limit one (413), so a
    /// quota can name itself.
    pub fn with_message_if_too_large(self, message: String) -> Self {
        if self.http == Some(StatusCode::PAYLOAD_TOO_LARGE) {
            ApiError::with_http(
                Code::ResourceExhausted,
                StatusCode::PAYLOAD_TOO_LARGE,
                message,
            )
        } else {
            self
        }
    }

    /// A request body over its limit: RESOURCE_EXHAUSTED with HTTP 413.
    pub fn body_too_large(limit: usize) -> Self {
        ApiError::with_http(
            Code::ResourceExhausted,
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over the limit of {limit} bytes"),
        )
    }

    /// A request body not all received within `timeout`: DEADLINE_EXCEEDED with HTTP 408, and
    /// the connection closed (a client that slow is not worth keeping, and the rest of its body
    /// would be read as the next request).
    pub fn body_timeout(timeout: std::time::Duration) -> Self {
        let mut e = ApiError::with_http(
            Code::DeadlineExceeded,
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within the body read timeout of {} s",
                timeout.as_secs_f64()
            ),
        );
        e.close = true;
        e
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError {
            kind: Box::new(Kind::Service(e)),
            http: None,
            header: None,
            close: false,
        }
    }
}

/// A request id for a withheld internal error: unique in this process, and unlikely to repeat
/// across restarts (the high bits come from the start time).
fn new_request_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    format!(
        "{:08x}-{:08x}",
        start & 0xffff_ffff,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// An [`ApiError`] decided: what the client reads, and what goes with it. The one place that
/// decides it, for HTTP ([`IntoResponse`]) and gRPC (`grpc/status.rs`) alike.
#[derive(Debug)]
pub struct Answer {
    /// The code and the message the client reads.
    pub status: Status,
    /// The HTTP status, when not the code's usual one.
    pub http: Option<StatusCode>,
    /// The request id a withheld internal error was logged under.
    pub request_id: Option<String>,
    /// A header the answer carries (`WWW-Authenticate`, `Retry-After`).
    pub header: Option<(HeaderName, HeaderValue)>,
    /// Whether the connection should close after it (HTTP/1.1 only).
    pub close: bool,
}

impl ApiError {
    /// Decide what the client reads, logging what the operator should see (a withheld internal
    /// error under its request id, the server running out of something, a failed request).
    pub fn answer(self) -> Answer {
        let mut request_id: Option<String> = None;
        let mut extra_header = self.header;
        let withheld = |text: &dyn std::fmt::Display, request_id: &mut Option<String>| {
            let id = new_request_id();
            tracing::error!(request_id = %id, error = %text, "internal error");
            let message =
                format!("internal error; the server's log has the details under request id {id}");
            *request_id = Some(id);
            message
        };
        let status = match *self.kind {
            Kind::Status(status) => status,
            Kind::Internal(text) => Status::new(Code::Internal, withheld(&text, &mut request_id)),
            Kind::Service(e) => {
                if let Some(wait) = e.retry_after() {
                    // Whole seconds, rounded up: `Retry-After: 0` would invite a hammering retry.
                    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                    extra_header = Some(Box::new((
                        header::RETRY_AFTER,
                        HeaderValue::from(secs.max(1)),
                    )));
                }
                let code = e.code();
                if let Some(what) = e.server_ran_out_of() {
                    // Not a server error by its status, but the operator has to act on it.
                    tracing::warn!(error = %e, "the server ran out of {what}");
                }
                if let Some(source) = e.logged_source() {
                    // The client reads the reason; what caused it is the operator's.
                    tracing::warn!(reason = %e, source, "unavailable");
                }
                match e.public_message() {
                    Some(message) => Status::new(code, message),
                    None => Status::new(code, withheld(&e, &mut request_id)),
                }
            }
        };
        let server_error = self
            .http
            .map_or(status.code().http_status() >= 500, |h| h.is_server_error());
        if server_error && status.code() != Code::Unavailable && request_id.is_none() {
            tracing::warn!(code = %status.code(), message = %status.message(), "request failed");
        } else {
            tracing::debug!(code = %status.code(), message = %status.message(), "request refused");
        }
        Answer {
            status,
            http: self.http,
            request_id,
            header: extra_header.map(|h| *h),
            close: self.close,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let answer = self.answer();
        let http = answer.http.unwrap_or_else(|| {
            StatusCode::from_u16(answer.status.code().http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        });
        let mut response = (http, Json(ErrorBody::from(answer.status))).into_response();
        if answer.close {
            // hyper ends an HTTP/1.1 connection after this response; HTTP/2 drops the header
            // (only the stream ends there).
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                HeaderValue::from_static("close"),
            );
        }
        if let Some(id) = answer
            .request_id
            .and_then(|id| HeaderValue::from_str(&id).ok())
        {
            response.headers_mut().insert(headers::REQUEST_ID, id);
        }
        if let Some((name, value)) = answer.header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryError;

    async fn body_of(response: Response) -> (StatusCode, Option<String>, serde_json::Value) {
        let status = response.status();
        let id = response
            .headers()
            .get(headers::REQUEST_ID)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, id, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_store_failure_is_internal_with_a_request_id_and_no_details() {
        let e = ServiceError::Store(RegistryError::Database(
            "redb: the page at /var/lib/wasmrpc/registry.redb is corrupt".into(),
        ));
        let (status, id, body) = body_of(ApiError::from(e).into_response()).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["code"], "INTERNAL");
        let message = body["error"]["message"].as_str().unwrap();
        let id = id.expect("an x-request-id header");
        assert!(message.contains(&id), "{message}");
        assert!(
            !message.contains("redb") && !message.contains("/var/lib"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_guest_failure_is_shown_as_it_is() {
        let e = ServiceError::NotFound("nope".into());
        let (status, id, body) = body_of(ApiError::from(e).into_response()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(id, None);
        assert_eq!(
            body["error"]["message"],
            "no method named `nope` is registered"
        );
    }

    #[tokio::test]
    async fn an_unavailable_shows_its_reason_and_never_its_transports_text() {
        let e = ServiceError::unavailable_because(
            "the call could not be sent to worker `w2`; try again",
            "nats: connection reset by peer (os error 104) at 10.0.0.7:4222",
        );
        let (status, id, body) = body_of(ApiError::from(e).into_response()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(id, None);
        assert_eq!(body["error"]["code"], "UNAVAILABLE");
        assert_eq!(
            body["error"]["message"],
            "the call could not be sent to worker `w2`; try again"
        );
    }

    #[test]
    fn request_ids_differ() {
        assert_ne!(new_request_id(), new_request_id());
    }
}

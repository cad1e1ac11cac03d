//! The one error type of the native HTTP API and its mapping to status codes.
//!
//! Every failure is `{"error": {"code": "...", "message": "..."}}` with the canonical code's HTTP
//! status. Internal details are logged, not sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::{Code, ErrorBody, Status};

/// An error answered by the native API.
#[derive(Debug)]
pub struct ApiError {
    status: Status,
    /// Overrides the code's usual HTTP status (413 for a body over its limit).
    http: Option<StatusCode>,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError {
            status: Status::new(code, message),
            http: None,
        }
    }

    /// An error answered with a specific HTTP status instead of the code's usual one.
    pub fn with_http(code: Code, http: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status: Status::new(code, message),
            http: Some(http),
        }
    }

    /// A request body over its limit: RESOURCE_EXHAUSTED with HTTP 413.
    pub fn body_too_large(limit: usize) -> Self {
        ApiError {
            status: Status::new(
                Code::ResourceExhausted,
                format!("the request body is over the limit of {limit} bytes"),
            ),
            http: Some(StatusCode::PAYLOAD_TOO_LARGE),
        }
    }
}

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        ApiError { status, http: None }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let http = self.http.unwrap_or_else(|| {
            StatusCode::from_u16(self.status.code().http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        });
        if http.is_server_error() && self.status.code() != Code::Unavailable {
            tracing::warn!(code = %self.status.code(), message = %self.status.message(), "request failed");
        } else {
            tracing::debug!(code = %self.status.code(), message = %self.status.message(), "request refused");
        }
        (http, Json(ErrorBody::from(self.status))).into_response()
    }
}

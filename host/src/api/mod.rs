//! The HTTP API on axum: routes, request limits, tracing. Uses the service; never wasmtime.

mod body;
pub mod error;
mod health;
mod methods;
mod path;
mod query;
mod tenant;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, Method, Uri};
use axum::routing::{get, post, put};
use tower_http::trace::TraceLayer;
use wasmrpc_proto::Code;

use crate::service::Service;
use error::ApiError;

/// The header a client names itself in (shows in logs).
pub const CLIENT_NAME_HEADER: HeaderName =
    HeaderName::from_static(wasmrpc_proto::headers::CLIENT_NAME);

/// Limits of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest call request body.
    pub max_request_bytes: usize,
    /// Time a client may take to send a request's body.
    pub body_read_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_request_bytes: 64 << 20,
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

/// What every handler gets.
#[derive(Clone)]
pub struct AppState {
    /// The operations.
    pub service: Arc<Service>,
    /// HTTP limits.
    pub limits: HttpLimits,
}

/// The application: every route of the native API with its layers.
pub fn router(state: AppState) -> Router {
    let body_timeout = state.limits.body_read_timeout;
    Router::new()
        .route("/v1/methods", get(methods::list))
        .route(
            "/v1/methods/{name}",
            put(methods::register)
                .get(methods::describe)
                .delete(methods::delete),
        )
        .route("/v1/methods/{name}/call", post(methods::call))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), count_client))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(body_timeout))
        .layer(TraceLayer::new_for_http().on_failure(()).make_span_with(|req: &Request| {
            let client = req
                .headers()
                .get(CLIENT_NAME_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), client)
        }))
        .with_state(state)
}

/// Count requests per client name (the name also shows in the request's tracing span).
async fn count_client(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if let Some(name) = req
        .headers()
        .get(CLIENT_NAME_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        state.service.metrics().record_client(name);
    }
    next.run(req).await
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::with_http(
        Code::Unimplemented,
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not supported on {}", uri.path()),
    )
}

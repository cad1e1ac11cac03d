//! The HTTP API on axum: routes, authentication, request limits, tracing. Uses the service and
//! the tenant directory; never wasmtime.

mod auth;
mod body;
pub mod error;
mod health;
mod methods;
mod path;
mod query;
mod tenants;
#[cfg(test)]
mod tests;
mod v2;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderName, Method, Uri};
use axum::routing::{delete, get, post, put};
use tower_http::trace::TraceLayer;
use wasmrpc_proto::Code;

use crate::service::Service;
use crate::tenancy::Access;
use error::ApiError;

/// The header a client names itself in (shows in logs).
pub const CLIENT_NAME_HEADER: HeaderName =
    HeaderName::from_static(wasmrpc_proto::headers::CLIENT_NAME);

/// Limits of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest call request body.
    pub max_request_bytes: usize,
    /// Time a client may take to send a request's whole body, counted from when the handler
    /// starts reading it (`body::read_limited`).
    pub body_read_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            // Room for a 16 MiB float32 tensor as JSON text as Python writes it (about 20
            // characters a value: some 80 MB); binary tensor data needs a quarter of that.
            max_request_bytes: 128 << 20,
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
    /// Who may do what: the keys, and the quotas.
    pub access: Access,
}

/// The application: every route of the native API with its layers.
pub fn router(state: AppState) -> Router {
    // No tower-http body timeout layer: it only bounds the silence between frames (a byte every
    // few seconds keeps it happy forever). The handlers bound the whole body when they read it.
    // Everything but the health checks needs a key (when keys are configured), checked before
    // the handler runs, so before the body is read.
    let keyed = Router::new()
        .route("/v1/methods", get(methods::list))
        .route(
            "/v1/methods/{name}",
            put(methods::register)
                .get(methods::describe)
                .delete(methods::delete),
        )
        .route("/v1/methods/{name}/call", post(methods::call))
        .route("/v1/tenants", post(tenants::create).get(tenants::list))
        .route(
            "/v1/tenants/{name}",
            get(tenants::show).delete(tenants::delete),
        )
        .route("/v1/tenants/{name}/keys", post(tenants::add_key))
        .route("/v1/tenants/{name}/keys/{key_id}", delete(tenants::revoke))
        .route("/v1/tenants/{name}/quota", put(tenants::set_quota))
        .route("/metrics", get(health::metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .merge(keyed)
        .merge(v2::router(state.clone()))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(v2::protocol_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            count_client,
        ))
        .layer(
            TraceLayer::new_for_http()
                .on_failure(())
                .make_span_with(|req: &Request| {
                    let client = req
                        .headers()
                        .get(CLIENT_NAME_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    tracing::info_span!(
                        "request",
                        method = %req.method(),
                        path = %req.uri().path(),
                        client,
                        tenant = tracing::field::Empty
                    )
                }),
        )
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

/// The router of `--metrics-listen`: `/metrics` alone, open to whoever reaches that address (bind
/// it where only the operator's scraper can).
pub fn metrics_router(service: Arc<Service>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let service = service.clone();
                async move { health::metrics_text(&service) }
            }),
        )
        .fallback(no_route)
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

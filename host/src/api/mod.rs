//! The HTTP API on axum: routes, authentication, request limits, tracing. Uses the service and
//! the tenant directory; never wasmtime, the runtime's configuration or the cluster (the service
//! answers for all three).

pub(crate) mod auth;
pub(crate) mod body;
mod browsers;
mod cluster;
mod console;
pub(crate) mod context;
pub mod error;
mod health;
mod lifecycle;
mod methods;
mod openapi;
mod path;
mod query;
mod routes;
mod tenants;
#[cfg(test)]
mod tests;
pub(crate) mod v2;
pub(crate) mod v2_repository;
pub(crate) mod v2_stats;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Method, Uri};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use wasmrpc_proto::Code;

use crate::service::Service;
use crate::tenancy::Access;
use error::ApiError;
use routes::Routes;
pub use v2_repository::largest_load_body;

pub(crate) use browsers::parse_origin;

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
    /// Web origins (`scheme://host[:port]`, lower case) whose pages may use the API besides the
    /// server's own (`--allow-origin`; `api/browsers.rs`).
    pub allowed_origins: Vec<String>,
    /// Bytes of request bodies and calls' decoded arguments all requests may hold at once
    /// (raised to the largest body a request may have when smaller): `admission/bytes.rs`.
    pub max_bytes_in_flight: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            // Room for two 16 MiB float32 tensors as JSON text as Python writes them (about 19
            // characters a value, printed as doubles: some 160 MB); binary tensor data needs a
            // fifth of that. A server with little memory should lower it.
            max_request_bytes: 256 << 20,
            body_read_timeout: Duration::from_secs(30),
            allowed_origins: Vec::new(),
            // Four bodies of the largest size: bounded, and room for several large calls
            // at once on any server that has the memory for one.
            max_bytes_in_flight: 1 << 30,
        }
    }
}

/// What every handler gets: one shared allocation, so the clone each extractor and layer takes
/// of it is one reference count (its fields are read through `Deref`).
#[derive(Clone)]
pub struct AppState(Arc<AppStateParts>);

impl AppState {
    /// The state of a router over these parts.
    pub fn new(parts: AppStateParts) -> Self {
        AppState(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppStateParts;

    fn deref(&self) -> &AppStateParts {
        &self.0
    }
}

/// The parts of [`AppState`].
pub struct AppStateParts {
    /// The operations.
    pub service: Arc<Service>,
    /// HTTP limits.
    pub limits: HttpLimits,
    /// Who may do what: the keys, and the quotas.
    pub access: Access,
    /// The bytes of call bodies and arguments in flight (`HttpLimits::max_bytes_in_flight`).
    pub bytes_in_flight: crate::admission::BytesBudget,
}

/// The application: every route of the native API, and the gRPC services (`grpc/`) for the
/// requests that speak gRPC, with their layers.
pub fn router(state: AppState) -> Router {
    let router = routes(&state)
        .into_router()
        .merge(crate::grpc::routes(&state));
    with_layers(router, state)
}

/// The router of `--grpc-listen`: the gRPC services alone, with the same layers as the main
/// port's.
pub fn grpc_router(state: AppState) -> Router {
    with_layers(crate::grpc::routes(&state), state)
}

/// `router` with the fallbacks and the layers every request goes through, whatever it speaks.
fn with_layers(router: Router<AppState>, state: AppState) -> Router {
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        // In front of every route and the fallbacks, inside the v2 error shape.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            browsers::guard,
        ))
        .layer(axum::middleware::from_fn(v2::protocol_errors))
        .layer(context::RequestContextLayer::new({
            let service = state.service.clone();
            Arc::new(move |client| service.metrics().record_client(client))
        }))
        .with_state(state)
}

/// Every route of the API with its per-route layers, recorded (`routes.rs`).
fn routes(state: &AppState) -> Routes {
    // No tower-http body timeout layer: it only bounds the silence between frames (a byte every
    // few seconds keeps it happy forever). The handlers bound the whole body when they read it.
    // Everything but the health checks and the API's description needs a key (when keys are
    // configured), checked before the handler runs, so before the body is read.
    let keyed = Routes::new()
        .get("/v1/methods", methods::list)
        .put("/v1/methods/{name}", methods::register)
        .get("/v1/methods/{name}", methods::describe)
        .delete("/v1/methods/{name}", methods::delete)
        .post("/v1/methods/{name}/call", methods::call)
        .post("/v1/tenants", tenants::create)
        .get("/v1/tenants", tenants::list)
        .get("/v1/tenants/{name}", tenants::show)
        .delete("/v1/tenants/{name}", tenants::delete)
        .post("/v1/tenants/{name}/keys", tenants::add_key)
        .delete("/v1/tenants/{name}/keys/{key_id}", tenants::revoke)
        .put("/v1/tenants/{name}/quota", tenants::set_quota)
        .get("/v1/cluster/workers", cluster::workers)
        .post("/v1/cluster/barriers/{name}", cluster::barrier)
        .get("/metrics", health::metrics)
        .map(|router| {
            router.route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                auth::authenticate,
            ))
        });
    Routes::new()
        .merge(keyed)
        .merge(v2::routes(state))
        .get("/healthz", health::healthz)
        .get("/readyz", health::readyz)
        .get("/openapi.json", openapi::document)
        .merge(console::routes())
}

/// The router of `--metrics-listen`: `/metrics` alone, open to whoever reaches that address (bind
/// it where only the operator's scraper can). On a `loopback` address it answers only loopback
/// names, as a keyless server does (`browsers::loopback_names_only`).
pub fn metrics_router(service: Arc<Service>, loopback: bool) -> Router {
    let router = Router::new()
        .route(
            "/metrics",
            get(move || {
                let service = service.clone();
                async move { health::metrics_text(&service) }
            }),
        )
        .fallback(no_route);
    if loopback {
        router.layer(axum::middleware::from_fn(browsers::loopback_names_only))
    } else {
        router
    }
}

async fn no_route(method: Method, uri: Uri, headers: axum::http::HeaderMap) -> Response {
    if crate::grpc::is_grpc(&headers) {
        return crate::grpc::unimplemented(uri.path());
    }
    ApiError::new(
        Code::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
    .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::with_http(
        Code::Unimplemented,
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not supported on {}", uri.path()),
    )
}

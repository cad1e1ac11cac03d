//! Liveness, readiness and metrics endpoints.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::Code;

use super::AppState;
use super::error::ApiError;
use crate::service::Service;
use crate::tenancy::Principal;

/// `GET /healthz`: the process is up and serving HTTP.
pub async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /readyz`: the registry is loaded and every stored component was compiled.
pub async fn readyz(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    if state.service.is_ready() {
        Ok((
            StatusCode::OK,
            Json(serde_json::json!({ "status": "ready" })),
        ))
    } else {
        Err(ApiError::new(
            Code::Unavailable,
            "the registry is still loading",
        ))
    }
}

/// `GET /metrics`: Prometheus text format. Without keys configured, and with the admin key,
/// every series; with a tenant's key, that tenant's own series only (its methods' calls and
/// latencies, its registrations), so a tenant can watch its own methods, and the web console
/// can draw them, without seeing anyone else's.
pub async fn metrics(
    State(state): State<AppState>,
    principal: Option<axum::Extension<Principal>>,
) -> Response {
    match principal.as_deref() {
        Some(Principal::Tenant(tenant)) if state.access.directory().is_some() => {
            text_response(state.service.metrics().render_for_tenant(tenant.as_str()))
        }
        _ => metrics_text(&state.service),
    }
}

/// The metrics as a Prometheus text response.
pub fn metrics_text(service: &Service) -> Response {
    text_response(service.metrics().render())
}

fn text_response(text: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

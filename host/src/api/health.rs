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

/// `GET /metrics`: Prometheus text format. With keys configured it names every tenant's methods,
/// so it takes the admin key (or is served on `--metrics-listen`).
pub async fn metrics(
    State(state): State<AppState>,
    principal: Option<axum::Extension<Principal>>,
) -> Result<Response, ApiError> {
    if state.access.directory().is_some() && !matches!(principal.as_deref(), Some(Principal::Admin))
    {
        return Err(ApiError::new(
            Code::PermissionDenied,
            "/metrics shows every tenant's methods: it takes the admin key (or serve it on its own \
             address with --metrics-listen)",
        ));
    }
    Ok(metrics_text(&state.service))
}

/// The metrics as a Prometheus text response.
pub fn metrics_text(service: &Service) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        service.metrics().render(),
    )
        .into_response()
}

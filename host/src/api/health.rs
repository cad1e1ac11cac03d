//! Liveness, readiness and metrics endpoints.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use wasmrpc_proto::Code;

use super::AppState;
use super::error::ApiError;

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

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.service.metrics().render(),
    )
}

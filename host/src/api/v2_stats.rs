//! Triton's statistics extension on the KServe v2 routes: per model version, the calls that
//! succeeded and failed and their summed durations, from the server's own metrics
//! ([`crate::metrics::Metrics::version_stats`]), counted since the version was registered or the
//! server started. Only what is measured is shown: no queue or compute breakdown.

use axum::Json;
use axum::extract::{Path, State};
use wasmrpc_proto::kserve_repository::{
    InferStatistics, ModelStatistics, ModelStatsResponse, StatisticDuration,
};

use super::AppState;
use super::auth::Tenant;
use super::error::ApiError;
use super::routes::Routes;
use super::v2::ModelPath;
use crate::metrics::VersionStats;
use crate::service::Caller;

/// The statistics routes, behind the key check with the other keyed `/v2` routes.
pub fn routes() -> Routes {
    Routes::new()
        .get("/v2/models/stats", all_models)
        .get("/v2/models/{name}/stats", one_model)
        .get("/v2/models/{name}/versions/{version}/stats", one_model)
}

fn statistics(name: &str, version: u32, stats: Option<&VersionStats>) -> ModelStatistics {
    let stats = stats.copied().unwrap_or_default();
    ModelStatistics {
        name: name.to_owned(),
        version: version.to_string(),
        last_inference: stats.last_call_ms,
        inference_count: stats.success_count,
        execution_count: stats.success_count,
        inference_stats: InferStatistics {
            success: StatisticDuration {
                count: stats.success_count,
                ns: stats.success_ns,
            },
            fail: StatisticDuration {
                count: stats.fail_count,
                ns: stats.fail_ns,
            },
        },
    }
}

/// Every version in `versions` of `name`, with its counts (zero for a version never called).
fn of_versions(
    state: &AppState,
    tenant: &str,
    name: &str,
    versions: &[u32],
) -> Vec<ModelStatistics> {
    let counted = state.service.metrics().version_stats(tenant, name);
    versions
        .iter()
        .map(|&v| statistics(name, v, counted.get(&v)))
        .collect()
}

/// The statistics of every version of every model of the caller (`model` is `None`), or of
/// one model: every version, or the one named (`GET /v2/models[/{name}[/versions/{v}]]/stats`,
/// gRPC's `ModelStatistics`).
///
/// # Errors
/// NOT_FOUND for a model (or version) the caller has not registered.
pub fn model_stats(
    state: &AppState,
    caller: &Caller,
    model: Option<(&str, Option<u32>)>,
) -> Result<Vec<ModelStatistics>, ApiError> {
    let tenant = caller.tenant.as_str();
    let Some((name, version)) = model else {
        return Ok(state
            .service
            .list(&caller.tenant)
            .iter()
            .flat_map(|info| of_versions(state, tenant, &info.name, &info.versions))
            .collect());
    };
    let info = state.service.describe(&caller.tenant, name, version)?;
    let versions = match version {
        Some(v) => vec![v],
        None => info.versions,
    };
    Ok(of_versions(state, tenant, name, &versions))
}

/// `GET /v2/models/stats`: every version of every model of the caller.
async fn all_models(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
) -> Result<Json<ModelStatsResponse>, ApiError> {
    let model_stats = model_stats(&state, &caller, None)?;
    Ok(Json(ModelStatsResponse { model_stats }))
}

/// `GET /v2/models/{name}[/versions/{v}]/stats`: every version of the model, or the one named.
async fn one_model(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    Path(model): Path<ModelPath>,
) -> Result<Json<ModelStatsResponse>, ApiError> {
    let model_stats = model_stats(&state, &caller, Some((&model.name, model.version()?)))?;
    Ok(Json(ModelStatsResponse { model_stats }))
}

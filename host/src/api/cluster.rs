//! The cluster's routes: `GET /v1/cluster/workers` and barriers, answered by the service from the
//! cluster it is in (FAILED_PRECONDITION outside one). Calls placed on a worker (`?worker=`) take
//! the one road of every call (`Service::invoke`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use wasmrpc_proto::Code;
use wasmrpc_proto::cluster::WorkerList;

use super::AppState;
use super::auth::Tenant;
use super::error::ApiError;
use super::path::MethodName;

/// `GET /v1/cluster/workers`: the live workers (FAILED_PRECONDITION outside a cluster).
pub async fn workers(
    State(state): State<AppState>,
    Tenant(_caller): Tenant,
) -> Result<Json<WorkerList>, ApiError> {
    Ok(Json(state.service.workers()?))
}

/// The body of `POST /v1/cluster/barriers/{name}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BarrierRequest {
    /// Who arrives (each member counts once).
    pub member: String,
    /// How many members the barrier waits for.
    pub count: usize,
    /// How long to wait, in milliseconds (0: the server's longest deadline).
    #[serde(default)]
    pub timeout_ms: u64,
}

/// The answer of a passed barrier.
#[derive(Debug, serde::Serialize)]
pub struct BarrierPassed {
    /// The members that arrived.
    pub arrived: Vec<String>,
}

/// `POST /v1/cluster/barriers/{name}`: arrive, and answer once `count` members have (each
/// tenant's barriers are its own). DEADLINE_EXCEEDED when they do not in time.
pub async fn barrier(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    body: axum::body::Bytes,
) -> Result<Json<BarrierPassed>, ApiError> {
    // Outside a cluster, said before the body is looked at.
    state.service.workers()?;
    wasmrpc_proto::names::check_name(&name)
        .map_err(|why| ApiError::new(Code::InvalidArgument, format!("barrier name: {why}")))?;
    let request: BarrierRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            Code::InvalidArgument,
            format!(
                "the body is not a barrier request ({{\"member\": NAME, \"count\": N, \"timeout_ms\": N}}): {e}"
            ),
        )
    })?;
    if request.member.is_empty() || request.member.len() > 256 || request.count == 0 {
        return Err(ApiError::new(
            Code::InvalidArgument,
            "a barrier needs a member name (1 to 256 bytes) and a count of at least 1",
        ));
    }
    let max = state.service.longest_deadline();
    let timeout = if request.timeout_ms == 0 {
        max
    } else {
        Duration::from_millis(request.timeout_ms).min(max)
    };
    let arrive = state
        .service
        .barrier(&caller.tenant, &name, &request.member, request.count);
    match tokio::time::timeout(timeout, arrive).await {
        Ok(Ok(arrived)) => Ok(Json(BarrierPassed { arrived })),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(ApiError::new(
            Code::DeadlineExceeded,
            format!(
                "barrier `{name}`: fewer than {} members arrived within {} ms",
                request.count,
                timeout.as_millis()
            ),
        )),
    }
}

//! The cluster's routes: `GET /v1/cluster/workers`, barriers, and [`run_call`], which runs a
//! call here or, for `?worker=W|any` (on `POST /v1/methods/{name}/call` in `methods.rs` and
//! `POST /v2/models/{name}/infer` in `v2.rs`), on a worker of the cluster.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use wasmrpc_proto::Code;

use super::AppState;
use super::auth::Tenant;
use super::error::ApiError;
use super::path::MethodName;
use crate::cluster::WorkerInfo;
use crate::cluster::calls::Target;
use crate::service::{Caller, Resolved};
use wasmrpc_proto::Tensor;

/// Run a resolved call of `name` (`version` as asked) here, or on the cluster's worker `worker`
/// names (`any`: any live one), with the deadline a call here would get.
///
/// # Errors
/// FAILED_PRECONDITION for a `worker` outside a cluster; the call's own error otherwise.
#[allow(clippy::too_many_arguments)]
pub async fn run_call(
    state: &AppState,
    caller: &Caller,
    method: &Resolved,
    name: &str,
    version: Option<u32>,
    worker: Option<&str>,
    args: Vec<Tensor>,
    timeout: Duration,
) -> Result<Vec<Tensor>, ApiError> {
    let Some(worker) = worker else {
        return Ok(state.service.invoke(caller, method, args, timeout).await?);
    };
    let cluster = state.cluster.as_ref().ok_or_else(not_in_a_cluster)?;
    // The same deadline as a call here would get, carried to the worker that runs it.
    let deadline = state
        .service
        .runtime()
        .config()
        .deadline_for(timeout)
        .min(Duration::from_millis(caller.quota.max_deadline_ms));
    // Boxed: the cluster's call future is large, and inline it would make every local call's
    // future as large, copied at each move.
    Ok(Box::pin(cluster.calls().call(
        &state.service,
        caller,
        &Target::parse(worker),
        name,
        version,
        args,
        deadline,
    ))
    .await?)
}

/// The body of `GET /v1/cluster/workers`.
#[derive(Debug, serde::Serialize)]
pub struct WorkerList {
    /// Every live worker, by rank then name.
    pub workers: Vec<WorkerInfo>,
    /// The worker that answered.
    pub this: String,
    /// Calls it is running for other workers now.
    pub serving: usize,
}

/// `GET /v1/cluster/workers`: the live workers (FAILED_PRECONDITION outside a cluster).
pub async fn workers(
    State(state): State<AppState>,
    Tenant(_caller): Tenant,
) -> Result<Json<WorkerList>, ApiError> {
    let cluster = state.cluster.as_ref().ok_or_else(not_in_a_cluster)?;
    Ok(Json(WorkerList {
        workers: cluster.workers(),
        this: cluster.me().name.clone(),
        serving: cluster.calls().serving_now(),
    }))
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
    let cluster = state.cluster.as_ref().ok_or_else(not_in_a_cluster)?;
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
    let max = state.service.runtime().config().max_deadline;
    let timeout = if request.timeout_ms == 0 {
        max
    } else {
        Duration::from_millis(request.timeout_ms).min(max)
    };
    let arrive = cluster.barrier(&caller.tenant, &name, &request.member, request.count);
    match tokio::time::timeout(timeout, arrive).await {
        Ok(Ok(arrived)) => Ok(Json(BarrierPassed { arrived })),
        Ok(Err(e)) => Err(ApiError::new(Code::Unavailable, e.to_string())),
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

/// The error of a cluster route or parameter on a server that is not in a cluster.
pub fn not_in_a_cluster() -> ApiError {
    ApiError::new(
        Code::FailedPrecondition,
        "this server is not in a cluster: start it with --cluster nats://HOST:PORT --name NAME",
    )
}

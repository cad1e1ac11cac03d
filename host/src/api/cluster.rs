//! The cluster's routes: `GET /v1/cluster/workers`. (Calls to another worker are
//! `POST /v1/methods/{name}/call?worker=W|any`, in `methods.rs`.)

use axum::Json;
use axum::extract::State;
use wasmrpc_proto::Code;

use super::AppState;
use super::auth::Tenant;
use super::error::ApiError;
use crate::cluster::WorkerInfo;

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

/// The error of a cluster route or parameter on a server that is not in a cluster.
pub fn not_in_a_cluster() -> ApiError {
    ApiError::new(
        Code::FailedPrecondition,
        "this server is not in a cluster: start it with --cluster nats://HOST:PORT --name NAME",
    )
}

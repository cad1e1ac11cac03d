//! The KServe v2 model repository extension over the registry: every registered method is a
//! model, so the registry is the repository. `index` lists the caller's models, `load` with a
//! component registers it (exactly as `PUT /v1/methods/{name}` does: same service call, quotas,
//! limits and audit log), `unload` unregisters every version (as `DELETE /v1/methods/{name}`).
//!
//! Errors go through v2's `protocol_errors` layer (`{"error": "..."}`), like every `/v2` route.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use wasmrpc_proto::Code;
use wasmrpc_proto::kserve_repository::{
    self, FILE_ENCODING, LoadRequest, RepositoryIndexEntry, RepositoryRequestError,
};

use super::AppState;
use super::auth::Tenant;
use super::body::{read_budgeted, read_limited};
use super::error::ApiError;
use super::lifecycle;
use super::path::MethodName;
use super::routes::Routes;
use crate::service::{Caller, ComponentLimit, ServiceError};

/// Largest body of an index or unload request: a flag or two.
pub const MAX_CONTROL_BODY: usize = 64 << 10;

/// Room in a load request beside the base64 component: the JSON around it and the `config`
/// parameter (a model configuration is a few KiB at most).
pub const LOAD_BODY_SLACK: usize = 64 << 10;

/// The repository routes, behind the key check with the other keyed `/v2` routes.
pub fn routes() -> Routes {
    Routes::new()
        .post("/v2/repository/index", index)
        .post("/v2/repository/models/{name}/load", load)
        .post("/v2/repository/models/{name}/unload", unload)
}

impl From<RepositoryRequestError> for ApiError {
    fn from(e: RepositoryRequestError) -> Self {
        ApiError::new(Code::InvalidArgument, e.to_string())
    }
}

/// The largest load request body a server whose components are at most `max_component_bytes`
/// accepts: the budget of bytes in flight is never smaller.
pub fn largest_load_body(max_component_bytes: usize) -> usize {
    base64_len(max_component_bytes).saturating_add(LOAD_BODY_SLACK)
}

/// The length of `n` bytes in padded base64.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3).saturating_mul(4)
}

/// `POST /v2/repository/index`: one entry per model of the caller (its newest version), all
/// `READY`: everything registered can be called. `{"ready": true}` therefore lists the same.
async fn index(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Vec<RepositoryIndexEntry>>, ApiError> {
    let bytes = read_limited(
        &headers,
        body,
        MAX_CONTROL_BODY,
        state.limits.body_read_timeout,
    )
    .await?;
    kserve_repository::decode_index_request(&bytes)?;
    Ok(Json(index_entries(&state, &caller)))
}

/// The repository index of `caller`: one entry per model (its newest version), all `READY`.
pub fn index_entries(state: &AppState, caller: &Caller) -> Vec<RepositoryIndexEntry> {
    state
        .service
        .list(&caller.tenant)
        .into_iter()
        .map(|info| RepositoryIndexEntry {
            name: info.name,
            version: info.version.to_string(),
            state: "READY".into(),
            reason: String::new(),
        })
        .collect()
}

/// `POST /v2/repository/models/{name}/load`: with a component in a `file:` parameter, register
/// it under `name` (a new version when the name exists); without one, 200 when the model exists
/// (everything registered is loaded), 404 otherwise.
async fn load(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    // The component's limit is the tenant's quota within the server's own, as on v1; the body
    // may be that much base64 and the JSON around it, and is refused before being read past it.
    let limit = state.service.component_limit(&caller.quota);
    let body_limit = largest_load_body(limit.bytes);
    // Held in the budget of bytes in flight until the component is registered.
    let (bytes, _held) = read_budgeted(&state, &caller.tenant, &headers, body, body_limit)
        .await
        .map_err(|e| {
            e.with_message_if_too_large(format!(
                "{}: the load request may be {body_limit} bytes, the component base64-encoded \
                 and {LOAD_BODY_SLACK} bytes besides",
                limit.refusal()
            ))
        })?;
    let request = kserve_repository::decode_load_request(&bytes)?;
    drop(bytes);
    let hint = format!(
        "send its component in a `file:` parameter ({FILE_ENCODING}), as tritonclient's \
         load_model(name, files={{\"file:1/model.wasm\": component}}) does"
    );
    load_model(&state, &caller, &name, request, &limit, &hint).await?;
    Ok(StatusCode::OK)
}

/// Load model `name` for `caller` (HTTP's and gRPC's alike): with a component, register it (a
/// new version when the name exists), exactly as `PUT /v1/methods/{name}` does; without one,
/// succeed when the model exists (everything registered is loaded). `hint` says how this
/// transport sends a component, for the refusal of a load of a model that does not exist.
///
/// # Errors
/// NOT_FOUND for a load without a component of a model that does not exist; RESOURCE_EXHAUSTED
/// for a component over `limit`; every refusal of the registration.
pub async fn load_model(
    state: &AppState,
    caller: &Caller,
    name: &str,
    request: LoadRequest,
    limit: &ComponentLimit,
    hint: &str,
) -> Result<(), ApiError> {
    let LoadRequest { file, export } = request;
    let Some(file) = file else {
        if export.is_some() {
            return Err(ApiError::new(
                Code::InvalidArgument,
                "the config's export chooses a method of a component sent with it: send the \
                 component in a `file:` parameter too",
            ));
        }
        return match state.service.resolve(&caller.tenant, name, None) {
            Ok(_) => Ok(()),
            Err(ServiceError::NotFound(_)) => Err(ApiError::new(
                Code::NotFound,
                format!("no model named `{name}` is registered; to load one, {hint}"),
            )),
            Err(e) => Err(e.into()),
        };
    };
    if file.bytes.len() > limit.bytes {
        return Err(ApiError::with_http(
            Code::ResourceExhausted,
            StatusCode::PAYLOAD_TOO_LARGE,
            limit.refusal(),
        ));
    }
    state
        .service
        .register(caller, name, export.as_deref(), file.bytes)
        .await
        .map_err(|e| match e {
            ServiceError::ExportNeeded(exports) => ApiError::new(
                Code::InvalidArgument,
                format!(
                    "the component exports several methods ({}); choose one in the config \
                     parameter: {{\"parameters\": {{\"export\": {{\"string_value\": \"NAME\"}}}}}}",
                    exports.join(", ")
                ),
            ),
            other => other.into(),
        })?;
    lifecycle::undo_if_tenant_deleted(state, caller).await?;
    Ok(())
}

/// Unload (unregister every version of) `caller`'s model `name`.
///
/// # Errors
/// NOT_FOUND when there is no such model; a store failure.
pub async fn unload_model(state: &AppState, caller: &Caller, name: &str) -> Result<(), ApiError> {
    state.service.delete(&caller.tenant, name, None).await?;
    Ok(())
}

/// `POST /v2/repository/models/{name}/unload`: unregister every version, as
/// `DELETE /v1/methods/{name}` does (there is no repository apart from the registry to load it
/// from again: a later load needs the component).
async fn unload(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let bytes = read_limited(
        &headers,
        body,
        MAX_CONTROL_BODY,
        state.limits.body_read_timeout,
    )
    .await?;
    kserve_repository::decode_unload_request(&bytes)?;
    unload_model(&state, &caller, &name).await?;
    Ok(StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_body_admits_the_largest_component_in_base64() {
        assert_eq!(base64_len(0), 0);
        assert_eq!(base64_len(1), 4);
        assert_eq!(base64_len(3), 4);
        assert_eq!(base64_len(4), 8);
        assert_eq!(base64_len(32 << 20), 44_739_244);
    }
}

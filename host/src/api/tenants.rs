//! The admin API: `/v1/tenants` (create, list, show, delete), keys (add, revoke) and quotas.
//!
//! Every route takes the admin key. A tenant's key is shown once, in the answer that creates it;
//! listings show key ids only. Every action is written to the audit log (target `audit`).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use wasmrpc_proto::Code;

use super::AppState;
use super::auth::Admin;
use super::body::read_limited;
use super::error::ApiError;
use super::lifecycle;
use crate::registry::Usage;
use crate::tenancy::directory::{DirectoryError, KeyInfo, TenantInfo};
use crate::tenancy::{Quota, QuotaPatch, TenantDirectory, TenantId};

/// Largest admin request body: a name or a few quota settings.
const MAX_ADMIN_BODY: usize = 64 << 10;

impl From<DirectoryError> for ApiError {
    fn from(e: DirectoryError) -> Self {
        let code = match &e {
            DirectoryError::NoSuchTenant(_) | DirectoryError::NoSuchKey { .. } => Code::NotFound,
            DirectoryError::Exists(_) => Code::AlreadyExists,
            DirectoryError::TooManyKeys(_) => Code::FailedPrecondition,
            DirectoryError::Invalid(_) => Code::InvalidArgument,
            DirectoryError::Shared(_) => Code::Aborted,
            DirectoryError::Io(_) => return ApiError::internal(e),
        };
        ApiError::new(code, e.to_string())
    }
}

async fn read_json<T: DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ApiError> {
    let bytes = read_limited(
        headers,
        body,
        MAX_ADMIN_BODY,
        state.limits.body_read_timeout,
    )
    .await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(Code::InvalidArgument, format!("bad request body: {e}")))
}

/// A tenant as the admin API shows it.
#[derive(Debug, serde::Serialize)]
pub struct TenantView {
    name: String,
    created_ms: u64,
    keys: Vec<KeyInfo>,
    /// The quota in force.
    quota: Quota,
    /// What the admin set; the rest of `quota` is the server's defaults.
    quota_overrides: QuotaPatch,
    usage: Usage,
}

fn view(state: &AppState, info: TenantInfo) -> TenantView {
    let usage = state.service.usage(&TenantId::new(info.name.as_str()));
    TenantView {
        name: info.name,
        created_ms: info.created_ms,
        keys: info.keys,
        quota: info.quota,
        quota_overrides: info.quota_overrides,
        usage,
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    name: String,
}

/// `POST /v1/tenants` `{"name": "team-a"}`: 201 `{"name", "key", "key_id", "quota"}`.
pub async fn create(
    State(state): State<AppState>,
    Admin(directory): Admin,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let CreateTenant { name } = read_json(&state, &headers, body).await?;
    TenantDirectory::check_new_name(&name)?;
    if directory.show(&name).is_err() {
        lifecycle::purge_leftovers(&state, &name).await?;
    }
    let issued = directory.create(&name)?;
    tracing::info!(target: "audit", actor = "admin", action = "tenant.create", tenant = %name, key_id = %issued.key_id, "admin action");
    let answer = serde_json::json!({
        "name": issued.tenant.name,
        "key": issued.key,
        "key_id": issued.key_id,
        "quota": issued.tenant.quota,
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `GET /v1/tenants`: every tenant, with key ids, quotas and usage (never keys).
pub async fn list(
    State(state): State<AppState>,
    Admin(directory): Admin,
) -> Json<serde_json::Value> {
    let tenants: Vec<TenantView> = directory
        .list()
        .into_iter()
        .map(|t| view(&state, t))
        .collect();
    Json(serde_json::json!({ "tenants": tenants }))
}

/// `GET /v1/tenants/{name}`.
pub async fn show(
    State(state): State<AppState>,
    Admin(directory): Admin,
    Path(name): Path<String>,
) -> Result<Json<TenantView>, ApiError> {
    Ok(Json(view(&state, directory.show(&name)?)))
}

/// `POST /v1/tenants/{name}/keys`: a further key, for rotation: 201 `{"name", "key", "key_id"}`.
pub async fn add_key(
    Admin(directory): Admin,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let issued = directory.add_key(&name)?;
    tracing::info!(target: "audit", actor = "admin", action = "tenant.key.add", tenant = %name, key_id = %issued.key_id, "admin action");
    let answer = serde_json::json!({
        "name": issued.tenant.name,
        "key": issued.key,
        "key_id": issued.key_id,
    });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `DELETE /v1/tenants/{name}/keys/{key_id}`: revoke one key, at once.
pub async fn revoke(
    State(state): State<AppState>,
    Admin(directory): Admin,
    Path((name, key_id)): Path<(String, String)>,
) -> Result<Json<TenantView>, ApiError> {
    let info = directory.revoke(&name, &key_id)?;
    tracing::info!(target: "audit", actor = "admin", action = "tenant.key.revoke", tenant = %name, key_id = %key_id, "admin action");
    Ok(Json(view(&state, info)))
}

/// `PUT /v1/tenants/{name}/quota` with some of the quota's fields: change those, live.
pub async fn set_quota(
    State(state): State<AppState>,
    Admin(directory): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<TenantView>, ApiError> {
    let patch: QuotaPatch = read_json(&state, &headers, body).await?;
    let info = directory.set_quota(&name, &patch)?;
    let settings = serde_json::to_string(&patch).unwrap_or_default();
    tracing::info!(target: "audit", actor = "admin", action = "tenant.quota", tenant = %name, settings = %settings, "admin action");
    Ok(Json(view(&state, info)))
}

/// `DELETE /v1/tenants/{name}`: the tenant, its keys and every registration of it.
pub async fn delete(
    State(state): State<AppState>,
    Admin(directory): Admin,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let tenant = TenantId::new(name.as_str());
    // The keys go first: from here no request of the tenant is accepted, so none can register
    // after the removal below has passed it (an upload already running is undone when it ends,
    // by `lifecycle::undo_if_tenant_deleted`).
    match directory.delete(&name) {
        Ok(()) => {}
        // A tenant deleted before, whose methods could not all be removed then: finishing that
        // is what this delete is for.
        Err(DirectoryError::NoSuchTenant(_)) if !state.service.list(&tenant).is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    let deleted = state.service.delete_all(&tenant).await.map_err(|e| {
        tracing::warn!(%tenant, error = %e, "deleting a tenant's methods failed");
        ApiError::new(
            Code::Unavailable,
            format!(
                "tenant `{name}` is deleted and its keys no longer work, but not all of its \
                 methods could be removed; send the DELETE again to finish"
            ),
        )
    })?;
    tracing::info!(target: "audit", actor = "admin", action = "tenant.delete", tenant = %name, deleted_methods = deleted, "admin action");
    Ok(Json(
        serde_json::json!({ "name": name, "deleted_methods": deleted }),
    ))
}

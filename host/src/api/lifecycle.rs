//! A tenant's life as its uploads see it: an upload that ends after its tenant was deleted
//! leaves nothing behind, and a name deleted and created again starts empty.
//!
//! Deleting a tenant revokes its keys first and removes its registrations after, so no request
//! can begin an upload once the removal has started. An upload that began before (its key
//! checked, its component compiling) may still commit after the removal passed it:
//! [`undo_if_tenant_deleted`] runs after every registration and takes back what such an upload
//! left. [`purge_leftovers`] runs before a tenant is created, so a name that comes back never
//! inherits what an earlier tenant of that name left behind (a delete whose removal failed
//! halfway, say).

use wasmrpc_proto::Code;

use super::AppState;
use super::error::ApiError;
use crate::service::Caller;
use crate::tenancy::{AuthError, TenantId};

/// After a registration: when the caller's tenant was deleted while it ran, remove everything of
/// the tenant again and answer as its key now would (401).
///
/// # Errors
/// UNAUTHENTICATED when the tenant is gone.
pub(super) async fn undo_if_tenant_deleted(
    state: &AppState,
    caller: &Caller,
) -> Result<(), ApiError> {
    let Some(directory) = state.access.directory() else {
        return Ok(());
    };
    if directory.show(caller.tenant.as_str()).is_ok() {
        return Ok(());
    }
    match state.service.delete_all(&caller.tenant).await {
        Ok(removed) => tracing::info!(
            target: "audit",
            tenant = %caller.tenant,
            removed,
            "an upload ended after its tenant was deleted; what it registered is removed"
        ),
        // The next delete or create of the name removes it (`purge_leftovers`).
        Err(e) => tracing::warn!(
            tenant = %caller.tenant,
            error = %e,
            "an upload ended after its tenant was deleted, and removing what it registered failed"
        ),
    }
    Err(ApiError::unauthenticated(&AuthError::Refused))
}

/// Before a tenant named `name` is created: remove whatever registrations an earlier tenant of
/// that name left. Returns how many method names were removed.
///
/// # Errors
/// UNAVAILABLE when they could not all be removed (the tenant is not created then).
pub(super) async fn purge_leftovers(state: &AppState, name: &str) -> Result<usize, ApiError> {
    let tenant = TenantId::new(name);
    let removed = state.service.delete_all(&tenant).await.map_err(|e| {
        tracing::warn!(tenant = %tenant, error = %e, "removing leftovers failed");
        ApiError::new(
            Code::Unavailable,
            format!(
                "methods left by an earlier tenant named `{name}` could not all be removed, so \
                 the tenant was not created; try again"
            ),
        )
    })?;
    if removed > 0 {
        tracing::info!(target: "audit", tenant = %tenant, removed, "leftovers of an earlier tenant of this name removed");
    }
    Ok(removed)
}

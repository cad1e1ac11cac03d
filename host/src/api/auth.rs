//! Who a request acts for: the key in `Authorization: Bearer <key>`, checked before anything else
//! (before the body is read or anything compiled), and the extractors handlers use.
//!
//! The tenant comes from the key alone, never from a header, host name, path, query or body.
//! Without authentication configured, every request is the implicit tenant.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::Code;

use super::AppState;
use super::error::ApiError;
use crate::service::Caller;
use crate::tenancy::{Principal, TenantDirectory};

/// The middleware on every route but the health checks: refuse a request whose credentials do
/// not hold, or remember who sent it.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    match principal_of(&state, req.headers()) {
        Ok(principal) => {
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Who the credentials in `headers` (`Authorization: Bearer <key>`, the same header over HTTP
/// and as gRPC metadata) speak for, noted for the request's log lines.
///
/// # Errors
/// UNAUTHENTICATED (with `WWW-Authenticate: Bearer`) for missing, malformed or unknown
/// credentials.
pub fn principal_of(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<Principal, ApiError> {
    let principal = state
        .access
        .authenticate(headers.get(AUTHORIZATION).map(|v| v.as_bytes()))
        .map_err(|e| ApiError::unauthenticated(&e))?;
    if let Principal::Tenant(tenant) = &principal {
        super::context::record_tenant(tenant.as_str());
    }
    Ok(principal)
}

/// The tenant `principal` acts for, with its quota: methods and calls need a tenant.
///
/// # Errors
/// PERMISSION_DENIED for the admin key.
pub fn caller_of(state: &AppState, principal: &Principal) -> Result<Caller, ApiError> {
    match principal {
        Principal::Tenant(tenant) => Ok(Caller {
            quota: state.access.quota(tenant),
            tenant: tenant.clone(),
        }),
        Principal::Admin => Err(ApiError::new(
            Code::PermissionDenied,
            "the admin key manages tenants; methods and calls need a tenant's key",
        )),
    }
}

fn principal(parts: &Parts) -> Result<&Principal, ApiError> {
    parts.extensions.get::<Principal>().ok_or_else(|| {
        // Every route that takes these extractors sits behind `authenticate`.
        ApiError::new(Code::Internal, "the request was not authenticated")
    })
}

/// The tenant a request acts for, with its quota.
#[derive(Debug, Clone)]
pub struct Tenant(pub Caller);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        caller_of(state, principal(parts)?).map(Tenant)
    }
}

/// A request of the admin, on a server with tenants.
#[derive(Debug)]
pub struct Admin(pub std::sync::Arc<TenantDirectory>);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Some(directory) = state.access.directory() else {
            return Err(ApiError::new(
                Code::FailedPrecondition,
                "this server runs without authentication, as one implicit tenant; start it with \
                 --admin-key-file FILE to manage tenants",
            ));
        };
        match principal(parts)? {
            Principal::Admin => Ok(Admin(directory.clone())),
            Principal::Tenant(_) => Err(ApiError::new(
                Code::PermissionDenied,
                "only the admin key may manage tenants",
            )),
        }
    }
}

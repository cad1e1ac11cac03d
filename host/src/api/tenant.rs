//! Which tenant a request acts for.
//!
//! Until tenants and keys are configured (a later milestone), the server binds to loopback and
//! every request is the one implicit tenant; the extractor is the single place that will change.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::tenant::TenantId;

/// The tenant of the request.
#[derive(Debug, Clone)]
pub struct Tenant(pub TenantId);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(_parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Tenant(TenantId::default_tenant()))
    }
}

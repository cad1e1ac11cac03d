//! Tenants: who a request acts for ([`TenantId`]), their API keys ([`keys`]), their quotas
//! ([`quota`]) and the directory that holds them ([`directory`]).
//!
//! The tenant comes from the key alone. Without authentication configured (a loopback server with
//! no `--admin-key-file`) every request is the one implicit tenant, `default`.

pub mod admin_key;
pub mod directory;
mod id;
pub mod keys;
pub mod quota;
pub mod rate;
pub mod slots;

pub use directory::{AuthError, Principal, TenantDirectory};
pub use id::TenantId;
pub use quota::{Quota, QuotaPatch};
pub use rate::RateLimiter;

use std::sync::Arc;

/// How requests are authenticated, and the quotas that apply to them.
#[derive(Debug, Clone)]
pub struct Access {
    /// `None`: no authentication; every request is the implicit tenant.
    directory: Option<Arc<TenantDirectory>>,
    /// The quota of a tenant that has no settings of its own (and of the implicit tenant).
    defaults: Quota,
}

impl Access {
    /// No authentication: every request is the implicit tenant, with `defaults` as its quota.
    pub fn open(defaults: Quota) -> Self {
        Access {
            directory: None,
            defaults,
        }
    }

    /// Keys required, checked against `directory`.
    pub fn with_keys(directory: Arc<TenantDirectory>, defaults: Quota) -> Self {
        Access {
            directory: Some(directory),
            defaults,
        }
    }

    /// The tenant directory, when authentication is on.
    pub fn directory(&self) -> Option<&Arc<TenantDirectory>> {
        self.directory.as_ref()
    }

    /// Who the `Authorization` header's value belongs to.
    ///
    /// # Errors
    /// A missing, malformed, unknown or revoked key (only when authentication is on).
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, AuthError> {
        match &self.directory {
            None => Ok(Principal::Tenant(TenantId::default_tenant())),
            Some(d) => d.authenticate(authorization),
        }
    }

    /// The quota in force for `tenant`.
    pub fn quota(&self, tenant: &TenantId) -> Quota {
        match &self.directory {
            None => self.defaults,
            Some(d) => d.quota(tenant),
        }
    }
}

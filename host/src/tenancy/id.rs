//! Who a request acts for. Every method, version, blob reference, metric label and log line is
//! scoped to a [`TenantId`]; it is a type of its own so that a tenant is never confused with a
//! method name or any other string.

use std::fmt;
use std::sync::Arc;

/// The name of the one implicit tenant a server without authentication serves.
pub const DEFAULT_TENANT: &str = "default";

/// A tenant's id. Cheap to clone (shared), compared and ordered by its text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(Arc<str>);

impl TenantId {
    /// A tenant id from its name.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        TenantId(name.into())
    }

    /// The implicit tenant of a server without authentication ([`DEFAULT_TENANT`]).
    pub fn default_tenant() -> Self {
        // Shared, so a request of the implicit tenant allocates nothing for it.
        static DEFAULT: std::sync::LazyLock<TenantId> =
            std::sync::LazyLock::new(|| TenantId::new(DEFAULT_TENANT));
        DEFAULT.clone()
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_their_text_and_the_default_is_shared() {
        let a = TenantId::new("team-a");
        assert_eq!(a.as_str(), "team-a");
        assert_eq!(format!("{a} {a:?}"), r#"team-a "team-a""#);
        assert_eq!(TenantId::default_tenant().to_string(), DEFAULT_TENANT);
        assert!(Arc::ptr_eq(
            &TenantId::default_tenant().0,
            &TenantId::default_tenant().0
        ));
    }
}

//! The registry's in-memory cache of every registration, so lookups never touch disk.
//!
//! The store that owns it loads it when it opens and changes it under the same lock as its own
//! writes, so the two never disagree; a cluster store will feed it from a watch of its bucket.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{Digest, Lookup, Registration};
use crate::tenant::TenantId;

/// Registrations by tenant, then name, then version.
#[derive(Debug, Default)]
pub struct RegistrationIndex {
    tenants: HashMap<TenantId, BTreeMap<String, BTreeMap<u32, Arc<Registration>>>>,
    /// How many registrations (any tenant) point at each blob.
    digests: HashMap<Digest, usize>,
}

impl RegistrationIndex {
    /// An index of `all`.
    pub fn from_registrations(all: impl IntoIterator<Item = Arc<Registration>>) -> Self {
        let mut index = RegistrationIndex::default();
        for r in all {
            index.insert(r);
        }
        index
    }

    /// Add (or replace) one version.
    pub fn insert(&mut self, r: Arc<Registration>) {
        let replaced = self
            .tenants
            .entry(r.tenant.clone())
            .or_default()
            .entry(r.name.clone())
            .or_default()
            .insert(r.version, r.clone());
        if let Some(old) = replaced {
            self.release(&old.digest);
        }
        *self.digests.entry(r.digest).or_default() += 1;
    }

    /// Forget every version of a name.
    pub fn remove(&mut self, tenant: &TenantId, name: &str) {
        let removed = self
            .tenants
            .get_mut(tenant)
            .and_then(|names| names.remove(name));
        for r in removed.into_iter().flat_map(BTreeMap::into_values) {
            self.release(&r.digest);
        }
        if self.tenants.get(tenant).is_some_and(BTreeMap::is_empty) {
            self.tenants.remove(tenant);
        }
    }

    fn release(&mut self, digest: &Digest) {
        if let Some(n) = self.digests.get_mut(digest) {
            *n -= 1;
            if *n == 0 {
                self.digests.remove(digest);
            }
        }
    }

    fn versions_map(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Option<&BTreeMap<u32, Arc<Registration>>> {
        self.tenants.get(tenant)?.get(name)
    }

    /// One version (`None`: the newest).
    pub fn get(&self, tenant: &TenantId, name: &str, version: Option<u32>) -> Lookup {
        let Some(versions) = self.versions_map(tenant, name).filter(|v| !v.is_empty()) else {
            return Lookup::NoSuchName;
        };
        let found = match version {
            Some(v) => versions.get(&v),
            None => versions.values().next_back(),
        };
        found.map_or(Lookup::NoSuchVersion, |r| Lookup::Found(r.clone()))
    }

    /// The version numbers of a name, oldest first.
    pub fn version_numbers(&self, tenant: &TenantId, name: &str) -> Vec<u32> {
        self.versions_map(tenant, name)
            .map(|v| v.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Every name of a tenant with its versions (oldest first), sorted by name.
    pub fn list(&self, tenant: &TenantId) -> Vec<Vec<Arc<Registration>>> {
        self.tenants
            .get(tenant)
            .map(|names| {
                names
                    .values()
                    .filter(|v| !v.is_empty())
                    .map(|v| v.values().cloned().collect())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every registration of every tenant.
    pub fn all(&self) -> Vec<Arc<Registration>> {
        self.tenants
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(BTreeMap::values)
            .cloned()
            .collect()
    }

    /// Whether any registration of any tenant points at `digest`.
    pub fn uses(&self, digest: &Digest) -> bool {
        self.digests.contains_key(digest)
    }
}

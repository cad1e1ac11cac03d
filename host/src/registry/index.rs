//! The registry's in-memory cache of every registration, so lookups never touch disk.
//!
//! The store that owns it loads it when it opens and changes it under the same lock as its own
//! writes, so the two never disagree; a cluster store will feed it from a watch of its bucket.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{Digest, Lookup, Registration, RegistrationLimits, Usage};
use crate::tenancy::TenantId;

/// Registrations by tenant, then name, then version.
#[derive(Debug, Default)]
pub struct RegistrationIndex {
    tenants: HashMap<TenantId, BTreeMap<String, BTreeMap<u32, Arc<Registration>>>>,
    /// How many registrations (any tenant) point at each blob.
    digests: HashMap<Digest, usize>,
    /// How many registrations of each tenant point at each blob.
    tenant_digests: HashMap<(TenantId, Digest), usize>,
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
            self.release(&old.tenant, &old.digest);
        }
        *self.digests.entry(r.digest).or_default() += 1;
        *self
            .tenant_digests
            .entry((r.tenant.clone(), r.digest))
            .or_default() += 1;
    }

    /// Forget every version of a name.
    pub fn remove(&mut self, tenant: &TenantId, name: &str) {
        let removed = self
            .tenants
            .get_mut(tenant)
            .and_then(|names| names.remove(name));
        for r in removed.into_iter().flat_map(BTreeMap::into_values) {
            self.release(&r.tenant, &r.digest);
        }
        if self.tenants.get(tenant).is_some_and(BTreeMap::is_empty) {
            self.tenants.remove(tenant);
        }
    }

    /// Forget one version of a name (a cluster store removes them one key at a time).
    pub fn remove_version(&mut self, tenant: &TenantId, name: &str, version: u32) {
        let Some(names) = self.tenants.get_mut(tenant) else {
            return;
        };
        let removed = names.get_mut(name).and_then(|v| v.remove(&version));
        if names.get(name).is_some_and(BTreeMap::is_empty) {
            names.remove(name);
        }
        if names.is_empty() {
            self.tenants.remove(tenant);
        }
        if let Some(r) = removed {
            self.release(&r.tenant, &r.digest);
        }
    }

    fn release(&mut self, tenant: &TenantId, digest: &Digest) {
        if let Some(n) = self.digests.get_mut(digest) {
            *n -= 1;
            if *n == 0 {
                self.digests.remove(digest);
            }
        }
        let key = (tenant.clone(), *digest);
        if let Some(n) = self.tenant_digests.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.tenant_digests.remove(&key);
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

    /// Whether a registration of `tenant` points at `digest`.
    pub fn tenant_uses(&self, tenant: &TenantId, digest: &Digest) -> bool {
        self.tenant_digests.contains_key(&(tenant.clone(), *digest))
    }

    /// What `tenant` holds: its names, and the bytes of its distinct components.
    pub fn usage(&self, tenant: &TenantId) -> Usage {
        let Some(names) = self.tenants.get(tenant) else {
            return Usage::default();
        };
        let mut sizes: HashMap<Digest, u64> = HashMap::new();
        for r in names.values().flat_map(BTreeMap::values) {
            sizes.insert(r.digest, r.size);
        }
        Usage {
            methods: names.values().filter(|v| !v.is_empty()).count() as u64,
            stored_bytes: sizes.values().sum(),
        }
    }

    /// Why one more registration of `name` pointing at `digest` (of `size` bytes) would not fit
    /// `limits`, or `None` if it fits.
    pub fn over_quota(
        &self,
        tenant: &TenantId,
        name: &str,
        digest: &Digest,
        size: u64,
        limits: &RegistrationLimits,
    ) -> Option<String> {
        if limits.max_methods == 0 && limits.max_stored_bytes == 0 {
            // No limits: skip counting what the tenant holds (a walk over all of it).
            return None;
        }
        let names = self.tenants.get(tenant);
        let usage = self.usage(tenant);
        let new_name = names
            .and_then(|n| n.get(name))
            .is_none_or(BTreeMap::is_empty);
        if limits.max_methods > 0 && new_name && usage.methods >= limits.max_methods {
            return Some(format!(
                "quota max_methods ({}) reached: delete a method before registering another",
                limits.max_methods
            ));
        }
        let new_bytes = names
            .into_iter()
            .flat_map(BTreeMap::values)
            .flat_map(BTreeMap::values)
            .all(|r| r.digest != *digest);
        let after = usage.stored_bytes + if new_bytes { size } else { 0 };
        if limits.max_stored_bytes > 0 && after > limits.max_stored_bytes {
            return Some(format!(
                "quota max_stored_bytes ({}) would be exceeded: {} bytes are stored and this component is {size} bytes",
                limits.max_stored_bytes, usage.stored_bytes
            ));
        }
        None
    }
}

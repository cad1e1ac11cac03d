//! An in-memory copy of every registration, so a call finds its method without touching disk.
//!
//! The service loads it from the registry at start-up and keeps it in step with every register
//! and delete it makes; until it is loaded, lookups go to the registry itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::registry::Registration;

/// Registrations by tenant, then name, then version.
#[derive(Debug, Default)]
pub struct RegistrationIndex {
    tenants: HashMap<String, BTreeMap<String, BTreeMap<u32, Arc<Registration>>>>,
}

impl RegistrationIndex {
    /// An index of `all`.
    pub fn from_registrations(all: Vec<Registration>) -> Self {
        let mut index = RegistrationIndex::default();
        for r in all {
            index.insert(r);
        }
        index
    }

    /// Add (or replace) one version.
    pub fn insert(&mut self, r: Registration) {
        self.tenants
            .entry(r.tenant.clone())
            .or_default()
            .entry(r.name.clone())
            .or_default()
            .insert(r.version, Arc::new(r));
    }

    /// Forget every version of a name.
    pub fn remove(&mut self, tenant: &str, name: &str) {
        if let Some(names) = self.tenants.get_mut(tenant) {
            names.remove(name);
        }
    }

    fn versions_map(&self, tenant: &str, name: &str) -> Option<&BTreeMap<u32, Arc<Registration>>> {
        self.tenants.get(tenant)?.get(name)
    }

    /// One version (`None`: the newest) and whether the name exists at all.
    pub fn get(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
    ) -> (Option<Arc<Registration>>, bool) {
        let Some(versions) = self.versions_map(tenant, name) else {
            return (None, false);
        };
        let found = match version {
            Some(v) => versions.get(&v),
            None => versions.values().next_back(),
        };
        (found.cloned(), !versions.is_empty())
    }

    /// The version numbers of a name, oldest first.
    pub fn version_numbers(&self, tenant: &str, name: &str) -> Vec<u32> {
        self.versions_map(tenant, name)
            .map(|v| v.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Every name of a tenant with its versions (oldest first), sorted by name.
    pub fn list(&self, tenant: &str) -> Vec<Vec<Arc<Registration>>> {
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
}

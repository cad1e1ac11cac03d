//! Compiled components by content digest: loaded on registration, at start-up and on first use.
//!
//! A component whose stored bytes fail verification, or that no longer compiles, is remembered as
//! unavailable (until it is registered again) and never run; a passing failure (a busy server, a
//! compile timeout) is reported and tried again next time.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use wasmrpc_proto::Code;

use crate::admission::{AdmissionError, LocalSlots, TenantShare};
use crate::error::ServiceError;
use crate::registry::{Digest, Registry, RegistryError};
use crate::runtime::{Module, NewArtifact, Runtime, UploadError};
use crate::tenancy::TenantId;

/// A compiled component, or why it cannot be run.
#[derive(Clone)]
enum Slot {
    Ready(Arc<Module>),
    Unavailable(String),
}

/// The compiled-component cache of this process.
pub struct ModuleCache {
    runtime: Arc<Runtime>,
    registry: Arc<dyn Registry>,
    call_slots: Arc<LocalSlots>,
    /// Never held across an await: a lookup is a plain read on every call's path.
    slots: RwLock<HashMap<Digest, Slot>>,
}

impl std::fmt::Debug for ModuleCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleCache").finish_non_exhaustive()
    }
}

impl ModuleCache {
    /// An empty cache loading from `registry` into `runtime`; asking a component for its
    /// signatures takes one of this worker's `call_slots`, like any other guest code.
    pub fn new(
        runtime: Arc<Runtime>,
        registry: Arc<dyn Registry>,
        call_slots: Arc<LocalSlots>,
    ) -> Self {
        ModuleCache {
            runtime,
            registry,
            call_slots,
            slots: RwLock::new(HashMap::new()),
        }
    }

    /// Validate, compile and describe component bytes (an upload, or a stored blob) for
    /// `tenant`, asking for the signatures in one of its call slots. The artifact of a fresh
    /// compile comes back unstored: [`ModuleCache::keep`] it once the registration is committed.
    ///
    /// # Errors
    /// Why the component was refused, or [`UploadError::Busy`] when no call slot came free to
    /// ask it for its signatures.
    pub async fn load(
        &self,
        bytes: Arc<Vec<u8>>,
        tenant: &TenantId,
    ) -> Result<(Arc<Module>, Option<NewArtifact>), UploadError> {
        let mut compiled = self.runtime.compile(bytes, tenant.as_str()).await?;
        let artifact = compiled.take_artifact();
        let config = self.runtime.config();
        let wait = config.signatures_deadline;
        // Asking for signatures is one short call; the server's own limits bound it.
        let share = TenantShare {
            max_running: config.max_concurrent_calls,
            max_queued: config.max_queued_calls,
        };
        let _slot = self
            .call_slots
            .admit(tenant, share, wait)
            .await
            .map_err(|e| {
                let (code, reason) = match e {
                    // Waiting too long for a slot means the server is busy, not that the component
                    // is bad.
                    AdmissionError::WaitedPastDeadline { .. } => (
                        Code::Unavailable,
                        "the server is too busy to load the component now; try again".to_owned(),
                    ),
                    // (A rate is not a slot's business: the rate step never refuses here.)
                    AdmissionError::Overloaded { .. }
                    | AdmissionError::TenantBusy { .. }
                    | AdmissionError::RateLimited { .. }
                    | AdmissionError::BytesBudget { .. } => {
                        (Code::ResourceExhausted, e.to_string())
                    }
                };
                UploadError::Busy { code, reason }
            })?;
        Ok((self.runtime.describe(compiled).await?, artifact))
    }

    /// Store the artifact of a component whose registration was committed, and return the
    /// component to serve it with: `module` loaded from that file, its code and image pages of
    /// the file rather than a private copy (`runtime/kept.rs`); `module` itself when there is
    /// no new artifact or it cannot be stored or loaded.
    pub async fn keep(&self, artifact: Option<NewArtifact>, module: Arc<Module>) -> Arc<Module> {
        let Some(artifact) = artifact else {
            return module;
        };
        // Writing and checking tens of MiB is blocking work: off the threads that answer.
        let runtime = self.runtime.clone();
        let fallback = module.clone();
        tokio::task::spawn_blocking(move || runtime.keep_artifact(artifact, module))
            .await
            .unwrap_or(fallback)
    }

    /// Delete `tenant`'s stored artifact of `digest`: none of its registrations uses it now.
    pub fn forget_artifact(&self, tenant: &TenantId, digest: &Digest) {
        self.runtime.forget_artifact(tenant.as_str(), digest.0);
    }

    /// Delete the stored artifacts no registration uses (each registration's tenant's artifact
    /// of its component is kept); how many were deleted.
    pub fn sweep_artifacts(&self) -> usize {
        self.runtime.sweep_artifacts(|| {
            self.registry
                .all()
                .iter()
                .map(|r| (r.tenant.as_str().to_owned(), r.digest.0))
                .collect()
        })
    }

    /// Remember a freshly loaded component.
    pub fn insert(&self, digest: Digest, module: Arc<Module>) {
        self.write().insert(digest, Slot::Ready(module));
    }

    /// Forget a component nothing refers to any more (its artifacts on disk go with the next
    /// [`ModuleCache::sweep_artifacts`]).
    pub fn forget(&self, digest: &Digest) {
        self.write().remove(digest);
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Digest, Slot>> {
        self.slots.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The compiled component for `digest` if it is here and runs (no loading).
    pub fn ready(&self, digest: &Digest) -> Option<Arc<Module>> {
        match self.cached(digest)? {
            Slot::Ready(m) => Some(m),
            Slot::Unavailable(_) => None,
        }
    }

    fn cached(&self, digest: &Digest) -> Option<Slot> {
        self.slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(digest)
            .cloned()
    }

    /// The compiled component for `digest`, loading it from the registry if needed (in a call
    /// slot of `tenant`, whose call needs it).
    ///
    /// # Errors
    /// UNAVAILABLE when the stored component is missing, corrupt or no longer loads, or loading
    /// it failed for a passing reason; a store failure otherwise.
    pub async fn get(
        &self,
        digest: &Digest,
        tenant: &TenantId,
    ) -> Result<Arc<Module>, ServiceError> {
        match self.cached(digest) {
            Some(Slot::Ready(m)) => Ok(m),
            Some(Slot::Unavailable(why)) => Err(ServiceError::unavailable(why)),
            // Boxed: loading (a store read and a compile) is rare and its future large, and
            // inline it would make the future of every call that large, copied at each move.
            None => Box::pin(self.load_stored(digest, tenant)).await,
        }
    }

    /// [`ModuleCache::get`] of a component that is not in the cache yet.
    async fn load_stored(
        &self,
        digest: &Digest,
        tenant: &TenantId,
    ) -> Result<Arc<Module>, ServiceError> {
        let slot = match self.registry.blob(*digest).await {
            Ok(bytes) => match self.load(Arc::new(bytes), tenant).await {
                // Stored bytes are registered: their artifact serves that registration.
                Ok((m, artifact)) => Slot::Ready(self.keep(artifact, m).await),
                // The stored component itself is refused: that will not change until it is
                // registered again, so remember it.
                Err(e) if e.is_the_components_fault() => {
                    Slot::Unavailable(format!("stored component {digest} no longer loads: {e}"))
                }
                Err(e) if e.is_host_fault() => return Err(ServiceError::Upload(e)),
                // A passing failure (busy, a compile timeout): report it, try again next time.
                Err(e) => {
                    return Err(ServiceError::unavailable(format!(
                        "loading stored component {digest} failed, try again: {e}"
                    )));
                }
            },
            Err(e @ (RegistryError::Corrupt { .. } | RegistryError::MissingBlob(_))) => {
                Slot::Unavailable(format!("{e}; register the method again"))
            }
            Err(e) => return Err(ServiceError::Store(e)),
        };
        self.write().insert(*digest, slot.clone());
        match slot {
            Slot::Ready(m) => Ok(m),
            Slot::Unavailable(why) => Err(ServiceError::unavailable(why)),
        }
    }
}

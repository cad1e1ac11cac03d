//! The operations the API and the embeddable server offer, joining the registry and the runtime.
//!
//! Keeps one compiled [`Module`] per content digest, loaded on registration, at start-up and on
//! first use; a component whose stored bytes fail verification is UNAVAILABLE, never run.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::RwLock;
use wasmrpc_proto::{Code, MethodInfo, MethodSignature, Status, Tensor};

use crate::index::RegistrationIndex;
use crate::metrics::Metrics;
use crate::registry::{Digest, NewRegistration, Registration, Registry, RegistryError};
use crate::runtime::{Module, Runtime};
use wasmrpc_proto::names;

/// The tenant every request belongs to while the server runs without authentication.
pub const DEFAULT_TENANT: &str = "default";

/// A compiled component, or why it cannot be run.
#[derive(Clone)]
enum ModuleSlot {
    Ready(Arc<Module>),
    Unavailable(String),
}

/// A method resolved for a call: its registration and its compiled component.
#[derive(Clone)]
pub struct Resolved {
    /// The registration being called, shared with the index (no copy per call).
    pub registration: Arc<Registration>,
    module: Arc<Module>,
}

impl Resolved {
    /// The method's signature.
    pub fn signature(&self) -> &MethodSignature {
        &self.registration.signature
    }
}

/// The host's operations over methods.
pub struct Service {
    runtime: Arc<Runtime>,
    registry: Arc<dyn Registry>,
    modules: RwLock<HashMap<Digest, ModuleSlot>>,
    /// `None` until start-up has loaded it; then kept in step with every register and delete.
    index: std::sync::RwLock<Option<RegistrationIndex>>,
    /// Held while the registry and the index change together, so they never disagree.
    writes: tokio::sync::Mutex<()>,
    metrics: Arc<Metrics>,
    ready: AtomicBool,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

fn storage_error(e: RegistryError) -> Status {
    match e {
        RegistryError::Corrupt { .. } | RegistryError::MissingBlob(_) => {
            Status::new(Code::Unavailable, format!("{e}; register the method again"))
        }
        other => {
            tracing::error!(error = %other, "registry failure");
            Status::new(Code::Internal, format!("the method store failed: {other}"))
        }
    }
}

fn not_found(name: &str) -> Status {
    Status::new(
        Code::NotFound,
        format!("no method named `{name}` is registered"),
    )
}

/// Run a blocking registry operation off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RegistryError> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::new(Code::Internal, format!("registry task failed: {e}")))?
        .map_err(storage_error)
}

impl Service {
    /// A service over `runtime` and `registry`; not ready until [`Service::warm`] has run.
    pub fn new(runtime: Arc<Runtime>, registry: Arc<dyn Registry>, metrics: Arc<Metrics>) -> Self {
        Service {
            runtime,
            registry,
            modules: RwLock::new(HashMap::new()),
            index: std::sync::RwLock::new(None),
            writes: tokio::sync::Mutex::new(()),
            metrics,
            ready: AtomicBool::new(false),
        }
    }

    /// The runtime's limits and configuration.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The metrics this service records into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether start-up loading has finished.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Load and compile every registered component, verifying each blob, then become ready.
    /// A component that fails is logged and marked unavailable; the rest still serve.
    ///
    /// # Errors
    /// The registry itself cannot be read.
    pub async fn warm(&self) -> Result<usize, Status> {
        let all = {
            let _writes = self.writes.lock().await;
            let registry = self.registry.clone();
            let all = blocking(move || registry.list_all()).await?;
            *self.index_mut() = Some(RegistrationIndex::from_registrations(all.clone()));
            all
        };
        let mut digests: Vec<Digest> = all.iter().map(|r| r.digest).collect();
        digests.sort();
        digests.dedup();
        for digest in &digests {
            if let Err(e) = self.module(digest).await {
                tracing::warn!(%digest, error = %e, "stored component is unavailable");
            }
        }
        self.ready.store(true, Ordering::Release);
        tracing::info!(
            registrations = all.len(),
            components = digests.len(),
            "registry loaded"
        );
        Ok(all.len())
    }

    fn index_mut(&self) -> std::sync::RwLockWriteGuard<'_, Option<RegistrationIndex>> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, Option<RegistrationIndex>> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The compiled component for `digest`, loading it from the store if needed.
    async fn module(&self, digest: &Digest) -> Result<Arc<Module>, Status> {
        if let Some(slot) = self.modules.read().await.get(digest) {
            return match slot {
                ModuleSlot::Ready(m) => Ok(m.clone()),
                ModuleSlot::Unavailable(why) => Err(Status::new(Code::Unavailable, why.clone())),
            };
        }
        let registry = self.registry.clone();
        let d = *digest;
        let slot = match blocking(move || registry.blob(&d)).await {
            Ok(bytes) => match self.runtime.load(Arc::new(bytes)).await {
                Ok(m) => ModuleSlot::Ready(m),
                // The stored component itself is refused: that will not change until it is
                // registered again, so remember it.
                Err(e) if e.code() == Code::InvalidArgument => ModuleSlot::Unavailable(format!(
                    "stored component {digest} no longer loads: {e}"
                )),
                // A passing failure (busy, a compile timeout): report it, try again next time.
                Err(e) => {
                    return Err(Status::new(
                        Code::Unavailable,
                        format!("loading stored component {digest} failed, try again: {e}"),
                    ));
                }
            },
            Err(e) if e.code() == Code::Unavailable => {
                ModuleSlot::Unavailable(e.message().to_owned())
            }
            Err(e) => return Err(e),
        };
        self.modules.write().await.insert(*digest, slot.clone());
        match slot {
            ModuleSlot::Ready(m) => Ok(m),
            ModuleSlot::Unavailable(why) => Err(Status::new(Code::Unavailable, why)),
        }
    }

    /// Register `component` under `name` for `tenant`; returns the new version's metadata and
    /// whether the name is new (version 1).
    ///
    /// `export` picks one method of a multi-method component; without it, a component with one
    /// method, or one whose methods include `name`, needs no choice.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bad name or component (with the reason), RESOURCE_EXHAUSTED for one
    /// over the size limit, INTERNAL when the store fails (nothing is registered then).
    pub async fn register(
        &self,
        tenant: &str,
        name: &str,
        export: Option<&str>,
        component: Vec<u8>,
    ) -> Result<(MethodInfo, bool), Status> {
        if !names::is_valid_name(name) {
            return Err(Status::new(
                Code::InvalidArgument,
                format!("`{name}` is not a valid method name: {}", names::NAME_RULE),
            ));
        }
        let component = Arc::new(component);
        let module = self.runtime.load(component.clone()).await?;
        let signature = choose_export(&module, name, export)?.clone();
        let new = NewRegistration {
            tenant: tenant.to_owned(),
            name: name.to_owned(),
            export: signature.name.clone(),
            signature,
        };
        let registration = {
            let _writes = self.writes.lock().await;
            let registry = self.registry.clone();
            let bytes = component.clone();
            let registration = blocking(move || registry.register(new, &bytes)).await?;
            if let Some(index) = self.index_mut().as_mut() {
                index.insert(registration.clone());
            }
            registration
        };
        self.modules
            .write()
            .await
            .insert(registration.digest, ModuleSlot::Ready(module));
        self.metrics.record_registration(tenant);
        tracing::info!(
            tenant,
            name,
            version = registration.version,
            digest = %registration.digest,
            "registered"
        );
        let created = registration.version == 1;
        let info = self.info(registration).await?;
        Ok((info, created))
    }

    async fn info(&self, registration: Registration) -> Result<MethodInfo, Status> {
        let indexed = self
            .index()
            .as_ref()
            .map(|i| i.version_numbers(&registration.tenant, &registration.name));
        let versions = match indexed {
            Some(v) => v,
            None => {
                let registry = self.registry.clone();
                let (tenant, name) = (registration.tenant.clone(), registration.name.clone());
                blocking(move || registry.versions(&tenant, &name))
                    .await?
                    .iter()
                    .map(|r| r.version)
                    .collect()
            }
        };
        Ok(method_info(registration, versions))
    }

    /// Every method of `tenant`, newest version of each, sorted by name.
    ///
    /// # Errors
    /// INTERNAL when the store fails.
    pub async fn list(&self, tenant: &str) -> Result<Vec<MethodInfo>, Status> {
        let indexed: Option<Vec<Vec<Registration>>> = self.index().as_ref().map(|index| {
            index
                .list(tenant)
                .into_iter()
                .map(|versions| versions.iter().map(|r| (**r).clone()).collect())
                .collect()
        });
        let grouped = if let Some(grouped) = indexed {
            grouped
        } else {
            let registry = self.registry.clone();
            let tenant_owned = tenant.to_owned();
            blocking(move || {
                let mut by_name: std::collections::BTreeMap<String, Vec<Registration>> =
                    Default::default();
                for r in registry
                    .list_all()?
                    .into_iter()
                    .filter(|r| r.tenant == tenant_owned)
                {
                    by_name.entry(r.name.clone()).or_default().push(r);
                }
                Ok(by_name.into_values().collect())
            })
            .await?
        };
        Ok(grouped
            .into_iter()
            .filter_map(|mut all| {
                all.sort_by_key(|r| r.version);
                let numbers = all.iter().map(|r| r.version).collect();
                all.pop().map(|latest| method_info(latest, numbers))
            })
            .collect())
    }

    /// One method's metadata (its newest version, or `version`).
    ///
    /// # Errors
    /// NOT_FOUND when the name (or version) is not registered.
    pub async fn describe(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
    ) -> Result<MethodInfo, Status> {
        let registration = self.lookup(tenant, name, version).await?;
        self.info(Registration::clone(&registration)).await
    }

    async fn lookup(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
    ) -> Result<Arc<Registration>, Status> {
        let indexed = self.index().as_ref().map(|i| i.get(tenant, name, version));
        let found = match indexed {
            Some(found) => found,
            None => {
                let registry = self.registry.clone();
                let (t, n) = (tenant.to_owned(), name.to_owned());
                blocking(move || {
                    let wanted = registry.get(&t, &n, version)?;
                    // Tell "no such version" apart from "no such method" for a clearer message.
                    let name_exists = wanted.is_none() && registry.get(&t, &n, None)?.is_some();
                    Ok((wanted.map(Arc::new), name_exists))
                })
                .await?
            }
        };
        match found {
            (Some(r), _) => Ok(r),
            (None, true) => Err(Status::new(
                Code::NotFound,
                format!("method `{name}` has no version {}", version.unwrap_or(0)),
            )),
            (None, false) => Err(not_found(name)),
        }
    }

    /// Unregister every version of `name`; returns the versions removed.
    ///
    /// # Errors
    /// NOT_FOUND when the name is not registered.
    pub async fn delete(&self, tenant: &str, name: &str) -> Result<Vec<u32>, Status> {
        let removed = {
            let _writes = self.writes.lock().await;
            let registry = self.registry.clone();
            let (t, n) = (tenant.to_owned(), name.to_owned());
            let removed = blocking(move || registry.delete(&t, &n)).await?;
            if let Some(index) = self.index_mut().as_mut() {
                index.remove(tenant, name);
            }
            removed
        };
        if removed.is_empty() {
            return Err(not_found(name));
        }
        // Forget compiled components nothing refers to any more.
        let registry = self.registry.clone();
        let still_used: Vec<Digest> = blocking(move || registry.list_all())
            .await?
            .into_iter()
            .map(|r| r.digest)
            .collect();
        let mut modules = self.modules.write().await;
        for r in &removed {
            if !still_used.contains(&r.digest) {
                modules.remove(&r.digest);
            }
        }
        tracing::info!(tenant, name, versions = removed.len(), "deleted");
        Ok(removed.iter().map(|r| r.version).collect())
    }

    /// Find a method and its compiled component, ready for [`Service::invoke`].
    ///
    /// # Errors
    /// NOT_FOUND for an unknown name or version; UNAVAILABLE when its component cannot be loaded.
    pub async fn resolve(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
    ) -> Result<Resolved, Status> {
        let registration = self.lookup(tenant, name, version).await?;
        let module = self.module(&registration.digest).await?;
        Ok(Resolved {
            registration,
            module,
        })
    }

    /// Call a resolved method with `args` within `timeout` (zero: the server's default).
    ///
    /// # Errors
    /// INVALID_ARGUMENT when the args do not fit the signature; otherwise the guest's failure
    /// with its canonical code.
    pub async fn invoke(
        &self,
        method: &Resolved,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Status> {
        let registration = &method.registration;
        let started = Instant::now();
        // If the caller goes away mid-call (the client disconnected), this future is dropped and
        // the guest with it; the guard still counts the call, as CANCELLED.
        let mut record = CallRecord {
            metrics: &self.metrics,
            registration,
            started,
            code: Some(Code::Cancelled),
        };
        let result = match registration.signature.check_args(&args) {
            Err(why) => Err(Status::new(Code::InvalidArgument, why)),
            Ok(()) => {
                let deadline = self.runtime.config().deadline_for(timeout);
                self.runtime
                    .call(&method.module, &registration.export, args, deadline)
                    .await
                    .map_err(Status::from)
            }
        };
        record.code = result.as_ref().err().map(|e| e.code());
        drop(record);
        result
    }

    /// Resolve and invoke in one step.
    ///
    /// # Errors
    /// As [`Service::resolve`] and [`Service::invoke`].
    pub async fn call(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Status> {
        let method = self.resolve(tenant, name, version).await?;
        self.invoke(&method, args, timeout).await
    }
}

/// Records one call in the metrics when dropped, whether the call finished or was abandoned.
struct CallRecord<'a> {
    metrics: &'a Metrics,
    registration: &'a Registration,
    started: Instant,
    /// `None` for OK; stays CANCELLED unless the call finishes.
    code: Option<Code>,
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        self.metrics.record_call(
            &self.registration.tenant,
            &self.registration.name,
            self.code,
            self.started.elapsed(),
        );
    }
}

fn choose_export<'m>(
    module: &'m Module,
    name: &str,
    export: Option<&str>,
) -> Result<&'m MethodSignature, Status> {
    let sigs = module.signatures();
    let names = || {
        sigs.iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match export {
        Some(e) => module.signature(e).ok_or_else(|| {
            Status::new(
                Code::InvalidArgument,
                format!("the component has no method `{e}`; it exports: {}", names()),
            )
        }),
        None if sigs.len() == 1 => Ok(&sigs[0]),
        None => module.signature(name).ok_or_else(|| {
            Status::new(
                Code::InvalidArgument,
                format!(
                    "the component exports several methods ({}); choose one with ?export=NAME",
                    names()
                ),
            )
        }),
    }
}

fn method_info(r: Registration, versions: Vec<u32>) -> MethodInfo {
    MethodInfo {
        name: r.name,
        version: r.version,
        versions,
        digest: r.digest.to_string(),
        size: r.size,
        created_ms: r.created_ms,
        export: r.export,
        signature: r.signature,
    }
}

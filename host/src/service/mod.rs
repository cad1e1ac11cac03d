//! The operations the API and the embeddable server offer over methods, joining the registry
//! (what is registered), the module cache (what is compiled here), admission (whether a call may
//! run, and with what) and an executor (where a call runs).
//!
//! Every call takes one road, whoever sends it (v1, v2, the clients, the embedded server) and
//! wherever it runs: [`Service::resolve`], then [`Service::invoke`], which checks the arguments,
//! admits the call once, hands it to the executor with its [`Placement`] and records it once.
//! A call another worker placed here arrives through [`Service::serve_peer`] with the limits it
//! was admitted with, and goes straight to the local executor.
//!
//! Every failure is a [`ServiceError`], kept structured until the API maps it to a code.

mod peers;
pub(crate) mod trace;

pub use crate::error::ServiceError;
pub use crate::execute::Placement;
pub use peers::Peers;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmrpc_proto::{Code, MethodInfo, MethodSignature, Tensor};

use wasmrpc_proto::cluster::WorkerList;

use crate::admission::{Admission, CallLimits, DeadlineRule};
use crate::execute::{Call, Executed, Executor, LocalExecutor, ModuleCache};
use crate::metrics::Metrics;
use crate::registry::{
    Digest, Lookup, NewRegistration, Registration, RegistrationLimits, Registry, Usage,
};
use crate::runtime::{Module, Runtime};
use crate::tenancy::{Quota, TenantId};

/// Who asks, with the quota in force for them.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The tenant (from the request's key alone).
    pub tenant: TenantId,
    /// Its quota.
    pub quota: Quota,
}

/// A method resolved for a call: its registration, shared with the registry's cache (no copy per
/// call). Where its component is compiled is the executor's business.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The registration being called.
    pub registration: Arc<Registration>,
}

impl Resolved {
    /// The method's signature.
    pub fn signature(&self) -> &MethodSignature {
        &self.registration.signature
    }
}

/// A call another worker placed on this one, with what its first worker admitted it with.
#[derive(Debug)]
pub struct PeerCall {
    /// Whose call it is.
    pub tenant: TenantId,
    /// The method's name.
    pub name: String,
    /// The version the first worker resolved.
    pub version: u32,
    /// The arguments.
    pub args: Vec<Tensor>,
    /// What the call may use, the deadline left included.
    pub limits: CallLimits,
    /// The trace it is part of: the calling worker's `forward` span.
    pub trace: Option<crate::otel::SpanContext>,
}

/// The largest component a caller may upload, and whose limit it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentLimit {
    /// In bytes.
    pub bytes: usize,
    /// The caller's quota `max_component_bytes` (not the server's own limit) sets it.
    pub by_quota: bool,
}

impl ComponentLimit {
    /// What an upload over the limit is told.
    pub fn refusal(&self) -> String {
        if self.by_quota {
            format!(
                "the component is over the quota max_component_bytes ({})",
                self.bytes
            )
        } else {
            format!("the component is over the limit of {} bytes", self.bytes)
        }
    }
}

/// The host's operations over methods.
pub struct Service {
    runtime: Arc<Runtime>,
    registry: Arc<dyn Registry>,
    modules: Arc<ModuleCache>,
    admission: Admission,
    /// Runs calls here; also what calls from other workers are handed to.
    local: Arc<LocalExecutor>,
    /// Where calls go: `local`, or the cluster's executor once the server is in a cluster.
    executor: Arc<dyn Executor>,
    /// The cluster this server is in, if any.
    peers: Option<Arc<dyn Peers>>,
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

impl Service {
    /// A service over `runtime` and `registry` that runs calls here, admitted by call slots and a
    /// wait queue sized by the runtime's configuration (of which one tenant may fill at most
    /// `tenant_max_queued`); not ready until [`Service::warm`] has run.
    pub fn new(
        runtime: Arc<Runtime>,
        registry: Arc<dyn Registry>,
        metrics: Arc<Metrics>,
        tenant_max_queued: usize,
    ) -> Self {
        let config = runtime.config();
        let admission = Admission::new(
            config.max_concurrent_calls,
            config.max_queued_calls,
            tenant_max_queued,
            DeadlineRule {
                default: config.default_deadline,
                max: config.max_deadline,
            },
        );
        let modules = Arc::new(ModuleCache::new(
            runtime.clone(),
            registry.clone(),
            admission.slots().clone(),
        ));
        let local = Arc::new(LocalExecutor::new(
            runtime.clone(),
            modules.clone(),
            admission.slots().clone(),
        ));
        Service {
            runtime,
            registry,
            modules,
            admission,
            executor: local.clone(),
            local,
            peers: None,
            metrics,
            ready: AtomicBool::new(false),
        }
    }

    /// Place calls through `executor` (the cluster's, built over [`Service::local_executor`])
    /// and answer cluster questions from `peers`: a worker joining a cluster, before it serves.
    pub fn join_cluster(&mut self, executor: Arc<dyn Executor>, peers: Arc<dyn Peers>) {
        self.executor = executor;
        self.peers = Some(peers);
    }

    /// The executor that runs calls on this server.
    pub fn local_executor(&self) -> Arc<LocalExecutor> {
        self.local.clone()
    }

    /// The admission policy, for a worker joining a cluster to share its counts.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// Whether a call may be placed as `placement` here: anywhere but on this server needs a
    /// cluster.
    ///
    /// # Errors
    /// FAILED_PRECONDITION for a worker placement outside a cluster.
    pub fn check_placement(&self, placement: &Placement) -> Result<(), ServiceError> {
        match (placement, &self.peers) {
            (Placement::Here, _) | (_, Some(_)) => Ok(()),
            (_, None) => Err(ServiceError::NotInACluster),
        }
    }

    /// The cluster's live workers, and this one's name.
    ///
    /// # Errors
    /// FAILED_PRECONDITION outside a cluster.
    pub fn workers(&self) -> Result<WorkerList, ServiceError> {
        let peers = self.peers.as_ref().ok_or(ServiceError::NotInACluster)?;
        Ok(WorkerList {
            workers: peers.workers(),
            this: peers.this_worker().to_owned(),
            serving: peers.serving_now(),
        })
    }

    /// Arrive at barrier `name` of `tenant` as `member`, and wait until `count` members have.
    ///
    /// # Errors
    /// FAILED_PRECONDITION outside a cluster; UNAVAILABLE when the cluster's store fails.
    pub async fn barrier(
        &self,
        tenant: &TenantId,
        name: &str,
        member: &str,
        count: usize,
    ) -> Result<Vec<String>, ServiceError> {
        let peers = self.peers.as_ref().ok_or(ServiceError::NotInACluster)?;
        peers.barrier(tenant, name, member, count).await
    }

    /// The longest any call or wait may take: the server's maximum deadline.
    pub fn longest_deadline(&self) -> Duration {
        self.admission.deadlines().max
    }

    /// The largest component `quota` lets its tenant upload: its `max_component_bytes`, within
    /// the server's own limit.
    pub fn component_limit(&self, quota: &Quota) -> ComponentLimit {
        let server = self.runtime.config().max_component_bytes;
        let by_quota = usize::try_from(quota.max_component_bytes).unwrap_or(usize::MAX);
        if by_quota < server {
            ComponentLimit {
                bytes: by_quota,
                by_quota: true,
            }
        } else {
            ComponentLimit {
                bytes: server,
                by_quota: false,
            }
        }
    }

    /// The metrics this service records into.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether start-up loading has finished.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Compile every registered component (the registry has loaded its registrations already),
    /// verifying each blob, then become ready. A component that fails is logged and marked
    /// unavailable; the rest still serve. Returns how many registrations there are.
    pub async fn warm(&self) -> usize {
        let all = self.registry.all();
        // Each distinct component once, loaded in a call slot of a tenant that uses it.
        let mut digests: Vec<(Digest, &TenantId)> =
            all.iter().map(|r| (r.digest, &r.tenant)).collect();
        digests.sort_by_key(|(d, _)| *d);
        digests.dedup_by_key(|(d, _)| *d);
        for (digest, tenant) in &digests {
            if let Err(e) = self.modules.get(digest, tenant).await {
                tracing::warn!(%digest, error = %e, "stored component is unavailable");
            }
        }
        // Artifacts of registrations deleted while the server was down, of refused uploads of
        // older versions, of other engine settings.
        self.modules.sweep_artifacts();
        self.ready.store(true, Ordering::Release);
        tracing::info!(
            registrations = all.len(),
            components = digests.len(),
            "registry loaded"
        );
        all.len()
    }

    /// Register `component` under `name` for `caller`; returns the new version's metadata and
    /// whether the name is new (version 1).
    ///
    /// `export` picks one method of a multi-method component; without it, a component with one
    /// method, or one whose methods include `name`, needs no choice.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bad name or component (with the reason), RESOURCE_EXHAUSTED for one
    /// over the size limit or the caller's quotas, a store failure (nothing is registered then).
    pub async fn register(
        &self,
        caller: &Caller,
        name: &str,
        export: Option<&str>,
        component: Vec<u8>,
    ) -> Result<(MethodInfo, bool), ServiceError> {
        let tenant = &caller.tenant;
        wasmrpc_proto::names::check_name(name).map_err(ServiceError::InvalidName)?;
        let quota = &caller.quota;
        if component.len() as u64 > quota.max_component_bytes {
            return Err(ServiceError::Quota(format!(
                "the component is {} bytes, over the quota max_component_bytes ({})",
                component.len(),
                quota.max_component_bytes
            )));
        }
        let component = Arc::new(component);
        // Bytes this tenant registered already and that are compiled here: their checks passed
        // and their signatures are known, so registering them again is only a write. Only the
        // tenant's own: skipping the compile for bytes another tenant uploaded would tell, by
        // the time it takes, that someone did. Bytes whose stored copy is unavailable go
        // through the whole load, which repairs it.
        let digest = Digest::of(&component);
        let known = self.registry.tenant_uses(tenant, &digest);
        let loading = Instant::now();
        let (module, artifact, compiled) = match self.modules.ready(&digest).filter(|_| known) {
            Some(module) => (module, None, None),
            None => {
                let (module, artifact) = self.modules.load(component.clone(), tenant).await?;
                (module, artifact, Some((loading, Instant::now())))
            }
        };
        let signature = choose_export(&module, name, export)?.clone();
        let new = NewRegistration {
            tenant: tenant.clone(),
            name: name.to_owned(),
            export: signature.name.clone(),
            signature,
            limits: RegistrationLimits {
                max_methods: quota.max_methods,
                max_stored_bytes: quota.max_stored_bytes,
            },
        };
        let registration = self.registry.register(new, component).await?;
        // Only now: a refused upload leaves no artifact behind. From here the component is
        // served from its artifact file, as after a restart.
        let module = self.modules.keep(artifact, module).await;
        self.modules.insert(registration.digest, module);
        self.metrics.record_registration(tenant.as_str());
        trace::registered(&registration, compiled);
        tracing::info!(
            target: "audit",
            %tenant,
            name,
            version = registration.version,
            digest = %registration.digest,
            size = registration.size,
            "registered"
        );
        let created = registration.version == 1;
        Ok((self.info(&registration), created))
    }

    fn info(&self, registration: &Registration) -> MethodInfo {
        let versions = self
            .registry
            .versions(&registration.tenant, &registration.name);
        method_info(registration, versions)
    }

    /// Every method of `tenant`, newest version of each, sorted by name.
    pub fn list(&self, tenant: &TenantId) -> Vec<MethodInfo> {
        self.registry
            .list(tenant)
            .into_iter()
            .filter_map(|all| {
                let numbers = all.iter().map(|r| r.version).collect();
                all.last().map(|latest| method_info(latest, numbers))
            })
            .collect()
    }

    /// One method's metadata (its newest version, or `version`).
    ///
    /// # Errors
    /// NOT_FOUND when the name (or version) is not registered.
    pub fn describe(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<MethodInfo, ServiceError> {
        let registration = self.lookup(tenant, name, version)?;
        Ok(self.info(&registration))
    }

    fn lookup(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Arc<Registration>, ServiceError> {
        match self.registry.get(tenant, name, version) {
            Lookup::Found(r) => Ok(r),
            Lookup::NoSuchVersion => Err(ServiceError::NoSuchVersion {
                name: name.to_owned(),
                version: version.unwrap_or(0),
            }),
            Lookup::NoSuchName => Err(ServiceError::NotFound(name.to_owned())),
        }
    }

    /// Unregister every version of `name`, or only `version`; returns the versions removed.
    ///
    /// # Errors
    /// NOT_FOUND when the name (or that version of it) is not registered; a store failure.
    pub async fn delete(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Vec<u32>, ServiceError> {
        if let Some(v) = version {
            // The same NOT_FOUND a call of a missing version gets.
            self.lookup(tenant, name, Some(v))?;
        }
        let removed = self.registry.delete(tenant, name, version).await?;
        if removed.is_empty() {
            return Err(match version {
                None => ServiceError::NotFound(name.to_owned()),
                Some(version) => ServiceError::NoSuchVersion {
                    name: name.to_owned(),
                    version,
                },
            });
        }
        match version {
            None => self.metrics.forget_versions(tenant.as_str(), name),
            Some(v) => self.metrics.forget_version(tenant.as_str(), name, v),
        }
        // Forget compiled components nothing refers to any more.
        for r in &removed {
            if !self.registry.uses(&r.digest) {
                self.modules.forget(&r.digest);
            }
            if !self.registry.tenant_uses(tenant, &r.digest) {
                self.modules.forget_artifact(tenant, &r.digest);
            }
        }
        tracing::info!(target: "audit", %tenant, name, versions = removed.len(), "deleted");
        Ok(removed.iter().map(|r| r.version).collect())
    }

    /// Delete every registration of `tenant`; returns how many method names were removed.
    ///
    /// # Errors
    /// A store failure (what was deleted before it stays deleted).
    pub async fn delete_all(&self, tenant: &TenantId) -> Result<usize, ServiceError> {
        let names: Vec<String> = self
            .registry
            .list(tenant)
            .iter()
            .filter_map(|versions| versions.first().map(|r| r.name.clone()))
            .collect();
        for name in &names {
            match self.delete(tenant, name, None).await {
                Ok(_) | Err(ServiceError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(names.len())
    }

    /// What `tenant` holds in the store.
    pub fn usage(&self, tenant: &TenantId) -> Usage {
        self.registry.usage(tenant)
    }

    /// Find a method, ready for [`Service::invoke`].
    ///
    /// # Errors
    /// NOT_FOUND for an unknown name or version.
    pub fn resolve(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Resolved, ServiceError> {
        Ok(Resolved {
            registration: self.lookup(tenant, name, version)?,
        })
    }

    /// Call a resolved method of `caller` with `args` within `timeout` (zero: the server's
    /// default), within the caller's quota, where `placement` says.
    ///
    /// # Errors
    /// INVALID_ARGUMENT when the args do not fit the signature; FAILED_PRECONDITION for a worker
    /// placement outside a cluster; RESOURCE_EXHAUSTED past the caller's rate; otherwise the
    /// guest's failure, a refusal to admit the call, a component that cannot be loaded, or a
    /// worker that cannot be reached.
    pub async fn invoke(
        &self,
        caller: &Caller,
        method: &Resolved,
        args: Vec<Tensor>,
        timeout: Duration,
        placement: &Placement,
    ) -> Result<Vec<Tensor>, ServiceError> {
        // A call that no request carries (the embedded server's) gets a trace of its own.
        if let Some(own) = trace::own_call_span(&method.registration.name) {
            let call = self.invoke_in_trace(caller, method, args, timeout, placement);
            return Box::pin(crate::otel::request::scope(Some(own), call)).await;
        }
        self.invoke_in_trace(caller, method, args, timeout, placement)
            .await
    }

    /// [`Service::invoke`], in the request's trace (if any).
    async fn invoke_in_trace(
        &self,
        caller: &Caller,
        method: &Resolved,
        args: Vec<Tensor>,
        timeout: Duration,
        placement: &Placement,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let registration = &method.registration;
        // If the caller goes away mid-call (the client disconnected), this future is dropped and
        // the guest with it; the guard still counts the call, as CANCELLED.
        let mut record = CallRecord::new(&self.metrics, registration);
        let bytes_in = crate::otel::enabled().then(|| trace::tensor_bytes(&args));
        let executed = self
            .admit_and_execute(
                caller,
                registration,
                args,
                timeout,
                placement,
                &mut record.queued,
            )
            .await;
        record.counted_elsewhere = executed.counted_elsewhere;
        record.code = executed.result.as_ref().err().map(ServiceError::code);
        drop(record);
        if let Some(bytes_in) = bytes_in {
            trace::call_ended(registration, self.worker_name(), bytes_in, &executed.result);
        }
        answer_with_the_others().await;
        executed.result
    }

    /// This worker's name in its cluster, if it is in one.
    fn worker_name(&self) -> Option<&str> {
        self.peers.as_ref().map(|p| p.this_worker())
    }

    /// [`Service::invoke`]'s checks, admission and execution, in that order; the time admission
    /// took goes into `queued`.
    async fn admit_and_execute(
        &self,
        caller: &Caller,
        registration: &Registration,
        args: Vec<Tensor>,
        timeout: Duration,
        placement: &Placement,
        queued: &mut Duration,
    ) -> Executed {
        if let Err(e) = self.check_placement(placement) {
            return Executed::here(Err(e));
        }
        if let Err(why) = registration.signature.check_args(&args) {
            return Executed::here(Err(ServiceError::Arguments(why)));
        }
        let admitting = Instant::now();
        let admitted = self
            .admission
            .admit(&caller.tenant, &caller.quota, timeout)
            .await;
        *queued = admitting.elapsed();
        trace::admission(admitting, *queued);
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(e) => return Executed::here(Err(e.into())),
        };
        let call = Call {
            registration,
            args,
            limits: admitted.limits,
            placement,
        };
        // The cluster slot `admitted` holds is given back once the call has ended, wherever it ran.
        self.executor.execute(call).await
    }

    /// Run a call another worker placed here: its registration looked up at the version that
    /// worker resolved, then straight to the local executor with the limits the call carries (its
    /// rate, deadline and cluster slot were that worker's to take). Counted here, where it runs.
    ///
    /// # Errors
    /// NOT_FOUND when this worker does not know that version; as [`Service::invoke`] otherwise.
    pub async fn serve_peer(&self, call: PeerCall) -> Result<Vec<Tensor>, ServiceError> {
        let span = trace::peer_call_span(call.trace.as_ref(), &call.name, self.worker_name());
        Box::pin(crate::otel::request::scope(
            span,
            self.serve_peer_in_trace(call),
        ))
        .await
    }

    async fn serve_peer_in_trace(&self, call: PeerCall) -> Result<Vec<Tensor>, ServiceError> {
        let registration = self.lookup(&call.tenant, &call.name, Some(call.version))?;
        let bytes_in = crate::otel::enabled().then(|| trace::tensor_bytes(&call.args));
        let mut record = CallRecord::new(&self.metrics, &registration);
        // Checked by the first worker; checked again because a worker answers for what it runs.
        let result = match registration.signature.check_args(&call.args) {
            Err(why) => Err(ServiceError::Arguments(why)),
            Ok(()) => {
                self.local
                    .run(Call {
                        registration: &registration,
                        args: call.args,
                        limits: call.limits,
                        placement: &Placement::Here,
                    })
                    .await
            }
        };
        record.code = result.as_ref().err().map(ServiceError::code);
        if let Some(bytes_in) = bytes_in {
            trace::call_ended(&registration, self.worker_name(), bytes_in, &result);
        }
        result
    }
}

/// Let the other requests that are ready on this thread run their calls before this call's
/// answer is written. Their answers then leave together, and a client waiting on many
/// connections is woken once for a batch of answers, not once for each: on a virtual machine a
/// wake-up of a sleeping CPU costs the waker about as much as a small call (docs/benchmarks.md,
/// "Answers leave together"). With nothing else ready it costs one look at the I/O driver.
async fn answer_with_the_others() {
    // `yield_now` defers the task until the runtime has run what is ready and polled the
    // driver; a plain self-wake would run it again at once from tokio's LIFO slot.
    tokio::task::yield_now().await;
}

/// Records one call in the metrics when dropped, whether the call finished or was abandoned.
struct CallRecord<'a> {
    metrics: &'a Metrics,
    registration: &'a Registration,
    started: Instant,
    /// How long admission took (zero until it ran).
    queued: Duration,
    /// `None` for OK; stays CANCELLED unless the call finishes.
    code: Option<Code>,
    /// The worker that answered for the call counted it: not counted here too.
    counted_elsewhere: bool,
}

impl<'a> CallRecord<'a> {
    fn new(metrics: &'a Metrics, registration: &'a Registration) -> Self {
        CallRecord {
            metrics,
            registration,
            started: Instant::now(),
            queued: Duration::ZERO,
            code: Some(Code::Cancelled),
            counted_elsewhere: false,
        }
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if self.counted_elsewhere {
            return;
        }
        self.metrics.record_call(
            self.registration.tenant.as_str(),
            &self.registration.name,
            self.registration.version,
            self.code,
            crate::metrics::CallTimes {
                total: self.started.elapsed(),
                queued: self.queued,
            },
        );
    }
}

fn choose_export<'m>(
    module: &'m Module,
    name: &str,
    export: Option<&str>,
) -> Result<&'m MethodSignature, ServiceError> {
    let sigs = module.signatures();
    let names = || {
        sigs.iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match export {
        Some(e) => module.signature(e).ok_or_else(|| {
            ServiceError::Export(format!(
                "the component has no method `{e}`; it exports: {}",
                names()
            ))
        }),
        None if sigs.len() == 1 => Ok(&sigs[0]),
        None => module.signature(name).ok_or_else(|| {
            ServiceError::ExportNeeded(sigs.iter().map(|s| s.name.clone()).collect())
        }),
    }
}

fn method_info(r: &Registration, versions: Vec<u32>) -> MethodInfo {
    MethodInfo {
        name: r.name.clone(),
        version: r.version,
        versions,
        digest: r.digest.to_string(),
        size: r.size,
        created_ms: r.created_ms,
        export: r.export.clone(),
        signature: r.signature.clone(),
    }
}

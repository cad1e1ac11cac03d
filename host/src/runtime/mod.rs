//! The sandbox: wasmtime engine, upload validation, compilation, and calls in fresh instances.
//!
//! Each component is compiled once into an `InstancePre`; every call gets a new `Store` (its own
//! memory, limits and log), instantiates, calls, and drops it. Deadlines use epoch interruption:
//! a ticker thread advances the epoch every [`config::EPOCH_TICK`] and the guest yields to tokio at each
//! tick, so a spinning guest never holds a worker thread and stops within a tick of its deadline.
//! This room never sees HTTP or storage, and decides nothing about how many calls run at once:
//! whoever calls it holds a slot from [`crate::admission`].

mod ahead;
pub mod artifacts;
mod bindings;
mod buffers;
pub mod compiler;
mod compiles;
pub mod config;
mod convert;
mod declared;
mod epoch;
pub mod failure;
pub mod guest_log;
mod huge_pages;
mod idle_code;
pub mod imports;
mod kept;
mod lifted;
pub mod limits;
mod outputs;
pub mod retire;
mod sandbox;
mod validate;
mod wasi_world;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasmrpc_proto::{Code, MethodSignature, Tensor};
use wasmtime::component::{Component, Instance, Linker};
use wasmtime::{Engine, Store};

pub use ahead::calls_in_ready_instances;
pub use config::{Compiler, RuntimeConfig};
pub use failure::GuestFailure;
pub use idle_code::releases as idle_code_releases;
pub use lifted::MalformedValue;
pub use validate::UploadError;

use artifacts::{ArtifactCache, ArtifactKey};
use bindings::TensorFunctionPre;
use compiles::{ABANDONED_COMPILES_MAX, COMPILES_AT_ONCE, CompileGate, CompilePermit, GateError};
use epoch::EpochTicker;
use idle_code::{CodePages, IdleCodeSweeper};
use lifted::{Items, Lifted, SignatureOut};
use outputs::{CallExport, METHOD_INTERFACE, TensorOut};
use sandbox::{CallState, DeadlinePassed, StoreLimits};

/// A compiled component whose signatures have not been asked for yet ([`Runtime::describe`]).
pub struct Compiled {
    pre: TensorFunctionPre<CallState>,
    size: usize,
    /// Its code's mapping, when it was loaded from its artifact file (`runtime/idle_code.rs`).
    code_pages: Option<CodePages>,
    /// The artifact of a fresh compile, to be stored once its registration succeeds.
    artifact: Option<NewArtifact>,
}

impl Compiled {
    /// The artifact of a fresh compile (none when it came from the cache, or there is no
    /// cache): for [`Runtime::keep_artifact`] once the registration it serves is committed.
    pub fn take_artifact(&mut self) -> Option<NewArtifact> {
        self.artifact.take()
    }
}

/// A compiled artifact not stored yet: only a registration that succeeded keeps one on disk.
pub struct NewArtifact {
    key: ArtifactKey,
    bytes: Vec<u8>,
}

impl std::fmt::Debug for NewArtifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewArtifact")
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// A compiled component, ready to be instantiated for each call.
pub struct Module {
    /// This process's name for the compiled component, never reused: an instance made ahead
    /// for it is only ever taken by its own calls (`runtime/ahead.rs`).
    id: u64,
    pre: TensorFunctionPre<CallState>,
    call: CallExport,
    signatures: Vec<MethodSignature>,
    size: usize,
    /// Failed attempts to make its instances ahead (`runtime/ahead.rs`).
    ahead_failures: Arc<AtomicU32>,
    /// Its code's pages, when mapped from its artifact file: handed back while it is idle
    /// (`runtime/idle_code.rs`).
    code_pages: Option<CodePages>,
}

/// Compiles started in this process (loads from the artifact cache are not compiles): whether a
/// compile was skipped is observable in `/metrics` (`wasmrpc_compiles_total`).
static COMPILES_STARTED: AtomicU64 = AtomicU64::new(0);

/// Compiles started in this process.
pub fn compiles_started() -> u64 {
    COMPILES_STARTED.load(Ordering::Relaxed)
}

/// The next [`Module`]'s id (0 is no module).
static NEXT_MODULE_ID: AtomicU64 = AtomicU64::new(1);

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("signatures", &self.signatures)
            .field("size", &self.size)
            .finish()
    }
}

impl Module {
    /// The methods the component exports, as it described them at load.
    pub fn signatures(&self) -> &[MethodSignature] {
        &self.signatures
    }

    /// The signature of one method.
    pub fn signature(&self, method: &str) -> Option<&MethodSignature> {
        self.signatures.iter().find(|s| s.name == method)
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

/// Why loading a compiled component failed. The pool's per-instance limits are checked at load,
/// as `Component::new` would: the component's fault. Anything else is the server's own.
fn load_error(e: wasmtime::Error) -> UploadError {
    let message = format!("{e:#}");
    if message.contains("pooling allocator") {
        UploadError::Invalid(message)
    } else {
        UploadError::Internal(format!("loading the compiled component: {message}"))
    }
}

/// When a call's steps happened, for its trace (`otel/`).
#[derive(Debug, Default)]
pub struct Phases {
    /// Whether to keep the guest's log (for the trace's events).
    pub keep_log: bool,
    /// When the call began on the thread that runs it (admitted, and on its lane), from the
    /// clock reading its deadline takes anyway: the trace reads no clock of its own here.
    pub began: Option<Instant>,
    /// When the instance was ready (the call's guest code about to run).
    pub instantiated: Option<Instant>,
    /// When the guest returned, failed or ran out of time.
    pub finished: Option<Instant>,
    /// The guest's log (its head), and the bytes dropped past the limit, if `keep_log` and it
    /// wrote any.
    pub log: Option<(String, usize)>,
}

/// The wasmtime engine and everything shared by all calls.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    config: RuntimeConfig,
    compiles: CompileGate,
    artifacts: Option<ArtifactCache>,
    idle_code: IdleCodeSweeper,
    _ticker: EpochTicker,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .finish()
    }
}

/// What a guest's imports are linked to: the tensor package's log, the SDK's panic report, and
/// the WASI 0.2 world of `runtime/wasi_world.rs` (every interface `runtime/imports.rs` allows).
fn guest_linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .map_err(|e| anyhow::anyhow!("linking WASI: {e:?}"))?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
        .map_err(|e| anyhow::anyhow!("linking WASI HTTP: {e:?}"))?;
    bindings::wasmrpc::tensor::log::add_to_linker::<CallState, wasmtime::component::HasSelf<_>>(
        &mut linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("linking the log interface: {e:?}"))?;
    bindings::panic::report::add_to_linker::<CallState, wasmtime::component::HasSelf<_>>(
        &mut linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("linking the panic report interface: {e:?}"))?;
    Ok(linker)
}

/// `guest` (a guest's instantiation or call in `store`), ended at the store's deadline even
/// while the guest waits in a host call. Epoch interruption stops a guest only in its own
/// code; one blocked in `poll` on an hour's `subscribe-duration` is a pending future that no
/// tick reaches. Dropping it there is what wasmtime's async calls allow (the fiber unwinds; the
/// store is dropped, never called again). `None`: the deadline came first.
async fn within_deadline<F: Future>(store_deadline: Instant, guest: F) -> Option<F::Output> {
    // The timer is only registered if the guest waits: a call that completes in its first poll
    // pays for none.
    tokio::time::timeout_at(tokio::time::Instant::from_std(store_deadline), guest)
        .await
        .ok()
}

impl Runtime {
    /// An engine configured with `config`'s limits, with its epoch ticker running.
    ///
    /// # Errors
    /// The engine could not be created (for example, the pooling allocator could not reserve its
    /// address space: set `pooling: false`).
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Self> {
        let before = huge_pages::wanted(&config).then(huge_pages::mappings);
        let engine = Engine::new(&epoch::engine_config(&config))
            .map_err(|e| anyhow::anyhow!("creating the wasm engine: {e:?}"))?;
        if let Some(before) = before {
            huge_pages::advise_new_pool(&before, &config);
        }
        let linker = guest_linker(&engine)?;
        let artifacts = match &config.artifact_cache {
            None => None,
            Some(dir) => Some(ArtifactCache::open(dir, &engine).map_err(|e| {
                anyhow::anyhow!("opening the artifact cache {}: {e}", dir.display())
            })?),
        };
        let ticker = EpochTicker::start(engine.clone());
        Ok(Runtime {
            engine,
            linker,
            compiles: CompileGate::new(COMPILES_AT_ONCE, ABANDONED_COMPILES_MAX),
            artifacts,
            idle_code: IdleCodeSweeper::start(config.release_idle_code_after),
            config,
            _ticker: ticker,
        })
    }

    /// The limits in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Validate and compile a component `owner` (a tenant) uploaded or registered; no guest
    /// code runs yet. The compile is skipped only for an artifact of `owner`'s own: another
    /// tenant's identical bytes compile again, so the time taken tells nobody what others
    /// uploaded.
    ///
    /// # Errors
    /// [`UploadError`] saying what is wrong: not wasm, a core module, a precompiled artifact, a
    /// forbidden import (named) or the wrong world (both before compiling), a compile past its
    /// time limit, or too many abandoned compiles still running ([`UploadError::CompilesBusy`]).
    pub async fn compile(&self, bytes: Arc<Vec<u8>>, owner: &str) -> Result<Compiled, UploadError> {
        validate::check_bytes(&bytes, self.config.max_component_bytes)?;
        validate::check_static_limits(&bytes, self.config.memory_per_call)?;
        declared::check_declared(&bytes)?;
        let cached = self.artifacts.as_ref().map(|cache| {
            (
                cache,
                ArtifactKey::new(owner, ArtifactCache::digest(&bytes)),
            )
        });
        if let Some((cache, key)) = &cached
            && let Some(artifact) = cache.open_file(key)
        {
            // Mapped from its file: code and memory images are pages of the file, not a copy
            // (`runtime/artifacts.rs`).
            match self.deserialize_file(&artifact) {
                Ok(component) => {
                    let mut compiled = self.prepare(&component, bytes.len(), None)?;
                    compiled.code_pages = Some(CodePages::of_file(&component));
                    return Ok(compiled);
                }
                // Made by another build of the same settings, say: compile it again below.
                Err(_) => cache.remove(key),
            }
        }
        let permit = self.compiles.enter(owner).await.map_err(|e| match e {
            GateError::Closed => UploadError::Internal("runtime is shutting down".into()),
            GateError::Busy { abandoned } => UploadError::CompilesBusy { abandoned },
        })?;
        COMPILES_STARTED.fetch_add(1, Ordering::Relaxed);
        let (component, artifact) = match &self.config.compiler {
            Compiler::InProcess => {
                let component = self.compile_in_process(bytes.clone(), permit).await?;
                let artifact = cached.as_ref().and_then(|_| component.serialize().ok());
                (component, artifact)
            }
            Compiler::ChildProcess { program } => {
                let artifact = compiler::compile_in_child(program, &self.config, &bytes).await;
                // The child has exited (or been killed): its slot and thread are free.
                drop(permit);
                let artifact = artifact?;
                let component = self.deserialize(&artifact)?;
                (component, cached.is_some().then_some(artifact))
            }
        };
        let artifact = cached
            .zip(artifact)
            .map(|((_, key), bytes)| NewArtifact { key, bytes });
        self.prepare(&component, bytes.len(), artifact)
    }

    /// Delete `owner`'s stored artifact of the component whose sha256 is `source`.
    pub fn forget_artifact(&self, owner: &str, source: [u8; 32]) {
        if let Some(cache) = &self.artifacts {
            cache.remove(&ArtifactKey::new(owner, source));
        }
    }

    /// Delete every stored artifact but those of `used`, the (owner, component sha256) pairs of
    /// the registrations that exist. `used` is called while no artifact is being written.
    pub fn sweep_artifacts(&self, used: impl FnOnce() -> Vec<(String, [u8; 32])>) -> usize {
        let Some(cache) = &self.artifacts else {
            return 0;
        };
        cache.sweep(|| {
            used()
                .into_iter()
                .map(|(owner, source)| ArtifactKey::new(&owner, source))
                .collect()
        })
    }

    /// Load a stored artifact by mapping its file, checked by the cache before (its MAC), through
    /// `/proc/self/fd` of the very descriptor that was checked.
    fn deserialize_file(&self, file: &std::fs::File) -> Result<Component, UploadError> {
        use std::os::fd::AsRawFd as _;
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        // SAFETY: as `deserialize`: the file is this server's own artifact, owner-only, whose
        // MAC was just checked; the server never writes an artifact file in place (a new one
        // is written under a temporary name and renamed), so the mapping does not change.
        unsafe { Component::deserialize_file(&self.engine, &path) }.map_err(load_error)
    }

    /// Load an artifact of this server's own compiler: from the `__compile` child, or from the
    /// artifact cache, where only this server writes what that child or `serialize` made.
    fn deserialize(&self, artifact: &[u8]) -> Result<Component, UploadError> {
        // SAFETY: the artifact was made by `wasmrpc __compile` (or `Component::serialize`) of
        // this same binary family with this engine's settings, never by a tenant (uploads of
        // precompiled artifacts are refused by `check_bytes`); it comes over a pipe from the
        // child. deserialize checks the engine's compatibility and refuses a mismatch.
        unsafe { Component::deserialize(&self.engine, artifact) }.map_err(load_error)
    }

    /// The last checks of a compiled component (its imports, its world), ready to instantiate.
    fn prepare(
        &self,
        component: &Component,
        size: usize,
        artifact: Option<NewArtifact>,
    ) -> Result<Compiled, UploadError> {
        validate::check_imports(component, &self.engine)?;
        let instance_pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| UploadError::Invalid(format!("{e:#}")))?;
        let pre = TensorFunctionPre::new(instance_pre)
            .map_err(|e| UploadError::WrongWorld(format!("{e:#}")))?;
        Ok(Compiled {
            pre,
            size,
            code_pages: None,
            artifact,
        })
    }

    /// Compile on a thread of this process. It cannot be stopped: past its timeout the upload
    /// gets its answer and the compile goes on at the lowest priority, holding a thread permit.
    async fn compile_in_process(
        &self,
        bytes: Arc<Vec<u8>>,
        permit: CompilePermit,
    ) -> Result<Component, UploadError> {
        let CompilePermit { slot, thread } = permit;
        let engine = self.engine.clone();
        let source = bytes.clone();
        let priority = compiles::Priority::default();
        let lowered = priority.clone();
        let (done, compiled) = tokio::sync::oneshot::channel();
        // A thread of its own, not tokio's blocking pool: an abandoned compile's thread gets a
        // lower priority, which it could not give back before returning to a pool. The thread
        // permit goes with the compile, which cannot be interrupted: one that outlives its
        // timeout keeps it until it really ends, so abandoned compiles cannot pile up.
        std::thread::Builder::new()
            .name("wasmrpc-compile".into())
            .spawn(move || {
                lowered.started();
                let component = Component::new(&engine, &source[..]);
                drop(thread);
                let _ = done.send(component);
            })
            .map_err(|e| UploadError::Internal(format!("starting a compile thread: {e}")))?;
        let component = match tokio::time::timeout(self.config.compile_timeout, compiled).await {
            Err(_) => {
                // Nobody waits for this compile any more: its slot is free for the next one now,
                // and it only gets CPU time that calls and live compiles leave over.
                drop(slot);
                priority.abandon();
                return Err(UploadError::CompileTimeout(self.config.compile_timeout));
            }
            Ok(Err(_)) => {
                return Err(UploadError::Internal(
                    "the compile thread ended without a result".into(),
                ));
            }
            Ok(Ok(Err(e))) => return Err(UploadError::Invalid(format!("{e:#}"))),
            Ok(Ok(Ok(c))) => c,
        };
        drop(slot);
        Ok(component)
    }

    /// Ask a compiled component for its signatures (running its code, within
    /// [`RuntimeConfig::signatures_deadline`]) and check them. The caller holds a call slot.
    ///
    /// # Errors
    /// [`UploadError::Signatures`] when the guest fails, [`UploadError::MalformedSignatures`]
    /// when what it returned cannot be read, [`UploadError::BadSignatures`] for signatures that
    /// cannot be served.
    pub async fn describe(&self, compiled: Compiled) -> Result<Arc<Module>, UploadError> {
        let signatures =
            self.signatures_of(&compiled.pre)
                .await
                .map_err(|failure| match failure {
                    GuestFailure::Malformed { value, .. } => {
                        UploadError::MalformedSignatures(value)
                    }
                    other => UploadError::Signatures(other),
                })?;
        validate::check_signatures(&signatures)?;
        let call = CallExport::find(compiled.pre.instance_pre().component()).ok_or_else(|| {
            UploadError::Internal("the component's `call` export was not found".into())
        })?;
        let module = Arc::new(Module {
            id: NEXT_MODULE_ID.fetch_add(1, Ordering::Relaxed),
            call,
            pre: compiled.pre,
            signatures,
            size: compiled.size,
            ahead_failures: Arc::new(AtomicU32::new(0)),
            code_pages: compiled.code_pages,
        });
        self.idle_code.track(&module);
        Ok(module)
    }

    async fn signatures_of(
        &self,
        pre: &TensorFunctionPre<CallState>,
    ) -> Result<Vec<MethodSignature>, GuestFailure> {
        let mut store =
            self.new_store(self.config.signatures_deadline, self.config.memory_per_call);
        let deadline_at = store.data().deadline_at;
        let result = within_deadline(deadline_at, async {
            // `signatures` typed with the runtime's own result types, not the generated
            // bindings', so a value that does not lift names where it is malformed
            // (`runtime/lifted.rs`). Once an upload: the lookup and type check cost nothing here.
            let instance = pre.instance_pre().instantiate_async(&mut store).await?;
            let interface = instance
                .get_export_index(&mut store, None, METHOD_INTERFACE)
                .ok_or_else(|| wasmtime::format_err!("no `{METHOD_INTERFACE}` export"))?;
            let index = instance
                .get_export_index(&mut store, Some(&interface), "signatures")
                .ok_or_else(|| wasmtime::format_err!("no `signatures` export"))?;
            let signatures = instance
                .get_typed_func::<(), (Lifted<Items<SignatureOut>>,)>(&mut store, &index)?;
            let called = signatures.call_async(&mut store, ()).await;
            Ok(called.map(|(Lifted(Items(sigs)),)| sigs))
        })
        .await;
        let returned_by = "the component's signatures()";
        let deadline = self.config.signatures_deadline;
        let Some(result) = result else {
            return Err(GuestFailure::Deadline {
                deadline_ms: deadline.as_millis() as u64,
            });
        };
        match result {
            Ok(Ok(sigs)) => Ok(sigs.into_iter().map(convert::signature_from_wit).collect()),
            // Instantiating, or finding the export, failed.
            Err(e) => Err(self.classify(e, &store, deadline, returned_by)),
            Ok(Err(e)) => Err(self.classify_export_call(e, &store, deadline, returned_by)),
        }
    }

    /// Call `method` of `module` with `args` in a fresh instance, ending `deadline` after
    /// `started` (the time spent waiting for a slot counts; a failure reports the whole deadline),
    /// with at most `memory` bytes of linear memory (capped by the server's own limit).
    ///
    /// The arguments must already fit the method's signature, and the caller holds a call slot.
    /// The outputs are checked: malformed, off-signature or oversized outputs are refused.
    ///
    /// # Errors
    /// A [`GuestFailure`] classifying what went wrong.
    pub async fn call(
        &self,
        module: &Module,
        method: &str,
        args: Vec<Tensor>,
        deadline: Duration,
        started: Instant,
        memory: usize,
    ) -> Result<Vec<Tensor>, GuestFailure> {
        let mut phases = Phases::default();
        self.call_in_phases(module, method, args, deadline, started, memory, &mut phases)
            .await
    }

    /// [`Runtime::call`], noting in `phases` when the instance was ready and the guest done (and
    /// its log, when `phases.keep_log` asks), for the call's trace.
    ///
    /// # Errors
    /// As [`Runtime::call`].
    #[allow(clippy::too_many_arguments)]
    pub async fn call_in_phases(
        &self,
        module: &Module,
        method: &str,
        args: Vec<Tensor>,
        deadline: Duration,
        started: Instant,
        memory: usize,
        phases: &mut Phases,
    ) -> Result<Vec<Tensor>, GuestFailure> {
        let memory = memory.min(self.config.memory_per_call);
        if let Some(pages) = &module.code_pages {
            pages.touch(started);
        }
        let began = Instant::now();
        phases.began = Some(began);
        let remaining = deadline.saturating_sub(began.saturating_duration_since(started));
        // An instance this thread made ahead, or a new one (`runtime/ahead.rs`); one made
        // ahead that holds more memory than this call's budget is dropped here.
        let (mut store, instance) =
            match retire::take_ready(module.id).and_then(|r| r.arm(remaining, memory)) {
                Some((store, instance)) => (store, Some(instance)),
                None => (self.new_store(remaining, memory), None),
            };
        let result = self
            .call_in(&mut store, instance, module, method, args, deadline, phases)
            .await;
        // Reset after the answer is out where this thread can (`runtime/retire.rs`), and make
        // the next instance ahead when the thread keeps calling this component.
        let small = store.data().limiter.memory_used() <= self.config.pool_keep_resident_bytes;
        let again = retire::calling(module.id);
        let next = (again && retire::shelving()).then(|| ahead::Plan {
            module_id: module.id,
            engine: self.engine.clone(),
            pre: module.pre.instance_pre().clone(),
            limits: self.store_limits(),
            memory: self.config.memory_per_call,
            failures: module.ahead_failures.clone(),
        });
        retire::shelve(store, small, next);
        result
    }

    /// [`Runtime::call`] in `store`, in `instance` if one was made ahead.
    #[allow(clippy::too_many_arguments)]
    async fn call_in(
        &self,
        store: &mut Store<CallState>,
        instance: Option<Instance>,
        module: &Module,
        method: &str,
        args: Vec<Tensor>,
        deadline: Duration,
        phases: &mut Phases,
    ) -> Result<Vec<Tensor>, GuestFailure> {
        let wit_args: Vec<_> = args.iter().map(convert::tensor_to_wit).collect();
        let deadline_at = store.data().deadline_at;
        let result = within_deadline(deadline_at, async {
            // The instance without the generated bindings' per-instance lookups and type checks,
            // and `call` with its outputs copied out as they are lifted (`runtime/outputs.rs`).
            let instance = match instance {
                Some(instance) => instance,
                None => {
                    module
                        .pre
                        .instance_pre()
                        .instantiate_async(&mut *store)
                        .await?
                }
            };
            phases.instantiated = Some(Instant::now());
            let call = module.call.get(&instance, &mut *store)?;
            let called = call.call_async(&mut *store, (method, &wit_args)).await;
            Ok(called.map(|(Lifted(outputs),)| outputs))
        })
        .await;
        phases.finished = Some(Instant::now());
        drop(wit_args);
        drop(args);
        let log = &store.data().log;
        let (text, dropped) = log.contents();
        if phases.keep_log && !text.is_empty() {
            phases.log = Some((text.clone(), dropped));
        }
        if !text.is_empty() {
            // The head, and after a flood also the end the head had no room for.
            let end = log.dropped_end();
            tracing::debug!(method, dropped_bytes = dropped, guest_log = %text.trim_end(), guest_log_end = %end, "guest log");
        }
        let returned_by = || format!("method `{method}`");
        let Some(result) = result else {
            return Err(GuestFailure::Deadline {
                deadline_ms: deadline.as_millis() as u64,
            });
        };
        let outputs = match result {
            Ok(Ok(Ok(outputs))) => outputs.into_inner().0,
            Ok(Ok(Err(guest_error))) => {
                let (code, message) = convert::guest_error(guest_error.into_inner());
                return Err(GuestFailure::Guest { code, message });
            }
            // The call itself failed.
            Ok(Err(e)) => {
                return Err(self.classify_export_call(e, store, deadline, &returned_by()));
            }
            // Instantiating, or finding the export, failed.
            Err(e) => return Err(self.classify(e, store, deadline, &returned_by())),
        };
        self.check_outputs(module, method, outputs)
    }

    /// The guest's outputs as tensors, refused when oversized, malformed or off their declared
    /// signature.
    fn check_outputs(
        &self,
        module: &Module,
        method: &str,
        outputs: Vec<TensorOut>,
    ) -> Result<Vec<Tensor>, GuestFailure> {
        let total: usize = outputs.iter().map(|t| t.data.get().byte_len()).sum();
        if total > self.config.max_output_bytes {
            return Err(GuestFailure::BadOutput {
                code: Code::ResourceExhausted,
                message: format!(
                    "method `{method}` returned {total} bytes of output, over the limit of {} bytes",
                    self.config.max_output_bytes
                ),
            });
        }
        let bad = |message: String| GuestFailure::BadOutput {
            code: Code::Internal,
            message,
        };
        let tensors = outputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let (dtype, shape) = (t.dtype.into_inner(), t.shape.into_inner());
                let data = t.data.into_inner().into_bytes();
                convert::tensor_from_wit(dtype, shape, data).map_err(|e| {
                    bad(format!(
                        "method `{method}` returned a malformed output {i}: {e}"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(sig) = module.signature(method) {
            if sig.outputs.len() != tensors.len() {
                return Err(bad(format!(
                    "method `{method}` returned {} outputs but declares {}",
                    tensors.len(),
                    sig.outputs.len()
                )));
            }
            for (i, (spec, t)) in sig.outputs.iter().zip(&tensors).enumerate() {
                if let Some(why) = spec.mismatch(t) {
                    return Err(bad(format!(
                        "method `{method}` output {i} (`{}`) does not match its declared spec: {why}",
                        spec.name
                    )));
                }
            }
        }
        Ok(tensors)
    }

    fn new_store(&self, deadline: Duration, memory: usize) -> Store<CallState> {
        sandbox::new_store(&self.engine, &self.store_limits(), deadline, memory)
    }

    /// The server's limits for a call's store.
    fn store_limits(&self) -> StoreLimits {
        let c = &self.config;
        StoreLimits {
            table_elements: c.table_elements,
            max_core_instances: c.max_core_instances as usize,
            max_tables: c.max_tables as usize,
            max_memories: c.max_memories as usize,
            guest_log_bytes: c.guest_log_bytes,
        }
    }

    /// Turn a wasmtime error into a [`GuestFailure`]; the limiter's record wins over the trap it
    /// caused, so a memory bomb is RESOURCE_EXHAUSTED even when the guest aborts on its own.
    /// `returned_by` names whose value it was, should the guest's returned value be malformed.
    /// The failure of a call of a guest's export, its instance made: as [`Runtime::classify`],
    /// except that an error of no type the runtime knows is the guest's own malformed value.
    ///
    /// Why that holds: with the pooling allocator (the default) the call's fiber stack and
    /// memories come from slots reserved at start (a slot that cannot be had is
    /// `PoolConcurrencyLimitError`, classified), and running out of host memory is
    /// `wasmtime::OutOfMemory`, kept the host's. What is left to fail untyped is the canonical ABI
    /// at the guest's edge: the return area's own pointer, which wasmtime checks before the
    /// runtime's result types can say where (`runtime/lifted.rs`); what the guest's `cabi_realloc`
    /// returned while the host lowered the arguments; the arguments the guest passed an import.
    /// All of them the component's doing. Without pooling (an on-demand fiber stack whose `mmap`
    /// can fail untyped) the rule would not hold, and the error stays the host's.
    fn classify_export_call(
        &self,
        error: wasmtime::Error,
        store: &Store<CallState>,
        deadline: Duration,
        returned_by: &str,
    ) -> GuestFailure {
        let problem = format!("{error:#}");
        let out_of_memory = error.is::<wasmtime::OutOfMemory>();
        match self.classify(error, store, deadline, returned_by) {
            GuestFailure::Internal(_) if self.config.pooling && !out_of_memory => {
                GuestFailure::Malformed {
                    returned_by: returned_by.to_owned(),
                    value: MalformedValue::whole(problem),
                }
            }
            failure => failure,
        }
    }

    fn classify(
        &self,
        error: wasmtime::Error,
        store: &Store<CallState>,
        deadline: Duration,
        returned_by: &str,
    ) -> GuestFailure {
        let state = store.data();
        if error.is::<DeadlinePassed>()
            || matches!(
                error.downcast_ref::<wasmtime::Trap>(),
                Some(wasmtime::Trap::Interrupt)
            )
        {
            return GuestFailure::Deadline {
                deadline_ms: deadline.as_millis() as u64,
            };
        }
        if state.limiter.memory_exceeded {
            return GuestFailure::Memory {
                cap: state.limiter.memory_cap(),
            };
        }
        // The end of everything written, not of the capped head: a panic message comes last.
        let guest_output = state.log.tail(guest_log::TAIL_BYTES);
        if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
            let reason = match trap {
                wasmtime::Trap::StackOverflow => format!(
                    "{trap} (the wasm stack limit is {} bytes)",
                    self.config.max_wasm_stack
                ),
                _ => trap.to_string(),
            };
            return GuestFailure::Trap {
                reason,
                guest_output,
            };
        }
        if let Some(limit) = error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
            return GuestFailure::Capacity(format!("no free instance slot: {limit}"));
        }
        if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            // `std::process::exit` (or an abort through WASI): the guest ended itself.
            return GuestFailure::Trap {
                reason: format!("the guest exited with status {}", exit.0),
                guest_output,
            };
        }
        // Typed by the runtime's own result types, whose lift alone makes it: the guest's
        // returned value, not the host, is at fault (`runtime/lifted.rs` says why not by text,
        // nor by when the error came).
        if let Some(value) = error.downcast_ref::<MalformedValue>() {
            return GuestFailure::Malformed {
                returned_by: returned_by.to_owned(),
                value: value.clone(),
            };
        }
        GuestFailure::Internal(format!(
            "instantiating or calling the guest failed: {error:#}"
        ))
    }
}

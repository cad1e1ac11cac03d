//! Every limit the sandbox enforces, named in one place with the reason for its default.

use std::time::Duration;

pub use super::compiler::Compiler;

/// How often the epoch ticker advances; a guest past its deadline stops within about one tick,
/// and a running guest yields its worker thread at every tick (once it has run
/// [`FIRST_TURN_AT_LEAST`]). 2 ms rather than 10 keeps other tenants' latency close to its
/// baseline while guests spin (see docs/limits.md); the ticker's own cost is one wake-up per
/// tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(2);

/// How long a call runs before an epoch tick makes it yield. A tick lands anywhere in a call,
/// and a call that yields in its first turn on an HTTP thread is handed to its lane
/// (`threads/lanes.rs`): two thread wake-ups, which took a scalar call from about 70 µs to
/// about 290 µs. Without this, one call in a few hundred was a quick call a tick happened to
/// land in (docs/benchmarks.md, "A tick in a quick call"). A guest still yields within this
/// plus one tick.
pub const FIRST_TURN_AT_LEAST: Duration = Duration::from_micros(500);

/// MiB of each pooled linear memory kept resident between calls (`--keep-resident-mib`): room
/// for a call on a 16 MiB tensor with the guest's own stack and heap beside it. 1 MiB (the
/// earlier default) made such a call fault 4,096 fresh pages in again every time: 9.8 ms in
/// process against 4.7–5.1 ms with 32 (docs/benchmarks.md, "Pages kept for the next call").
pub const DEFAULT_KEEP_RESIDENT_MIB: usize = 32;

/// Seconds a component loaded from its artifact file may go without a call before its code's
/// pages are handed back (`--release-idle-code-s`). A Python component's are about 25 MiB, and
/// mapping them again costs its next call about a millisecond (docs/benchmarks.md, issue 33).
pub const DEFAULT_RELEASE_IDLE_CODE_S: u64 = 30;

/// Limits and sizes of the sandbox. Each field is one named limit; see `docs/limits.md`.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Deadline of a call that asks for none (`timeout_ms: 0`).
    pub default_deadline: Duration,
    /// The most a call may ask for; longer requests are cut to this.
    pub max_deadline: Duration,
    /// Linear memory one call may hold, summed over all memories of its instance.
    pub memory_per_call: usize,
    /// Wasm stack one call may use; deep recursion traps past it.
    pub max_wasm_stack: usize,
    /// Elements per table: bounds the memory a guest can take through tables.
    pub table_elements: usize,
    /// Core instances one component may create.
    pub max_core_instances: u32,
    /// Linear memories one component may define.
    pub max_memories: u32,
    /// Tables one component may define.
    pub max_tables: u32,
    /// Bytes of output tensors one call may return.
    pub max_output_bytes: usize,
    /// Bytes of guest log (stdout, stderr and the log interface) kept per call.
    pub guest_log_bytes: usize,
    /// Size of an uploaded component.
    pub max_component_bytes: usize,
    /// Time compiling one component may take.
    pub compile_timeout: Duration,
    /// Where components are compiled: in a child process for `wasmrpc serve`.
    pub compiler: Compiler,
    /// Address space one compile may use in its child process; past it the upload is refused
    /// with RESOURCE_EXHAUSTED. Cranelift needs a few hundred bytes per byte of a large
    /// function; the static code limits keep every accepted component well inside.
    pub compile_memory: usize,
    /// Time a component's `signatures()` may take at registration.
    pub signatures_deadline: Duration,
    /// Calls running at once; more wait (within their deadline) for a slot.
    pub max_concurrent_calls: usize,
    /// Calls that may wait for a slot; past this a call is refused at once with RESOURCE_EXHAUSTED.
    pub max_queued_calls: usize,
    /// Use wasmtime's pooling allocator (pre-reserved slots: fast instantiation).
    pub pooling: bool,
    /// Bytes of each pooled memory (and up to a page of each table) that are reset with
    /// `memset` when a slot is reused, instead of being handed back to the kernel: the pages the
    /// last call dirtied with `pool_pagemap_scan`, else the first bytes (see docs/benchmarks.md).
    /// A call that moves megabytes then finds its slot's pages already there, zeroed, instead of
    /// faulting every 4 KiB page in again; what stays resident is bounded by the slots ever in
    /// use at once plus `pool_max_unused_warm_slots`, each at most this much.
    pub pool_keep_resident_bytes: usize,
    /// Slots (of instances, memories and tables) that may sit used-but-idle before a new
    /// instance takes one of them rather than a never-used slot: with
    /// `pool_keep_resident_bytes`, the bound on the memory kept resident between bursts.
    pub pool_max_unused_warm_slots: u32,
    /// How many pooled memories and tables are handed back to the kernel in one batch: each
    /// batch costs one round of TLB shootdowns across CPUs instead of one per call (see
    /// docs/benchmarks.md). A slot waiting in a batch is not reused before it is reset.
    pub pool_decommit_batch: usize,
    /// Find the pages a call dirtied with Linux's `PAGEMAP_SCAN` (kernel 6.7+; ignored where it
    /// is missing) and reset only those, up to `pool_keep_resident_bytes` anywhere in the
    /// memory, instead of the first `pool_keep_resident_bytes` bytes whether used or not.
    pub pool_pagemap_scan: bool,
    /// Ask Linux for transparent huge pages in the pool of linear memories, so a call that
    /// moves megabytes faults its memory in 2 MiB at a time (`runtime/huge_pages.rs`). Off by
    /// default: on the virtual machines measured, a freed huge page handed back to the host made
    /// one large call in four wait about 30 ms for it (docs/benchmarks.md, row P4).
    /// `WASMRPC_HUGE_PAGES=1` or `0` in the environment overrides it.
    pub pool_huge_pages: bool,
    /// Where compiled components are kept on disk (`runtime/artifacts.rs`), so a restart
    /// loads them instead of compiling again; `None` keeps none. `wasmrpc serve` uses
    /// `artifacts/` in its data directory.
    pub artifact_cache: Option<std::path::PathBuf>,
    /// How long a component loaded from its artifact file may go without a call before its
    /// code's pages are handed back to the kernel (`runtime/idle_code.rs`): they stay in the
    /// page cache, and its next call maps them again. `None` never hands them back.
    pub release_idle_code_after: Option<Duration>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            default_deadline: Duration::from_secs(10),
            max_deadline: Duration::from_secs(300),
            memory_per_call: 256 << 20,
            max_wasm_stack: 1 << 20,
            table_elements: 100_000,
            max_core_instances: 64,
            max_memories: 8,
            max_tables: 8,
            max_output_bytes: 64 << 20,
            guest_log_bytes: 64 << 10,
            max_component_bytes: 32 << 20,
            compile_timeout: Duration::from_secs(60),
            compiler: Compiler::InProcess,
            compile_memory: 1 << 30,
            signatures_deadline: Duration::from_secs(5),
            max_concurrent_calls: 64,
            max_queued_calls: 4096,
            pooling: true,
            pool_keep_resident_bytes: DEFAULT_KEEP_RESIDENT_MIB << 20,
            pool_max_unused_warm_slots: 8,
            pool_decommit_batch: 8,
            pool_pagemap_scan: true,
            pool_huge_pages: false,
            artifact_cache: None,
            release_idle_code_after: Some(Duration::from_secs(DEFAULT_RELEASE_IDLE_CODE_S)),
        }
    }
}

//! The engine's configuration and the epoch ticker that drives every deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::config::{EPOCH_TICK, RuntimeConfig};

/// Bytes of native stack a guest's fiber gets: the wasm stack limit plus room for host calls.
fn async_stack_size(config: &RuntimeConfig) -> usize {
    config.max_wasm_stack + (1 << 20)
}

/// Bytes of each pooled table reset in place: one page.
const TABLE_KEEP_RESIDENT: usize = 4096;

/// The wasmtime configuration for `config`: component model, async calls, epoch interruption,
/// stack limit, and (by default) the pooling allocator sized for the concurrency limit.
pub fn engine_config(config: &RuntimeConfig) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(config.max_wasm_stack)
        .async_stack_size(async_stack_size(config))
        // Copy-on-write memory images: an instance maps its module's initialised memory
        // instead of copying it, which for a Python or JavaScript component is tens of MiB
        // of pre-initialised interpreter per call (docs/benchmarks.md, issue 33). Each image
        // of a module loaded from bytes is a memfd held as long as the module; a registered
        // component is served from its mapped artifact file instead, whose pages the image
        // is (`runtime/kept.rs`): one descriptor per registered component either way, measured
        // in docs/limits.md; `cli/open_files.rs` raises the soft limit to the hard one at start.
        // A pooled slot is reset to its image between calls (the marker tests).
        .memory_init_cow(true)
        // Each compile on its own thread, not on rayon's shared pool: a compile abandoned past
        // its timeout cannot be stopped, and on the pool its functions would hold the pool's
        // workers and make every later compile queue behind them. On its own thread it only
        // holds that thread, whose priority is lowered (`runtime/compiles.rs`). Two compiles
        // still run at once (`COMPILES_AT_ONCE`). The `__compile` child, which is killed
        // with all its threads when abandoned, turns it back on (`runtime/compiler.rs`).
        .parallel_compilation(false);
    if config.pooling {
        let instances = pool_instances(config);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(instances)
            .total_core_instances(instances * config.max_core_instances)
            .total_memories(instances * config.max_memories)
            .total_tables(instances * config.max_tables)
            .total_stacks(instances)
            .max_core_instances_per_component(config.max_core_instances)
            .max_memories_per_component(config.max_memories)
            .max_tables_per_component(config.max_tables)
            .max_memories_per_module(config.max_memories)
            .max_tables_per_module(config.max_tables)
            .table_elements(config.table_elements)
            .max_memory_size(config.memory_per_call)
            // Reset the pages a call dirtied with memset instead of handing them back with
            // madvise: cheaper for small heaps, and a large call's next one finds its pages
            // there instead of faulting 4 KiB at a time. Just as clean (the marker tests).
            .linear_memory_keep_resident(config.pool_keep_resident_bytes)
            // Few idle slots kept warm: past them a new instance reuses one rather than
            // dirtying a never-used slot, which bounds the memory kept resident.
            .max_unused_warm_slots(config.pool_max_unused_warm_slots)
            // A guest's tables mostly fit one page: one page reset with memset, no
            // PAGEMAP_SCAN ioctl per table (which a larger value would ask for).
            .table_keep_resident(config.pool_keep_resident_bytes.min(TABLE_KEEP_RESIDENT))
            .decommit_batch_size(config.pool_decommit_batch.max(1))
            .pagemap_scan(if config.pool_pagemap_scan {
                Enabled::Auto
            } else {
                Enabled::No
            });
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    c
}

/// Component instances the pool holds: one for every running call, a few for registrations'
/// `signatures()` calls, and one for each store of a finished call not yet reset
/// (`runtime/retire.rs`).
fn pool_instances(config: &RuntimeConfig) -> u32 {
    config.max_concurrent_calls as u32 + 4 + super::retire::SHELVED_AT_MOST as u32
}

/// The fewest bytes the pool of linear memories reserves: every memory of every instance at
/// its largest (wasmtime adds guard regions, so the real reservation is larger).
pub fn memory_pool_bytes(config: &RuntimeConfig) -> usize {
    pool_instances(config) as usize * config.max_memories as usize * config.memory_per_call
}

/// A thread that advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Start ticking `engine`.
    pub fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasmrpc-epoch".into())
            .spawn(move || {
                // Every deadline and every guest's turn hangs on this thread's ticks.
                crate::threads::priority::prefer_on_wakeup();
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawning the epoch ticker thread");
        EpochTicker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

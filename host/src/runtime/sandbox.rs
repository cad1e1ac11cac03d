//! The data one call's `Store` owns: its WASI context (empty), resource table, limiter, log and
//! deadline; and [`new_store`], which makes a call's store with them.
//!
//! Everything a call can touch lives here, so dropping the store releases all of it. The WASI
//! context is made the first time the guest calls a WASI function: most calls never do (a
//! `wasm32-wasip2` guest only writes to stderr when it panics, and a guest built with
//! `wasmrpc build` imports no WASI at all), and making one costs about half a microsecond.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::panic::report;
use super::bindings::{Level, wasmrpc::tensor::log};
use super::guest_log::GuestLog;
use super::limits::CallLimiter;

/// Per-call store data.
pub struct CallState {
    /// Made on first use ([`empty_wasi`]).
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    /// Memory, table and instance limits of this call.
    pub limiter: CallLimiter,
    /// What the guest wrote.
    pub log: GuestLog,
    /// When the call ends with DEADLINE_EXCEEDED; read at every epoch tick ([`new_store`]).
    pub deadline_at: Instant,
    /// Set while the instance is made ahead of its call (`runtime/ahead.rs`): there is no task
    /// to yield to then, so a tick before the deadline lets the guest go on.
    pub made_ahead: bool,
}

impl CallState {
    /// Fresh state, with a log of at most `log_cap` bytes, ending at `deadline_at`.
    pub fn new(limiter: CallLimiter, log_cap: usize, deadline_at: Instant) -> Self {
        CallState {
            wasi: None,
            table: ResourceTable::new(),
            limiter,
            log: GuestLog::new(log_cap),
            deadline_at,
            made_ahead: false,
        }
    }
}

/// The limits a call's store is made with: the server's, but for the memory budget.
#[derive(Clone, Copy, Debug)]
pub struct StoreLimits {
    pub table_elements: usize,
    pub max_core_instances: usize,
    pub max_tables: usize,
    pub max_memories: usize,
    pub guest_log_bytes: usize,
}

/// The guest's deadline was reached (caught by the epoch callback).
#[derive(Debug)]
pub struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline passed")
    }
}

impl std::error::Error for DeadlinePassed {}

/// A new store for one call: `memory` bytes of linear memory at most, ending `deadline` from
/// now (the state's `deadline_at`, which may be moved later: `runtime/ahead.rs`).
pub fn new_store(
    engine: &Engine,
    limits: &StoreLimits,
    deadline: Duration,
    memory: usize,
) -> Store<CallState> {
    let limiter = CallLimiter::new(
        memory,
        limits.table_elements,
        limits.max_core_instances,
        limits.max_tables,
        limits.max_memories,
    );
    let state = CallState::new(limiter, limits.guest_log_bytes, Instant::now() + deadline);
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|cx| {
        if Instant::now() >= cx.data().deadline_at {
            Err(wasmtime::Error::new(DeadlinePassed))
        } else if cx.data().made_ahead {
            Ok(UpdateDeadline::Continue(1))
        } else {
            // Yield to tokio at every tick so a spinning guest shares its worker thread.
            // `yield_now` puts the task at the back of the queue; a plain self-wake would
            // land in tokio's LIFO slot and run the guest again before anything else.
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        }
    });
    store
}

/// The WASI a guest gets: no environment, arguments, files, network or inherited stdio; stdout
/// and stderr go to the call's capped log.
fn empty_wasi(log: &GuestLog) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(log.clone())
        .stderr(log.clone())
        .allow_blocking_current_thread(false)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let log = &self.log;
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| empty_wasi(log)),
            table: &mut self.table,
        }
    }
}

impl log::Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        let name = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        self.log.append(format!("[{name}] {message}\n").as_bytes());
    }
}

/// The SDK's panic hook sends its message through `wasmrpc:panic/report` in integers (the WIT
/// file says why); the bytes join the call's captured output.
impl report::Host for CallState {
    /// The first `count` bytes of `bytes`, lowest first; a `count` past 8 means 8.
    fn message_bytes(&mut self, bytes: u64, count: u8) {
        let count = usize::from(count).min(8);
        self.log.append(&bytes.to_le_bytes()[..count]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_message_bytes_are_appended_lowest_first_at_most_eight_at_a_time() {
        let limiter = CallLimiter::new(1 << 20, 10, 1, 1, 1);
        let mut state = CallState::new(limiter, 1024, Instant::now());
        use report::Host as _;
        state.message_bytes(u64::from_le_bytes(*b"panicked"), 8);
        state.message_bytes(u64::from_le_bytes(*b" at\n\0\0\0\0"), 4);
        state.message_bytes(u64::from_le_bytes(*b"12345678"), 255);
        state.message_bytes(u64::from_le_bytes(*b"ignored!"), 0);
        assert_eq!(state.log.contents().0, "panicked at\n12345678");
    }
}

//! The data one call's `Store` owns: its WASI context (empty), resource table, limiter and log.
//!
//! Everything a call can touch lives here, so dropping the store releases all of it. The WASI
//! context is made the first time the guest calls a WASI function: most calls never do (a
//! `wasm32-wasip2` guest only writes to stderr when it panics, and a guest built with
//! `wasmrpc build` imports no WASI at all), and making one costs about half a microsecond.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

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
}

impl CallState {
    /// Fresh state, with a log of at most `log_cap` bytes.
    pub fn new(limiter: CallLimiter, log_cap: usize) -> Self {
        CallState {
            wasi: None,
            table: ResourceTable::new(),
            limiter,
            log: GuestLog::new(log_cap),
        }
    }
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

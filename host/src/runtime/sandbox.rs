//! The data one call's `Store` owns: its WASI context (empty), resource table, limiter and log.
//!
//! Everything a call can touch lives here, so dropping the store releases all of it.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::{Level, wasmrpc::tensor::log};
use super::guest_log::GuestLog;
use super::limits::CallLimiter;

/// Per-call store data.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Memory, table and instance limits of this call.
    pub limiter: CallLimiter,
    /// What the guest wrote.
    pub log: GuestLog,
}

impl CallState {
    /// Fresh state: no environment, arguments, files, network or inherited stdio; stdout and
    /// stderr go to the capped guest log.
    pub fn new(limiter: CallLimiter, log_cap: usize) -> Self {
        let log = GuestLog::new(log_cap);
        let wasi = WasiCtxBuilder::new()
            .stdout(log.clone())
            .stderr(log.clone())
            .allow_blocking_current_thread(false)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        CallState {
            wasi,
            table: ResourceTable::new(),
            limiter,
            log,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
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

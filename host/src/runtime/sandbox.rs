//! The data one call's `Store` owns: its WASI context (empty, `runtime/wasi_world.rs`), resource
//! table, limiter, log and deadline; and [`new_store`], which makes a call's store with them.
//!
//! Everything a call can touch lives here, so dropping the store releases all of it. The WASI
//! context is made the first time the guest calls a WASI function: most calls never do (a
//! `wasm32-wasip2` guest only writes to stderr when it panics, and a guest built with
//! `wasmrpc build` imports no WASI at all), and making one costs about half a microsecond.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::panic::report;
use super::bindings::{Level, wasmrpc::tensor::log};
use super::config::FIRST_TURN_AT_LEAST;
use super::guest_log::GuestLog;
use super::limits::CallLimiter;
use super::wasi_world::{self, DenyOutgoingHttp};

/// Per-call store data.
pub struct CallState {
    /// Made on first use ([`wasi_world::empty_wasi`]).
    wasi: Option<WasiCtx>,
    /// `wasi:http`'s (one integer; every request it would send is denied).
    http: WasiHttpCtx,
    http_hooks: DenyOutgoingHttp,
    /// The host resources WASI hands the guest, capped ([`wasi_world::HOST_RESOURCES_PER_CALL`]).
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
    /// When the call began: ticks before [`FIRST_TURN_AT_LEAST`] from then let the guest go on.
    pub started_at: Instant,
}

impl CallState {
    /// Fresh state, with a log of at most `log_cap` bytes, ending at `deadline_at`.
    pub fn new(limiter: CallLimiter, log_cap: usize, deadline_at: Instant) -> Self {
        CallState {
            wasi: None,
            http: wasi_world::http_ctx(),
            http_hooks: DenyOutgoingHttp,
            table: wasi_world::resource_table(),
            limiter,
            log: GuestLog::new(log_cap),
            deadline_at,
            made_ahead: false,
            started_at: Instant::now(),
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
        let now = Instant::now();
        let state = cx.data();
        if now >= state.deadline_at {
            Err(wasmtime::Error::new(DeadlinePassed))
        } else if state.made_ahead
            || now.saturating_duration_since(state.started_at) < FIRST_TURN_AT_LEAST
        {
            // Made ahead: no task to yield to yet. A quick call a tick happened to land in:
            // not a slow one, so it keeps its thread (`config.rs`).
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

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let log = &self.log;
        WasiCtxView {
            ctx: self
                .wasi
                .get_or_insert_with(|| wasi_world::empty_wasi(log)),
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
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
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use wasmtime::Config;
    use wasmtime::component::{Component, Linker};

    use super::*;

    /// A component whose export `run` loops a thousand times; the loop checks the epoch.
    const LOOPS: &str = r#"(component
        (core module $m
            (func (export "run") (local $i i32)
                (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))))
        (core instance $i (instantiate $m))
        (func (export "run") (canon lift (core func $i "run"))))"#;

    /// How the first poll of a call of `run` ends when a tick has passed since its store was
    /// made: `Some(Ok)` done, `Some(Err)` failed, `None` yielded. The call began at `began`
    /// and ends at `deadline_at`.
    fn first_poll_after_a_tick(began: Instant, deadline_at: Instant) -> Option<Result<(), String>> {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let component = Component::new(&engine, wat::parse_str(LOOPS).unwrap()).unwrap();
        let limits = StoreLimits {
            table_elements: 100,
            max_core_instances: 10,
            max_tables: 10,
            max_memories: 10,
            guest_log_bytes: 1024,
        };
        let mut store = new_store(&engine, &limits, Duration::from_secs(10), 1 << 20);
        let mut cx = Context::from_waker(Waker::noop());
        let linker = Linker::<CallState>::new(&engine);
        let Poll::Ready(instance) =
            pin!(linker.instantiate_async(&mut store, &component)).poll(&mut cx)
        else {
            panic!("instantiation waited");
        };
        let run = instance
            .unwrap()
            .get_typed_func::<(), ()>(&mut store, "run")
            .unwrap();
        store.data_mut().started_at = began;
        store.data_mut().deadline_at = deadline_at;
        engine.increment_epoch();
        match pin!(run.call_async(&mut store, ())).poll(&mut cx) {
            Poll::Ready(result) => Some(result.map_err(|e| format!("{e:?}"))),
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_tick_in_a_call_that_has_just_begun_lets_it_go_on() {
        // "Just begun" an hour from now, so that however long this thread is preempted the
        // call is still in its first turn when the guest sees the tick.
        let began = Instant::now() + Duration::from_secs(3600);
        let far = Instant::now() + Duration::from_secs(7200);
        assert_eq!(first_poll_after_a_tick(began, far), Some(Ok(())));
    }

    #[test]
    fn a_tick_in_a_call_past_its_first_turn_yields() {
        let began = Instant::now() - FIRST_TURN_AT_LEAST * 2;
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(first_poll_after_a_tick(began, far), None);
    }

    #[test]
    fn a_call_past_its_deadline_stops_at_a_tick_even_in_its_first_turn() {
        let began = Instant::now() + Duration::from_secs(3600);
        let passed = Instant::now() - Duration::from_millis(1);
        let stopped = first_poll_after_a_tick(began, passed).expect("stopped, not yielded");
        assert!(
            stopped
                .as_ref()
                .is_err_and(|e| e.contains("deadline passed")),
            "{stopped:?}"
        );
    }

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

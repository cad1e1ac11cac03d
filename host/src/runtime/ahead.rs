//! Instances made ahead: a thread that has answered instantiates the component its last calls
//! ran, so that its next call of it starts in an instance that is already there.
//!
//! Instantiation is about half of a scalar call's sandbox time. A thread that answers requests
//! (`runtime/retire.rs`: one that runs tokio's park hook) and whose last two calls ran the same
//! component makes a fresh instance of it when it runs out of work, and a connection thread
//! also right after it writes an answer; its next call of that component takes it. So with one
//! client, instantiation happens while the client reads the previous answer. A one-off call (a
//! connection that asks once and goes) makes none.
//!
//! The instance is as fresh as one made at the call: nothing has run in it but the component's
//! own instantiation, and no call has seen it. When a call takes it, it gets that call's
//! deadline and memory budget ([`Ready::arm`]); an instance that already holds more memory than
//! the call's budget is not used (the call makes its own, and fails as it would have). While
//! it is made there is no call to bill, so instantiation must finish within [`BUDGET`] and must
//! not wait on anything: a component whose instantiation waits, or fails [`FAILURES_AT_MOST`]
//! times (a core start function that runs past the budget), is not made ahead again.
//!
//! Instances made ahead count with the shelf's stores: one a thread, `SHELVED_AT_MOST` in the
//! process, each an instance slot the pool holds spare. Figures in docs/benchmarks.md
//! ("Instances made ahead").

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Engine, PoolConcurrencyLimitError, Store};

use super::sandbox::{CallState, StoreLimits, new_store};

/// The most time instantiation ahead of a call may take (a guest's start functions; also a
/// thread preempted meanwhile, which on a busy machine can take a few hundred microseconds).
pub const BUDGET: Duration = Duration::from_millis(5);

/// Failed attempts after which a component's instances are no longer made ahead.
pub const FAILURES_AT_MOST: u32 = 3;

/// Calls in this process that ran in an instance made ahead.
static CALLS_IN_READY_INSTANCES: AtomicU64 = AtomicU64::new(0);

/// How many calls in this process ran in an instance made ahead (`/metrics`).
pub fn calls_in_ready_instances() -> u64 {
    CALLS_IN_READY_INSTANCES.load(Ordering::Relaxed)
}

/// What to instantiate when the thread next tidies (`runtime/retire.rs`).
pub struct Plan {
    /// Which component ([`super::Module`]'s id): only its calls may take the instance.
    pub module_id: u64,
    pub engine: Engine,
    pub pre: InstancePre<CallState>,
    pub limits: StoreLimits,
    /// The server's memory budget for a call: the most any call could be given.
    pub memory: usize,
    /// The component's failed attempts ([`FAILURES_AT_MOST`]).
    pub failures: Arc<AtomicU32>,
}

/// A fresh instance of one component, never called.
pub struct Ready {
    module_id: u64,
    store: Store<CallState>,
    instance: Instance,
}

impl Plan {
    /// A fresh instance, or `None` when instantiation failed, took more than [`BUDGET`], or
    /// waited on something.
    pub fn prepare(self) -> Option<Ready> {
        if self.failures.load(Ordering::Relaxed) >= FAILURES_AT_MOST {
            return None;
        }
        let mut store = new_store(&self.engine, &self.limits, BUDGET, self.memory);
        store.data_mut().made_ahead = true;
        let polled = {
            let mut instantiating = pin!(self.pre.instantiate_async(&mut store));
            // Polled once, with nobody to wake: what is not done at once is given up.
            instantiating
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
        };
        match polled {
            Poll::Ready(Ok(instance)) => Some(Ready {
                module_id: self.module_id,
                store,
                instance,
            }),
            // No free slot is a passing state of the pool, not the component's doing.
            Poll::Ready(Err(e)) if e.is::<PoolConcurrencyLimitError>() => None,
            // Past the budget, or a failure a call would meet too.
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "an instance could not be made ahead");
                self.failures.fetch_add(1, Ordering::Relaxed);
                None
            }
            // It waits on something: it always will.
            Poll::Pending => {
                tracing::debug!("an instance made ahead waited on something; not made ahead again");
                self.failures.store(FAILURES_AT_MOST, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Ready {
    /// Whether this is an instance of the component `module_id`.
    pub fn is_of(&self, module_id: u64) -> bool {
        self.module_id == module_id
    }

    /// The store and instance, given a call's `deadline` from now and `memory` budget; `None`
    /// (the instance dropped) when it already holds more memory than that budget.
    pub fn arm(self, deadline: Duration, memory: usize) -> Option<(Store<CallState>, Instance)> {
        if self.store.data().limiter.memory_used() > memory {
            return None;
        }
        let Ready {
            mut store,
            instance,
            ..
        } = self;
        let state = store.data_mut();
        state.made_ahead = false;
        state.limiter.set_memory_cap(memory);
        state.started_at = Instant::now();
        state.deadline_at = state.started_at + deadline;
        // One tick from now, as a new store's: ticks may have passed while it waited.
        store.set_epoch_deadline(1);
        CALLS_IN_READY_INSTANCES.fetch_add(1, Ordering::Relaxed);
        Some((store, instance))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use wasmtime::Config;
    use wasmtime::component::{Component, Linker};

    use super::*;

    fn engine() -> Engine {
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true);
        Engine::new(&config).unwrap()
    }

    /// A plan for the component `wat`, as component 7, with a 1 MiB memory budget.
    fn plan(engine: &Engine, wat: &str, failures: &Arc<AtomicU32>) -> Plan {
        let component = Component::new(engine, wat::parse_str(wat).unwrap()).unwrap();
        let pre = Linker::<CallState>::new(engine)
            .instantiate_pre(&component)
            .unwrap();
        Plan {
            module_id: 7,
            engine: engine.clone(),
            pre,
            limits: StoreLimits {
                table_elements: 100,
                max_core_instances: 10,
                max_tables: 10,
                max_memories: 10,
                guest_log_bytes: 1024,
            },
            memory: 1 << 20,
            failures: failures.clone(),
        }
    }

    /// Two wasm pages of memory, nothing to run.
    const TWO_PAGES: &str =
        "(component (core module $m (memory 2)) (core instance (instantiate $m)))";

    /// A core start function that never ends.
    const LOOPING_START: &str = "(component
        (core module $m (func $spin (loop $l (br $l))) (start $spin))
        (core instance (instantiate $m)))";

    #[test]
    fn an_instance_made_ahead_takes_its_calls_budget_and_deadline_or_is_not_used() {
        let engine = engine();
        let failures = Arc::new(AtomicU32::new(0));
        let made = || {
            plan(&engine, TWO_PAGES, &failures)
                .prepare()
                .expect("made ahead")
        };
        let ready = made();
        assert!(ready.is_of(7) && !ready.is_of(8));
        let used_before = calls_in_ready_instances();
        assert!(
            ready.arm(Duration::from_secs(5), 64 << 10).is_none(),
            "two pages were handed to a call with a budget of one"
        );
        let Some((store, _instance)) = made().arm(Duration::from_secs(5), 512 << 10) else {
            panic!("two pages fit a budget of eight");
        };
        let state = store.data();
        assert!(!state.made_ahead, "ticks of the call yield as in any call");
        assert_eq!(state.limiter.memory_cap(), 512 << 10);
        assert_eq!(state.limiter.memory_used(), 128 << 10);
        let left = state.deadline_at.saturating_duration_since(Instant::now());
        assert!(left > Duration::from_secs(4), "{left:?}");
        assert!(calls_in_ready_instances() > used_before);
        assert_eq!(failures.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn instantiation_past_its_budget_is_given_up_and_after_three_times_not_tried() {
        let engine = engine();
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                    engine.increment_epoch();
                }
            })
        };
        let failures = Arc::new(AtomicU32::new(0));
        for tries in 1..=FAILURES_AT_MOST {
            let started = Instant::now();
            assert!(plan(&engine, LOOPING_START, &failures).prepare().is_none());
            let took = started.elapsed();
            // Ticks before the budget let it run on; the budget stops it (with generous slack).
            assert!(took >= BUDGET && took < Duration::from_secs(5), "{took:?}");
            assert_eq!(failures.load(Ordering::Relaxed), tries);
        }
        // Not tried again: without a tick it would never return.
        stop.store(true, Ordering::Relaxed);
        ticker.join().unwrap();
        assert!(plan(&engine, LOOPING_START, &failures).prepare().is_none());
        assert_eq!(failures.load(Ordering::Relaxed), FAILURES_AT_MOST);
    }
}

//! How many compiles run at once, counting the ones abandoned past their timeout.
//!
//! wasmtime cannot interrupt `Component::new`, so a compile that passes its timeout goes on in
//! the background until it ends. Its upload has had its answer, so it gives its slot back at
//! once and the next upload need not wait for it; but it keeps a thread permit until it really
//! ends. The thread permits bound the CPU that compiles take in all: when abandoned compiles hold
//! so many that a compile with a slot finds none left, it is refused at once (the server is busy
//! finishing them) instead of adding more background work. On Linux an abandoned compile's
//! thread also drops to the lowest scheduling priority (nice 19), so it only gets CPU time the
//! server's calls and live compiles leave over.
//!
//! Slots are shared fairly between tenants: a tenant holds at most one slot while another
//! tenant waits, and waiting tenants are served in turn (round-robin), not first come first
//! served across all, so one tenant's burst of uploads cannot hold every slot while another's
//! single upload waits behind all of it. A tenant alone may use every slot.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, oneshot};

/// Compiles some upload or load is waiting for; more wait for a slot. Compiling is CPU-bound,
/// so this bounds how much of the machine uploads can take from calls.
pub const COMPILES_AT_ONCE: usize = 2;

/// Compiles abandoned past their timeout that may still be running while both slots compile:
/// the compile threads in all are at most `COMPILES_AT_ONCE + ABANDONED_COMPILES_MAX`.
pub const ABANDONED_COMPILES_MAX: usize = 2;

/// Compile slots and compile threads.
#[derive(Debug)]
pub struct CompileGate {
    slots: Arc<Mutex<Slots>>,
    threads: Arc<Semaphore>,
    slots_total: usize,
    threads_total: usize,
}

/// Who holds the compile slots and who waits for one.
#[derive(Debug, Default)]
struct Slots {
    free: usize,
    /// Slots held, by tenant.
    held: HashMap<String, usize>,
    /// Tenants with waiting compiles, in the order they are served next.
    turn: VecDeque<String>,
    /// Each tenant's waiting compiles, first come first served within the tenant.
    waiting: HashMap<String, VecDeque<oneshot::Sender<SlotGuard>>>,
}

impl Slots {
    /// Whether a tenant other than `owner` has a compile waiting.
    fn others_wait(&self, owner: &str) -> bool {
        self.turn.iter().any(|t| t != owner)
    }

    /// Forget waiters that stopped waiting (their upload went away), and tenants left with none.
    fn prune(&mut self) {
        let waiting = &mut self.waiting;
        self.turn.retain(|tenant| {
            let Some(queue) = waiting.get_mut(tenant) else {
                return false;
            };
            queue.retain(|tx| !tx.is_closed());
            if queue.is_empty() {
                waiting.remove(tenant);
                return false;
            }
            true
        });
    }
}

/// A held compile slot: given back, and handed to the next waiting compile, when dropped.
#[derive(Debug)]
pub struct SlotGuard {
    /// `None` once given back (or never really handed out).
    slots: Option<Arc<Mutex<Slots>>>,
    owner: String,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            let mut state = lock(&slots);
            if let Some(held) = state.held.get_mut(&self.owner) {
                *held -= 1;
                if *held == 0 {
                    state.held.remove(&self.owner);
                }
            }
            state.free += 1;
            dispatch(&slots, &mut state);
        }
    }
}

fn lock(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    slots.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hand free slots to waiting compiles: the first tenant in turn that may take one (it holds
/// none, or nobody else waits), which then goes to the back of the turn.
fn dispatch(slots: &Arc<Mutex<Slots>>, state: &mut Slots) {
    while state.free > 0 {
        state.prune();
        let Some(at) = (0..state.turn.len()).find(|&i| {
            let tenant = &state.turn[i];
            state.held.get(tenant).copied().unwrap_or(0) == 0 || !state.others_wait(tenant)
        }) else {
            return;
        };
        let tenant = state.turn.remove(at).expect("found just now");
        let queue = state.waiting.get_mut(&tenant).expect("pruned: it waits");
        let tx = queue.pop_front().expect("pruned: not empty");
        if queue.is_empty() {
            state.waiting.remove(&tenant);
        } else {
            state.turn.push_back(tenant.clone());
        }
        state.free -= 1;
        *state.held.entry(tenant.clone()).or_default() += 1;
        let guard = SlotGuard {
            slots: Some(slots.clone()),
            owner: tenant.clone(),
        };
        if let Err(mut guard) = tx.send(guard) {
            // It stopped waiting since the prune: take the slot back without dropping the guard
            // here, under the lock its drop would take.
            guard.slots = None;
            state.free += 1;
            if let Some(held) = state.held.get_mut(&tenant) {
                *held -= 1;
                if *held == 0 {
                    state.held.remove(&tenant);
                }
            }
        }
    }
}

/// The right to compile one component.
#[derive(Debug)]
pub struct CompilePermit {
    /// Held by whoever waits for the result: dropped when it stops waiting (the compile ended,
    /// timed out, or the upload was cancelled), which lets the next compile start.
    pub slot: SlotGuard,
    /// Held by the compile itself until it really ends, however long after its timeout.
    pub thread: OwnedSemaphorePermit,
}

/// Why no compile could start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateError {
    /// The runtime is shutting down.
    Closed,
    /// Abandoned compiles hold every compile thread; refused without waiting.
    Busy {
        /// Abandoned compiles still running, as counted when refusing.
        abandoned: usize,
    },
}

impl CompileGate {
    /// `slots` compiles at once, and `slots + abandoned_max` compile threads in all.
    pub fn new(slots: usize, abandoned_max: usize) -> Self {
        CompileGate {
            slots: Arc::new(Mutex::new(Slots {
                free: slots,
                ..Slots::default()
            })),
            threads: Arc::new(Semaphore::new(slots + abandoned_max)),
            slots_total: slots,
            threads_total: slots + abandoned_max,
        }
    }

    /// Wait for a compile slot for tenant `owner` (without a time limit, in its turn among the
    /// tenants waiting), then take a thread permit.
    ///
    /// # Errors
    /// [`GateError::Busy`] at once when abandoned compiles hold every thread permit left;
    /// [`GateError::Closed`] when the runtime is shutting down.
    pub async fn enter(&self, owner: &str) -> Result<CompilePermit, GateError> {
        let granted = {
            let mut state = lock(&self.slots);
            let (tx, rx) = oneshot::channel();
            state
                .waiting
                .entry(owner.to_owned())
                .or_default()
                .push_back(tx);
            if !state.turn.iter().any(|t| t == owner) {
                state.turn.push_back(owner.to_owned());
            }
            dispatch(&self.slots, &mut state);
            rx
        };
        // An upload that goes away drops `granted`; a slot sent to it meanwhile is dropped with
        // it, which hands the slot on.
        let slot = granted.await.map_err(|_| GateError::Closed)?;
        // Waiting here would queue behind compiles nobody waits for; refusing tells the client
        // to come back when they have finished.
        let thread = match self.threads.clone().try_acquire_owned() {
            Ok(thread) => thread,
            Err(TryAcquireError::Closed) => return Err(GateError::Closed),
            Err(TryAcquireError::NoPermits) => {
                // Give the slot back first: a slot held without a thread is no compile at all.
                drop(slot);
                return Err(GateError::Busy {
                    abandoned: self.abandoned(),
                });
            }
        };
        Ok(CompilePermit { slot, thread })
    }

    /// Compiles still running that nobody waits for: thread permits held beyond the slots held.
    pub fn abandoned(&self) -> usize {
        let threads_held = self.threads_total - self.threads.available_permits();
        let slots_held = self.slots_total - lock(&self.slots).free;
        threads_held.saturating_sub(slots_held)
    }
}

/// The scheduling priority of one compile's thread, lowered once nobody waits for the compile.
///
/// Whichever comes second, the thread starting or the compile being abandoned, lowers it: the
/// thread records its id at start unless the compile was abandoned already.
#[derive(Debug, Clone, Default)]
pub struct Priority {
    /// 0: not started and not abandoned; [`ABANDONED`]: abandoned before the thread started;
    /// otherwise the thread's id.
    state: Arc<AtomicI32>,
}

/// [`Priority`]'s state for a compile abandoned before its thread started (thread ids are > 0).
const ABANDONED: i32 = -1;

impl Priority {
    /// Called by the compile's thread before it compiles.
    pub fn started(&self) {
        let tid = current_thread_id();
        if self
            .state
            .compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            lower_priority(tid);
        }
    }

    /// Called when the compile's timeout fires.
    pub fn abandon(&self) {
        if let Err(tid) =
            self.state
                .compare_exchange(0, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
        {
            lower_priority(tid);
        }
    }
}

#[cfg(target_os = "linux")]
fn current_thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

#[cfg(not(target_os = "linux"))]
fn current_thread_id() -> i32 {
    1
}

/// Nice 19 for thread `tid`. Best effort: a failure only leaves the compile at its priority.
#[cfg(target_os = "linux")]
fn lower_priority(tid: i32) {
    // SAFETY: setpriority reads only its integer arguments. On Linux PRIO_PROCESS with a thread
    // id applies to that thread alone, and raising a nice value needs no privilege. The thread
    // is this compile's own (never a pooled one) and ends with the compile.
    let result = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    if result != 0 {
        tracing::debug!(
            tid,
            error = %std::io::Error::last_os_error(),
            "could not lower an abandoned compile's priority"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_tid: i32) {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Enough for a permit that is free to be granted on a loaded machine; a wait for one that
    /// is not free never ends, so the bound only decides how long a failure takes to show.
    const AT_ONCE: Duration = Duration::from_secs(5);

    async fn enter_now(gate: &CompileGate) -> Result<CompilePermit, GateError> {
        tokio::time::timeout(AT_ONCE, gate.enter("t"))
            .await
            .expect("enter does not wait while a slot is free")
    }

    #[tokio::test]
    async fn an_abandoned_compile_gives_its_slot_back_at_once() {
        let gate = CompileGate::new(1, 1);
        let first = enter_now(&gate).await.unwrap();
        // The first compile times out: its upload stops waiting, the compile goes on.
        let CompilePermit { slot, thread } = first;
        drop(slot);
        assert_eq!(gate.abandoned(), 1);
        let second = enter_now(&gate).await.unwrap();
        assert_eq!(gate.abandoned(), 1);
        drop(second);
        drop(thread);
        assert_eq!(gate.abandoned(), 0);
    }

    #[tokio::test]
    async fn compiles_wait_for_a_slot_held_by_a_live_compile() {
        let gate = CompileGate::new(1, 1);
        let first = enter_now(&gate).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), gate.enter("t"))
                .await
                .is_err(),
            "a second compile waits while the only slot compiles"
        );
        drop(first);
        enter_now(&gate).await.unwrap();
    }

    #[cfg(target_os = "linux")]
    fn nice_of(tid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // After the command name in parentheses: state is field 3, nice is field 19.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[16].parse().unwrap()
    }

    /// The thread's priority drops whichever comes first, its start or the timeout.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_abandoned_compile_thread_drops_to_the_lowest_priority() {
        for abandon_first in [false, true] {
            let priority = Priority::default();
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
            if abandon_first {
                priority.abandon();
            }
            let in_thread = priority.clone();
            let thread = std::thread::spawn(move || {
                in_thread.started();
                started_tx.send(current_thread_id()).unwrap();
                finish_rx.recv().unwrap();
            });
            let tid = started_rx.recv().unwrap();
            if !abandon_first {
                // Whatever nice the test runs at, a live compile keeps it.
                let ours = nice_of(current_thread_id());
                assert_eq!(nice_of(tid), ours, "a live compile keeps its priority");
                priority.abandon();
            }
            assert_eq!(nice_of(tid), 19, "abandon_first: {abandon_first}");
            finish_tx.send(()).unwrap();
            thread.join().unwrap();
        }
    }

    /// Compiles holding or waiting for a slot (test only).
    fn waiting(gate: &CompileGate) -> usize {
        let mut state = lock(&gate.slots);
        state.prune();
        let held: usize = state.held.values().sum();
        held + state.waiting.values().map(VecDeque::len).sum::<usize>()
    }

    /// Start a compile of `owner`, returning once it holds a slot or waits for one: it reports its
    /// `name` on `granted` when it gets one and holds it until `release` gets its name.
    async fn queue(
        gate: &Arc<CompileGate>,
        owner: &'static str,
        name: &'static str,
        granted: &tokio::sync::mpsc::UnboundedSender<&'static str>,
        release: &tokio::sync::broadcast::Sender<&'static str>,
    ) {
        let before = waiting(gate);
        let (gate2, granted, mut release) = (gate.clone(), granted.clone(), release.subscribe());
        tokio::spawn(async move {
            let permit = gate2.enter(owner).await.unwrap();
            granted.send(name).unwrap();
            while release.recv().await.unwrap() != name {}
            drop(permit);
        });
        while waiting(gate) == before {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_tenant_alone_may_use_every_slot() {
        let gate = CompileGate::new(2, 2);
        let (a, b) = (
            enter_now(&gate).await.unwrap(),
            enter_now(&gate).await.unwrap(),
        );
        drop((a, b));
    }

    #[tokio::test]
    async fn a_tenant_holds_one_slot_while_another_waits_and_tenants_take_turns() {
        let gate = Arc::new(CompileGate::new(2, 10));
        let (granted_tx, mut granted) = tokio::sync::mpsc::unbounded_channel();
        let (release, _) = tokio::sync::broadcast::channel(16);
        // Tenant a's burst takes both slots (nobody else waits) and queues three more; then b
        // and c queue one each, behind all of a's.
        for name in ["a1", "a2", "a3", "a4", "a5"] {
            queue(&gate, "a", name, &granted_tx, &release).await;
        }
        assert_eq!(granted.recv().await, Some("a1"));
        assert_eq!(granted.recv().await, Some("a2"));
        queue(&gate, "b", "b1", &granted_tx, &release).await;
        queue(&gate, "c", "c1", &granted_tx, &release).await;
        // Each freed slot goes to the next tenant in turn, not to the oldest waiter: a, which
        // already holds a slot, waits while others do (first come first served across all
        // would give a3, a4, a5 before b1).
        let mut order = Vec::new();
        for finished in ["a1", "a2", "b1", "c1", "a3"] {
            release.send(finished).unwrap();
            order.push(granted.recv().await.unwrap());
        }
        assert_eq!(order, ["b1", "a3", "c1", "a4", "a5"]);
    }

    #[tokio::test]
    async fn too_many_abandoned_compiles_refuse_new_ones_at_once_until_they_end() {
        let gate = CompileGate::new(2, 2);
        // Four compiles time out in turn; each keeps its thread.
        let mut running = Vec::new();
        for _ in 0..4 {
            running.push(enter_now(&gate).await.unwrap().thread);
        }
        assert_eq!(gate.abandoned(), 4);
        assert_eq!(
            enter_now(&gate).await.unwrap_err(),
            GateError::Busy { abandoned: 4 }
        );
        // One of them ends: a compile may start again.
        running.pop();
        let permit = enter_now(&gate).await.unwrap();
        assert_eq!(gate.abandoned(), 3);
        drop(permit);
    }
}

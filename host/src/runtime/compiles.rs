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

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Compiles some upload or load is waiting for; more wait for a slot. Compiling is CPU-bound,
/// so this bounds how much of the machine uploads can take from calls.
pub const COMPILES_AT_ONCE: usize = 2;

/// Compiles abandoned past their timeout that may still be running while both slots compile:
/// the compile threads in all are at most `COMPILES_AT_ONCE + ABANDONED_COMPILES_MAX`.
pub const ABANDONED_COMPILES_MAX: usize = 2;

/// Compile slots and compile threads.
#[derive(Debug)]
pub struct CompileGate {
    slots: Arc<Semaphore>,
    threads: Arc<Semaphore>,
    slots_total: usize,
    threads_total: usize,
}

/// The right to compile one component.
#[derive(Debug)]
pub struct CompilePermit {
    /// Held by whoever waits for the result: dropped when it stops waiting (the compile ended,
    /// timed out, or the upload was cancelled), which lets the next compile start.
    pub slot: OwnedSemaphorePermit,
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
            slots: Arc::new(Semaphore::new(slots)),
            threads: Arc::new(Semaphore::new(slots + abandoned_max)),
            slots_total: slots,
            threads_total: slots + abandoned_max,
        }
    }

    /// Wait for a compile slot (without a time limit), then take a thread permit.
    ///
    /// # Errors
    /// [`GateError::Busy`] at once when abandoned compiles hold every thread permit left;
    /// [`GateError::Closed`] when the runtime is shutting down.
    pub async fn enter(&self) -> Result<CompilePermit, GateError> {
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| GateError::Closed)?;
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
        let slots_held = self.slots_total - self.slots.available_permits();
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
        tokio::time::timeout(AT_ONCE, gate.enter())
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
            tokio::time::timeout(Duration::from_millis(50), gate.enter())
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

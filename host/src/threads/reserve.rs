//! A CPU kept for answering: while tenants take turns and busy tenants' further calls run,
//! their guests run on every CPU but one, and the threads that answer run on that one.
//!
//! Lane priorities (`lanes.rs`) tell the kernel which thread matters, but they do not make it
//! switch at once. Measured on this project's 2-CPU machine (Linux 6.18, `perf sched
//! timehist`): a nice-0 HTTP thread woken on a CPU where a nice-19 guest thread ran waited for
//! that CPU's next scheduler tick (up to 4 ms), even with the guest thread at `SCHED_IDLE`: the
//! scheduler picked the guest when the HTTP thread had just used more than its share (EEVDF's
//! eligibility), and nothing asked again before the tick. So the two kinds of thread are kept
//! apart: while two tenants have called within the last second and a lower lane (a tenant's
//! second and further running calls) has a call running,
//!
//! - the lower lanes' threads run on every allowed CPU but the reserved one (the highest);
//! - the threads that answer run on the reserved one only: the top lane's (a tenant's only
//!   running call) and the HTTP workers of `wasmrpc serve` (threads that
//!   [`Reserve::mark_answering_thread`] marked; an embedding application's own threads are
//!   never moved).
//!
//! So a light tenant's call is parsed, run and answered on a CPU no busy tenant's guest is
//! queued on. The cost falls on the busy tenant only while another tenant calls: its further
//! calls share one CPU fewer. With one tenant alone, or when no lower lane runs, every thread
//! uses every CPU; on a machine with a single allowed CPU nothing is reserved.
//!
//! A thread follows the state when it polls a call (a guest polls at every epoch tick), and an
//! HTTP worker also when it wakes; changing a thread's CPUs is one system call, made only when
//! the state flips.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// `WASMRPC_CPU_RESERVE=0` turns the reserve off: for a server that runs one busy tenant's
/// throughput before others' latency, and for measuring what the reserve buys.
pub const DISABLE_VAR: &str = "WASMRPC_CPU_RESERVE";

/// Whether tenants took turns lately, and how many calls the lower lanes run: the state the
/// lanes and their threads share.
#[derive(Debug)]
pub struct Contention {
    /// When it was made: the clock of `until`.
    born: Instant,
    /// Until when (nanoseconds after `born`) tenants count as contending; 0 if never.
    until: AtomicU64,
    /// Calls running on the lower lanes (see [`LowerLaneCall`]).
    lower_lane_calls: AtomicUsize,
}

/// A call running on a lower lane: counted while it lives.
#[derive(Debug)]
pub struct LowerLaneCall(Arc<Contention>);

impl LowerLaneCall {
    /// Count a call on a lower lane until the returned value is dropped.
    pub fn new(contention: &Arc<Contention>) -> Self {
        contention.lower_lane_calls.fetch_add(1, Ordering::Relaxed);
        LowerLaneCall(contention.clone())
    }
}

impl Drop for LowerLaneCall {
    fn drop(&mut self) {
        self.0.lower_lane_calls.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Contention {
    /// Nobody has contended yet.
    pub fn new() -> Self {
        Contention {
            born: Instant::now(),
            until: AtomicU64::new(0),
            lower_lane_calls: AtomicUsize::new(0),
        }
    }

    /// Whether the CPUs are split now: a lower lane runs a call and tenants contend. The count
    /// is read first: HTTP workers ask at every wake-up, and mostly no lower lane runs, so the
    /// clock is not read.
    pub fn split_now(&self) -> bool {
        self.lower_lane_calls.load(Ordering::Relaxed) > 0 && self.at(Instant::now())
    }

    /// Tenants took turns at `now`: they contend for `window` from now.
    pub fn noted_at(&self, now: Instant, window: Duration) {
        let until = now.saturating_duration_since(self.born) + window;
        let until = u64::try_from(until.as_nanos()).unwrap_or(u64::MAX);
        self.until.store(until, Ordering::Relaxed);
    }

    /// Whether tenants contend at `now`.
    pub fn at(&self, now: Instant) -> bool {
        let until = self.until.load(Ordering::Relaxed);
        let now = now.saturating_duration_since(self.born).as_nanos();
        until != 0 && now < u128::from(until)
    }
}

/// Where a thread that follows the reserve may run: every allowed CPU, or its side of the split.
#[derive(Debug, Clone)]
pub struct Reserve {
    contention: Arc<Contention>,
    #[cfg(target_os = "linux")]
    masks: Option<Arc<Masks>>,
}

#[cfg(target_os = "linux")]
#[derive(Debug)]
struct Masks {
    all: libc::cpu_set_t,
    all_but_one: libc::cpu_set_t,
    only_one: libc::cpu_set_t,
}

/// Which side of the split a thread is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A lower lane's thread: every allowed CPU but the reserved one.
    Guests,
    /// A thread that answers (the top lane's, an HTTP worker of `wasmrpc serve`): the reserved
    /// CPU only.
    Answering,
}

thread_local! {
    /// The reserve this thread follows, and its side.
    static FOLLOWS: std::cell::RefCell<Option<(Reserve, Side)>> = const { std::cell::RefCell::new(None) };
    /// Whether this thread may be moved to the answering side: an HTTP worker of `wasmrpc serve`.
    static ANSWERS: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread keeps to its side now.
    static SPLIT: Cell<bool> = const { Cell::new(false) };
}

impl Reserve {
    /// Reserve one of the CPUs this process may use (when it may use more than one, and
    /// [`DISABLE_VAR`] is not `0`).
    pub fn new(contention: Arc<Contention>) -> Self {
        let enabled = std::env::var(DISABLE_VAR).map_or(true, |v| v.trim() != "0");
        Reserve {
            contention,
            #[cfg(target_os = "linux")]
            masks: Masks::of_this_process().filter(|_| enabled).map(Arc::new),
        }
    }

    /// Make the calling thread (a lane's, just started) follow the reserve on `side`.
    pub fn adopt_for_this_thread(&self, side: Side) {
        FOLLOWS.with(|f| *f.borrow_mut() = Some((self.clone(), side)));
    }

    /// Mark the calling thread as one that answers requests (an HTTP worker of `wasmrpc
    /// serve`): when it first runs a call it follows that call's reserve, on the answering side.
    pub fn mark_answering_thread() {
        ANSWERS.set(true);
    }

    /// On a thread that [`Reserve::mark_answering_thread`] marked: follow this reserve, unless
    /// it already follows one, and take its side now. Elsewhere: nothing.
    pub fn follow_if_answering(&self) {
        if !ANSWERS.get() {
            return;
        }
        FOLLOWS.with(|f| {
            let mut f = f.borrow_mut();
            if f.is_none() {
                *f = Some((self.clone(), Side::Answering));
            }
        });
        Self::follow_on_this_thread();
    }

    /// On a thread that follows a reserve: take its side while the CPUs are split, and every
    /// CPU again when they are not. Elsewhere: nothing.
    pub fn follow_on_this_thread() {
        FOLLOWS.with(|f| {
            if let Some((reserve, side)) = f.borrow().as_ref() {
                let split = reserve.contention.split_now();
                if split != SPLIT.get() {
                    reserve.apply(split, *side);
                    SPLIT.set(split);
                }
            }
        });
    }

    #[cfg(target_os = "linux")]
    fn apply(&self, split: bool, side: Side) {
        if let Some(masks) = &self.masks {
            let mask = match (split, side) {
                (false, _) => &masks.all,
                (true, Side::Guests) => &masks.all_but_one,
                (true, Side::Answering) => &masks.only_one,
            };
            // SAFETY: `mask` is a valid cpu_set_t of the size given; pid 0 is this thread.
            // A refusal (CPUs taken away meanwhile) leaves the thread where it was.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask);
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn apply(&self, _split: bool, _side: Side) {}
}

#[cfg(target_os = "linux")]
impl Masks {
    /// This process's allowed CPUs, and the same without the highest; `None` with one CPU.
    fn of_this_process() -> Option<Masks> {
        // SAFETY: cpu_set_t is plain data, zeroed is an empty set; sched_getaffinity writes at
        // most the size given, and CPU_* only touch the set passed.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut all) != 0 {
                return None;
            }
            if libc::CPU_COUNT(&all) < 2 {
                return None;
            }
            let highest = (0..libc::CPU_SETSIZE as usize)
                .rev()
                .find(|&cpu| libc::CPU_ISSET(cpu, &all))?;
            let mut all_but_one = all;
            libc::CPU_CLR(highest, &mut all_but_one);
            let mut only_one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(highest, &mut only_one);
            Some(Masks {
                all,
                all_but_one,
                only_one,
            })
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn allowed_cpus() -> usize {
        // SAFETY: as in `Masks::of_this_process`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            libc::CPU_COUNT(&set) as usize
        }
    }

    #[test]
    fn contention_lasts_its_window() {
        let c = Contention::new();
        let now = Instant::now();
        assert!(!c.at(now), "never contended");
        c.noted_at(now, Duration::from_secs(1));
        assert!(c.at(now + Duration::from_millis(999)));
        assert!(!c.at(now + Duration::from_millis(1001)));
    }

    #[test]
    fn the_cpus_split_between_guests_and_answering_threads_while_tenants_contend() {
        let contention = Arc::new(Contention::new());
        let reserve = Reserve::new(contention.clone());
        let before = allowed_cpus();
        let (reserved, others) = if before > 1 {
            (1, before - 1)
        } else {
            (before, before)
        };
        // Each side on a thread of its own, stepping through the states in turn.
        let step = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            let guests = s.spawn(|| {
                reserve.adopt_for_this_thread(Side::Guests);
                let mut seen = Vec::new();
                for _ in 0..4 {
                    step.wait(); // the state has changed
                    Reserve::follow_on_this_thread();
                    seen.push(allowed_cpus());
                    step.wait(); // before it changes again
                }
                seen
            });
            let answering = s.spawn(|| {
                Reserve::mark_answering_thread();
                let mut seen = Vec::new();
                for _ in 0..4 {
                    step.wait();
                    reserve.follow_if_answering();
                    seen.push(allowed_cpus());
                    step.wait();
                }
                seen
            });
            let mut call = None;
            for state in 0..4 {
                match state {
                    0 => {}                                                            // nobody contends
                    1 => contention.noted_at(Instant::now(), Duration::from_secs(60)), // no lower lane runs
                    2 => call = Some(LowerLaneCall::new(&contention)),                 // split
                    _ => drop(call.take()), // the lower lane's call ended
                }
                step.wait();
                step.wait();
            }
            let all_then_split = vec![before, before, others, before];
            assert_eq!(
                guests.join().unwrap(),
                all_then_split,
                "a lower lane's thread"
            );
            let answering_split = vec![before, before, reserved, before];
            assert_eq!(
                answering.join().unwrap(),
                answering_split,
                "an answering thread"
            );
        });
        // A thread nobody marked is never moved, split or not.
        let _call = LowerLaneCall::new(&contention);
        reserve.follow_if_answering();
        Reserve::follow_on_this_thread();
        assert_eq!(allowed_cpus(), before);
    }
}

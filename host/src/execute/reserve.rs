//! A CPU kept for answering: while tenants take turns, busy tenants' guests stay off one CPU.
//!
//! Lane priorities (`lanes.rs`) tell the kernel which thread matters, but they do not make it
//! switch at once. Measured on this project's 2-CPU machine (Linux 6.18, `perf sched
//! timehist`): a nice-0 HTTP thread woken from the other CPU waited 3.6 ms, a whole scheduler
//! tick, behind a nice-16 guest thread of a flooding tenant, while the other CPU ran a second
//! one. So when two tenants have called within the last second, threads of the lower lanes
//! (a tenant's second and further running calls) may run on every allowed CPU but one. That one
//! stays free for the HTTP threads, the top lane (a tenant's only running call) and the kernel's
//! network work, so a light tenant's call finds a CPU without waiting for a tick.
//!
//! The cost falls on the busy tenant only while another tenant calls: its further calls share
//! one CPU fewer. With one tenant alone the lanes use every CPU, and on a machine with a single
//! allowed CPU nothing is reserved.
//!
//! A lane thread follows the contention state at each poll of its task, which a guest gives at
//! every epoch tick; changing a thread's CPUs is one system call, made only when the state
//! flips.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `WASMRPC_CPU_RESERVE=0` turns the reserve off: for a server that runs one busy tenant's
/// throughput before others' latency, and for measuring what the reserve buys.
pub const DISABLE_VAR: &str = "WASMRPC_CPU_RESERVE";

/// Whether tenants took turns lately: the clock the lanes and their threads share.
#[derive(Debug)]
pub struct Contention {
    /// When it was made: the clock of `until`.
    born: Instant,
    /// Until when (nanoseconds after `born`) tenants count as contending; 0 if never.
    until: AtomicU64,
}

impl Contention {
    /// Nobody has contended yet.
    pub fn new() -> Self {
        Contention {
            born: Instant::now(),
            until: AtomicU64::new(0),
        }
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

/// The CPUs a lower lane's thread may use: all allowed ones, or all but the reserved one.
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
}

thread_local! {
    /// This thread's reserve, when it is a lower lane's thread.
    static LANE_RESERVE: std::cell::RefCell<Option<Reserve>> = const { std::cell::RefCell::new(None) };
    /// Whether this thread keeps off the reserved CPU now.
    static KEEPS_OFF: Cell<bool> = const { Cell::new(false) };
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

    /// Make the calling thread (a lower lane's, just started) follow the contention state.
    pub fn adopt_for_this_thread(&self) {
        LANE_RESERVE.with(|r| *r.borrow_mut() = Some(self.clone()));
    }

    /// On a lower lane's thread: keep off the reserved CPU while tenants contend, and use it
    /// again when they stop. Elsewhere: nothing.
    pub fn follow_on_this_thread() {
        LANE_RESERVE.with(|r| {
            if let Some(reserve) = r.borrow().as_ref() {
                let keep_off = reserve.contention.at(Instant::now());
                if keep_off != KEEPS_OFF.get() {
                    reserve.apply(keep_off);
                    KEEPS_OFF.set(keep_off);
                }
            }
        });
    }

    #[cfg(target_os = "linux")]
    fn apply(&self, keep_off: bool) {
        if let Some(masks) = &self.masks {
            let mask = if keep_off {
                &masks.all_but_one
            } else {
                &masks.all
            };
            // SAFETY: `mask` is a valid cpu_set_t of the size given; pid 0 is this thread.
            // A refusal (CPUs taken away meanwhile) leaves the thread where it was.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask);
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn apply(&self, _keep_off: bool) {}
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
            Some(Masks { all, all_but_one })
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
    fn a_lower_lanes_thread_leaves_one_cpu_free_while_tenants_contend() {
        let contention = Arc::new(Contention::new());
        let reserve = Reserve::new(contention.clone());
        let before = allowed_cpus();
        std::thread::scope(|s| {
            s.spawn(|| {
                reserve.adopt_for_this_thread();
                Reserve::follow_on_this_thread();
                assert_eq!(allowed_cpus(), before, "no contention: every CPU");
                contention.noted_at(Instant::now(), Duration::from_secs(60));
                Reserve::follow_on_this_thread();
                assert_eq!(allowed_cpus(), before.saturating_sub(1).max(1));
                contention.noted_at(Instant::now() - Duration::from_secs(120), Duration::ZERO);
                Reserve::follow_on_this_thread();
                assert_eq!(allowed_cpus(), before, "contention over: every CPU again");
            });
        });
        // Threads that are not a lane's are never moved.
        Reserve::follow_on_this_thread();
        assert_eq!(allowed_cpus(), before);
    }
}

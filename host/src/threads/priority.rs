//! How this process's threads ask the kernel for CPU: the few that must answer quickly (the HTTP
//! workers, the epoch ticker, a tenant's first running call) ask for short time slices, and the
//! threads of busy tenants' guests run at a lower priority (`threads/lanes.rs`).
//!
//! Linux's EEVDF scheduler does not let a waking thread preempt a running one merely because it
//! has the higher priority: a guest thread at `nice` 12 was seen to run 7 ms on end while the
//! HTTP workers and the epoch ticker waited. A thread that asks for a short slice
//! (`sched_setattr`'s `sched_runtime`, Linux 6.12 and later) is let in at once when it wakes
//! (the scheduler's `PREEMPT_SHORT`). Neither change needs a privilege; on kernels without them
//! nothing changes.

/// The slice asked for by threads that must answer quickly: 100 µs, the kernel's minimum.
const SHORT_SLICE_NS: u64 = 100_000;

/// Ask for short time slices for the calling thread, so that it runs as soon as it wakes.
pub fn prefer_on_wakeup() {
    #[cfg(target_os = "linux")]
    set_slice(SHORT_SLICE_NS);
}

/// Lower the calling thread's priority by `nice` (no-op at 0, and off Linux).
pub fn lower_by(nice: i32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: gettid and (get|set)priority only read their arguments; on Linux a thread id
        // names one thread, so only this thread's priority changes.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            let current = libc::getpriority(libc::PRIO_PROCESS, tid);
            libc::setpriority(libc::PRIO_PROCESS, tid, (current + nice).min(19));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// `struct sched_attr` as of Linux 3.14 (`SCHED_ATTR_SIZE_VER0`).
#[cfg(target_os = "linux")]
#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

#[cfg(target_os = "linux")]
fn set_slice(slice_ns: u64) {
    // SAFETY: getpriority reads nothing but its arguments; `attr` is a valid, fully initialised
    // `sched_attr` of the size it declares, and pid 0 is the calling thread.
    unsafe {
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: slice_ns,
            sched_deadline: 0,
            sched_period: 0,
        };
        // A kernel without custom slices refuses or ignores it: the thread keeps its defaults.
        libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// This thread's value of `field` in /proc, when the kernel shows it.
    fn sched_field(field: &str) -> Option<u64> {
        // SAFETY: gettid only returns this thread's id.
        let tid = unsafe { libc::gettid() };
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
        let line = text.lines().find(|l| l.starts_with(field))?;
        line.rsplit(':').next()?.trim().parse().ok()
    }

    #[test]
    fn a_thread_that_must_answer_quickly_asks_for_short_slices_and_others_run_lower() {
        std::thread::spawn(|| {
            let before = sched_field("se.slice");
            prefer_on_wakeup();
            if let Some(before) = before {
                assert_eq!(
                    sched_field("se.slice"),
                    Some(SHORT_SLICE_NS),
                    "was {before}"
                );
            }
            // SAFETY: getpriority only reads its arguments.
            let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            let start = nice();
            lower_by(4);
            assert_eq!(nice(), (start + 4).min(19));
        })
        .join()
        .unwrap();
    }
}

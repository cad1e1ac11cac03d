//! Lanes: where a guest's code runs, by how many calls its tenant is running.
//!
//! Guests do not run on the runtime that serves HTTP but on lanes: tokio runtimes of their own,
//! each with its threads at one OS priority (`nice`). A tenant's first running call goes to the
//! top lane, its next ones to ever lower lanes (calls 2, 3–4, 5–8, 9–16, 17 and up), counting
//! the most it has run at once over the last second or two, so a tenant whose slow calls end
//! together and start again does not get the top lane back with its first new one. Guests on
//! one lane take turns cooperatively, at every epoch tick; across lanes the kernel gives the
//! higher priority the CPU. So a tenant with one call in flight gets a CPU when its call is
//! ready, however many slow calls another tenant keeps running, and the HTTP threads (at the
//! process's own priority) are not queued behind guests. Priority only matters when CPUs are contended: a
//! tenant alone on the server runs all its calls at full speed, so capacity one tenant leaves
//! idle is anyone's.
//!
//! Handing a call to a lane costs two thread wake-ups, which is most of what a small call costs.
//! So while only one tenant has called lately (nobody to be fair to), a call's first turn runs
//! right where its request arrived ([`Lanes::run`]): a quick call ends there. A call still
//! running at its first yield moves to its lane then. A guest yields at the first epoch tick
//! after it has run `FIRST_TURN_AT_LEAST` (`runtime/config.rs`), so no slow guest holds an
//! HTTP thread for more than that and a tick, and a quick call a tick lands in stays. Once a
//! second tenant calls, a busy tenant's calls (lanes below the top) go to their lane from the
//! start, for [`CONTENDED_FOR`] after the tenants last took turns;
//! a tenant's only call still starts inline, on an HTTP thread that answers at the same
//! priority as the top lane.
//!
//! Priority alone does not make the kernel switch at once, so while tenants take turns and a
//! lower lane runs a call, the lower lanes' threads and the threads that answer keep to different
//! CPUs (`reserve.rs`).
//!
//! Lowering a thread's priority needs no privilege but raising it does, so a lane's threads keep
//! their priority for life; a lane's runtime starts on its first call. The top lane's threads
//! also ask for short time slices, as the HTTP workers do (`threads/priority.rs`), so the kernel
//! lets them in as soon as they wake.

use std::collections::HashMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use super::reserve::{Contention, LowerLaneCall, Reserve, Side};
use crate::tenancy::TenantId;

/// How much lower each lane's priority is than the one above.
const NICE_STEP: i32 = 4;

/// Lanes, from the top (a tenant's first running call) down.
const LANES: usize = 6;

/// How long a tenant's peak of running calls is remembered: between one and two of these.
const PEAK_WINDOW: Duration = Duration::from_secs(1);

/// How long after two tenants last took turns calls still start on their lanes.
const CONTENDED_FOR: Duration = Duration::from_secs(1);

/// The lanes of one server.
pub struct Lanes {
    lanes: [OnceLock<tokio::runtime::Runtime>; LANES],
    threads_per_lane: usize,
    peaks: Mutex<Peaks>,
    /// Whether tenants took turns within [`CONTENDED_FOR`]: calls then start on their lanes,
    /// and the lower lanes keep one CPU free (`reserve.rs`).
    contention: Arc<Contention>,
    reserve: Reserve,
}

/// The tenants' recent peaks, and who called last.
#[derive(Default)]
struct Peaks {
    by_tenant: HashMap<TenantId, RecentPeak>,
    last_caller: Option<TenantId>,
}

/// Where a call goes: its lane, and whether its first turn may run where it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The lane it runs on (from its first turn, or from its second).
    pub lane: usize,
    /// No other tenant called lately, or the call is its tenant's only one (the top lane): the
    /// first turn runs inline.
    pub inline_first_turn: bool,
}

/// Why a call handed to a lane did not finish there.
#[derive(Debug)]
pub enum LaneFailure {
    /// The lane's runtime could not start (no threads left).
    Start(std::io::Error),
    /// Its task was stopped, or panicked.
    Stopped(tokio::task::JoinError),
}

/// The most calls a tenant ran at once in the current window and the one before.
#[derive(Debug, Clone, Copy)]
struct RecentPeak {
    window_start: Instant,
    current: usize,
    previous: usize,
}

impl RecentPeak {
    /// Note `running` at `now` and answer the peak of the last one or two windows.
    fn note(&mut self, running: usize, now: Instant) -> usize {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= PEAK_WINDOW * 2 {
            *self = RecentPeak {
                window_start: now,
                current: 0,
                previous: 0,
            };
        } else if elapsed >= PEAK_WINDOW {
            self.previous = self.current;
            self.current = 0;
            self.window_start += PEAK_WINDOW;
        }
        self.current = self.current.max(running);
        self.current.max(self.previous)
    }
}

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let started = self.lanes.iter().filter(|l| l.get().is_some()).count();
        f.debug_struct("Lanes")
            .field("started", &started)
            .field("threads_per_lane", &self.threads_per_lane)
            .finish()
    }
}

impl Lanes {
    /// Lanes of `threads_per_lane` threads each (the CPUs there are, at least 1).
    pub fn new(threads_per_lane: usize) -> Self {
        let contention = Arc::new(Contention::new());
        Lanes {
            lanes: Default::default(),
            threads_per_lane: threads_per_lane.max(1),
            peaks: Mutex::new(Peaks::default()),
            reserve: Reserve::new(contention.clone()),
            contention,
        }
    }

    /// Where a call of `tenant` goes, which is running `running` calls now (this one
    /// included): its lane by the most it has run at once lately, and whether another tenant
    /// called lately.
    pub fn place(&self, tenant: &TenantId, running: usize) -> Placement {
        let now = Instant::now();
        let mut peaks = self.peaks.lock().unwrap_or_else(PoisonError::into_inner);
        if peaks.last_caller.as_ref() != Some(tenant) {
            if peaks.last_caller.is_some() {
                self.contention.noted_at(now, CONTENDED_FOR);
            }
            peaks.last_caller = Some(tenant.clone());
        }
        let contended = self.contention.at(now);
        let by_tenant = &mut peaks.by_tenant;
        if by_tenant.len() > 4096 {
            // Forget tenants quiet for two windows: their peak is gone anyway.
            by_tenant
                .retain(|_, p| now.saturating_duration_since(p.window_start) < PEAK_WINDOW * 2);
        }
        let peak = by_tenant
            .entry(tenant.clone())
            .or_insert(RecentPeak {
                window_start: now,
                current: 0,
                previous: 0,
            })
            .note(running, now);
        Placement {
            lane: Self::lane_of(peak),
            inline_first_turn: !contended || Self::lane_of(peak) == 0,
        }
    }

    /// Run `call` where `placement` says: its first turn here if it may, the rest (or all of
    /// it) on its lane. Dropping the returned future stops the call wherever it is. The call
    /// comes boxed, as it must be to move to a lane when its first turn does not finish it; so
    /// this future, and every future awaiting it, stays small.
    ///
    /// # Errors
    /// The lane could not start, or the call's task there was stopped or panicked.
    pub async fn run<F>(
        &self,
        placement: Placement,
        mut call: Pin<Box<F>>,
    ) -> Result<F::Output, LaneFailure>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // An HTTP worker of `wasmrpc serve` takes the answering side of a split CPU set.
        self.reserve.follow_if_answering();
        if placement.inline_first_turn {
            // One poll: a guest that yields in it is a slow call.
            let turn = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx)));
            if let Poll::Ready(out) = pin!(turn).await {
                return Ok(out);
            }
        }
        let on_lane = self
            .spawn_pinned(placement.lane, call)
            .map_err(LaneFailure::Start)?;
        on_lane.await.map_err(LaneFailure::Stopped)
    }

    /// The lane of a call that is its tenant's `running`-th running call (counting itself).
    pub fn lane_of(running: usize) -> usize {
        let below = running.saturating_sub(1);
        ((usize::BITS - below.leading_zeros()) as usize).min(LANES - 1)
    }

    /// Run `call` on `lane`; the task is aborted if the returned handle is dropped.
    ///
    /// # Errors
    /// A lane whose runtime cannot start (no threads left): the caller's error from `failed`.
    #[cfg(test)]
    pub fn spawn<F>(&self, lane: usize, call: F) -> std::io::Result<AbortOnDrop<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_pinned(lane, Box::pin(call))
    }

    /// [`Lanes::spawn`] for a call already pinned in a box.
    fn spawn_pinned<F>(
        &self,
        lane: usize,
        call: Pin<Box<F>>,
    ) -> std::io::Result<AbortOnDrop<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let lane = lane.min(LANES - 1);
        let runtime = match self.lanes[lane].get() {
            Some(runtime) => runtime,
            None => {
                let runtime = start_lane(lane, self.threads_per_lane, &self.reserve)?;
                // Two first calls may race to start it: one runtime wins, the other is dropped
                // (outside any async context: `shutdown_background` does not block).
                if let Err(loser) = self.lanes[lane].set(runtime) {
                    loser.shutdown_background();
                }
                self.lanes[lane].get().expect("set above")
            }
        };
        let counted = (lane > 0).then(|| LowerLaneCall::new(&self.contention));
        Ok(AbortOnDrop(runtime.spawn(FollowingTheReserve {
            call,
            _counted: counted,
        })))
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        // Dropping a runtime blocks until its tasks end, which panics inside an async context
        // (where a server's last reference may be dropped); the guests' tasks are stopped at
        // their next epoch tick anyway.
        for lane in &mut self.lanes {
            if let Some(runtime) = lane.take() {
                runtime.shutdown_background();
            }
        }
    }
}

fn start_lane(
    lane: usize,
    threads: usize,
    reserve: &Reserve,
) -> std::io::Result<tokio::runtime::Runtime> {
    let nice = NICE_STEP * lane as i32;
    let reserve = reserve.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(format!("wasmrpc-lane{lane}"))
        .on_thread_start(move || {
            if lane == 0 {
                crate::threads::priority::prefer_on_wakeup();
                reserve.adopt_for_this_thread(Side::Answering);
            } else {
                reserve.adopt_for_this_thread(Side::Guests);
            }
            crate::threads::priority::lower_by(nice);
        })
        .enable_all()
        .build()
}

/// A call on its lane, whose thread follows the CPU reserve at each poll (a guest polls at
/// every epoch tick); counted while it lives when its lane is a lower one.
struct FollowingTheReserve<F> {
    call: std::pin::Pin<Box<F>>,
    _counted: Option<LowerLaneCall>,
}

impl<F: Future> Future for FollowingTheReserve<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Reserve::follow_on_this_thread();
        self.call.as_mut().poll(cx)
    }
}

/// A spawned task that is aborted when this handle is dropped (the caller went away).
pub struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_further_calls_go_to_ever_lower_lanes() {
        let lanes: Vec<usize> = [1, 2, 3, 4, 5, 8, 9, 16, 17, 1000]
            .into_iter()
            .map(Lanes::lane_of)
            .collect();
        assert_eq!(lanes, [0, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
        assert_eq!(Lanes::lane_of(0), 0);
    }

    #[test]
    fn a_tenants_recent_peak_keeps_its_calls_low_for_a_while() {
        let mut peak = RecentPeak {
            window_start: Instant::now(),
            current: 0,
            previous: 0,
        };
        let start = peak.window_start;
        assert_eq!(peak.note(8, start), 8);
        // Its slow calls all ended; the first new one still counts the peak.
        assert_eq!(peak.note(1, start + PEAK_WINDOW / 2), 8);
        assert_eq!(peak.note(1, start + PEAK_WINDOW * 3 / 2), 8);
        // Two windows later it is forgotten.
        assert_eq!(peak.note(1, start + PEAK_WINDOW * 5 / 2), 1);
        assert_eq!(peak.note(1, start + PEAK_WINDOW * 10), 1);
    }

    #[test]
    fn only_a_tenants_only_call_starts_inline_once_a_second_tenant_calls() {
        let lanes = Lanes::new(1);
        let (a, b) = (TenantId::new("a"), TenantId::new("b"));
        assert!(lanes.place(&a, 1).inline_first_turn, "alone: inline");
        let busy = lanes.place(&a, 3);
        assert_eq!(busy.lane, 2, "still on its lane by load");
        assert!(busy.inline_first_turn, "still alone");
        let light = lanes.place(&b, 1);
        assert!(
            light.inline_first_turn && light.lane == 0,
            "a light tenant's call: inline"
        );
        let busy = lanes.place(&a, 1);
        assert!(
            !busy.inline_first_turn,
            "a busy tenant's calls go to their lane from the start"
        );
        assert_eq!(busy.lane, 2, "by its recent peak");
        assert!(!lanes.place(&a, 1).inline_first_turn, "for a while");
    }

    #[test]
    fn a_quick_call_ends_inline_and_a_slow_one_moves_to_its_lane() {
        let lanes = Lanes::new(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let here = std::thread::current().id();
        let thread_name = || std::thread::current().name().map(str::to_owned);
        rt.block_on(async {
            let inline = Placement {
                lane: 3,
                inline_first_turn: true,
            };
            let quick = lanes
                .run(inline, Box::pin(async move { std::thread::current().id() }))
                .await
                .unwrap();
            assert_eq!(quick, here, "a call done in its first turn ran inline");
            let slow = lanes
                .run(
                    inline,
                    Box::pin(async move {
                        let first = thread_name();
                        tokio::task::yield_now().await; // as a guest does at an epoch tick
                        (first, thread_name())
                    }),
                )
                .await
                .unwrap();
            assert_ne!(
                slow.0.as_deref(),
                Some("wasmrpc-lane3"),
                "first turn inline"
            );
            assert_eq!(
                slow.1.as_deref(),
                Some("wasmrpc-lane3"),
                "the rest on its lane"
            );
            let contended = Placement {
                lane: 1,
                inline_first_turn: false,
            };
            let name = lanes
                .run(contended, Box::pin(async move { thread_name() }))
                .await;
            assert_eq!(name.unwrap().as_deref(), Some("wasmrpc-lane1"));
        });
    }

    #[test]
    fn a_call_runs_on_its_lane_at_that_lanes_priority_and_stops_when_dropped() {
        let lanes = Lanes::new(1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let name = lanes
                .spawn(2, async {
                    std::thread::current().name().map(str::to_owned)
                })
                .unwrap()
                .await
                .unwrap();
            assert_eq!(name.as_deref(), Some("wasmrpc-lane2"));
            #[cfg(target_os = "linux")]
            {
                let (top, low) = (
                    lanes.spawn(0, async {
                        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
                    }),
                    lanes.spawn(2, async {
                        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
                    }),
                );
                let (top, low) = (top.unwrap().await.unwrap(), low.unwrap().await.unwrap());
                assert_eq!(low, (top + 2 * NICE_STEP).min(19), "lane 2 runs lower");
            }
            // A dropped handle aborts its task.
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let handle = lanes
                .spawn(1, async move {
                    let _tx = tx;
                    std::future::pending::<()>().await;
                })
                .unwrap();
            drop(handle);
            assert!(rx.await.is_err(), "the task was dropped with its sender");
        });
    }
}

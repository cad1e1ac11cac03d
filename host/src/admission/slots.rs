//! This worker's call slots: how many guest calls run here at once, how many may wait, and whose
//! turn it is (the last step of the admission policy, taken where the call runs).
//!
//! Outside the sandbox: the runtime runs whatever it is given, and whoever calls it holds a
//! [`CallPermit`] from here for as long as the guest runs. Scheduling is fair between
//! tenants: each tenant has its own bounded queue and its own cap on running calls, and a freed
//! slot goes to the next tenant in turn (round robin), not to whoever queued first, so one tenant
//! flooding the server with slow calls delays another tenant by at most a turn. A slot one tenant
//! leaves idle is anyone's.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{AdmissionError, TenantShare};
use crate::tenancy::TenantId;

/// The right to run one guest call; the slot goes to the next caller in turn when it is dropped.
#[derive(Debug)]
pub struct CallPermit {
    admission: Arc<Inner>,
    tenant: TenantId,
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        self.admission.release(&self.tenant);
    }
}

/// A call in a queue. If it is dropped (the caller went away, or its deadline passed) after
/// dispatch gave it a slot but before it took the slot as a [`CallPermit`], the slot goes back.
struct Queued {
    woken: oneshot::Receiver<()>,
    admission: Arc<Inner>,
    tenant: TenantId,
    admitted: bool,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        // Closing first: from here on dispatch skips this waiter, so the check below cannot race.
        self.woken.close();
        if self.woken.try_recv().is_ok() {
            self.admission.release(&self.tenant);
        } else {
            let mut state = self.admission.lock();
            state.dispatch(&self.admission);
            state.forget_idle(&self.tenant);
        }
    }
}

/// A call waiting for its turn: woken with `true` when it holds a slot.
struct Waiter {
    wake: oneshot::Sender<()>,
    max_running: usize,
}

#[derive(Default)]
struct TenantState {
    running: usize,
    waiting: VecDeque<Waiter>,
}

#[derive(Default)]
struct State {
    running: usize,
    waiting: usize,
    tenants: HashMap<TenantId, TenantState>,
    /// Tenants with waiting calls, in turn order.
    turns: VecDeque<TenantId>,
}

impl State {
    /// Hand free slots to waiting calls, one tenant at a time in turn.
    fn dispatch(&mut self, admission: &Arc<Inner>) {
        let mut skipped = 0;
        while self.running < admission.max_running && skipped < self.turns.len() {
            let Some(tenant) = self.turns.pop_front() else {
                break;
            };
            let Some(t) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            // Drop waiters that gave up (their deadline passed, or the caller went away).
            while t.waiting.front().is_some_and(|w| w.wake.is_closed()) {
                t.waiting.pop_front();
                self.waiting -= 1;
            }
            let Some(front) = t.waiting.front() else {
                continue;
            };
            if t.running >= front.max_running {
                // At its own cap: its turn passes, it keeps its place in the ring.
                self.turns.push_back(tenant);
                skipped += 1;
                continue;
            }
            let waiter = t.waiting.pop_front().expect("checked above");
            self.waiting -= 1;
            if waiter.wake.send(()).is_ok() {
                t.running += 1;
                self.running += 1;
                skipped = 0;
            }
            if !t.waiting.is_empty() {
                self.turns.push_back(tenant);
            }
        }
    }

    fn forget_idle(&mut self, tenant: &TenantId) {
        if self
            .tenants
            .get(tenant)
            .is_some_and(|t| t.running == 0 && t.waiting.is_empty())
        {
            self.tenants.remove(tenant);
        }
    }
}

#[derive(Debug)]
struct Inner {
    max_running: usize,
    max_queued: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("running", &self.running)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A running call of `tenant` ended: its slot goes to the next caller in turn.
    fn release(self: &Arc<Self>, tenant: &TenantId) {
        let mut state = self.lock();
        state.running -= 1;
        if let Some(t) = state.tenants.get_mut(tenant) {
            t.running -= 1;
        }
        state.dispatch(self);
        state.forget_idle(tenant);
    }
}

/// Call slots, and fair, bounded wait queues per tenant.
#[derive(Debug, Clone)]
pub struct LocalSlots {
    inner: Arc<Inner>,
}

impl LocalSlots {
    /// `max_running` calls at once over all tenants; up to `max_queued` more wait for a slot.
    pub fn new(max_running: usize, max_queued: usize) -> Self {
        LocalSlots {
            inner: Arc::new(Inner {
                max_running,
                max_queued,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Wait for a slot for `tenant`, within its `share`, for at most `wait`; refuse at once when
    /// its queue or the server's is full.
    ///
    /// # Errors
    /// [`AdmissionError::Overloaded`] or [`AdmissionError::TenantBusy`] when too many already
    /// wait, [`AdmissionError::WaitedPastDeadline`] when no slot came free in time.
    pub async fn admit(
        &self,
        tenant: &TenantId,
        share: TenantShare,
        wait: Duration,
    ) -> Result<CallPermit, AdmissionError> {
        let permit = || CallPermit {
            admission: self.inner.clone(),
            tenant: tenant.clone(),
        };
        let woken = {
            let mut state = self.inner.lock();
            let free = state.running < self.inner.max_running;
            let t = state.tenants.entry(tenant.clone()).or_default();
            if free && t.waiting.is_empty() && t.running < share.max_running {
                t.running += 1;
                state.running += 1;
                return Ok(permit());
            }
            if t.waiting.len() >= share.max_queued {
                let refused = AdmissionError::TenantBusy {
                    running: share.max_running,
                    queued: share.max_queued,
                };
                state.forget_idle(tenant);
                return Err(refused);
            }
            if state.waiting >= self.inner.max_queued {
                state.forget_idle(tenant);
                return Err(AdmissionError::Overloaded {
                    running: self.inner.max_running,
                    queued: self.inner.max_queued,
                });
            }
            let (wake, woken) = oneshot::channel();
            let t = state.tenants.get_mut(tenant).expect("entered above");
            let first = t.waiting.is_empty();
            t.waiting.push_back(Waiter {
                wake,
                max_running: share.max_running,
            });
            state.waiting += 1;
            if first {
                state.turns.push_back(tenant.clone());
            }
            // A slot may be free while this tenant was only at its own cap: let others have it.
            state.dispatch(&self.inner);
            woken
        };
        let mut queued = Queued {
            woken,
            admission: self.inner.clone(),
            tenant: tenant.clone(),
            admitted: false,
        };
        match tokio::time::timeout(wait, &mut queued.woken).await {
            Ok(Ok(())) => {
                queued.admitted = true;
                Ok(permit())
            }
            Ok(Err(_)) => unreachable!("the sender lives in the queue until it wakes or is closed"),
            // Dropping `queued` hands back a slot that was given as the deadline passed.
            Err(_) => Err(AdmissionError::WaitedPastDeadline {
                deadline_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Calls running now, over all tenants.
    #[cfg(test)]
    pub fn running(&self) -> usize {
        self.inner.lock().running
    }

    /// Calls of `tenant` running now (an admitted call counts itself).
    pub fn running_of(&self, tenant: &TenantId) -> usize {
        self.inner
            .lock()
            .tenants
            .get(tenant)
            .map_or(0, |t| t.running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(max_running: usize, max_queued: usize) -> TenantShare {
        TenantShare {
            max_running,
            max_queued,
        }
    }

    const LONG: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_freed_slot_admits() {
        let admission = LocalSlots::new(1, 1);
        let a = TenantId::new("a");
        let first = admission.admit(&a, share(8, 8), LONG).await.expect("slot");
        // One waiter fits the server's queue; it gets the slot once the first call ends.
        let waiter = {
            let (admission, a) = (admission.clone(), a.clone());
            tokio::spawn(async move { admission.admit(&a, share(8, 8), LONG).await })
        };
        while admission.inner.lock().waiting == 0 {
            tokio::task::yield_now().await;
        }
        let refused = admission.admit(&a, share(8, 8), LONG).await.unwrap_err();
        assert_eq!(
            refused,
            AdmissionError::Overloaded {
                running: 1,
                queued: 1
            }
        );
        drop(first);
        let second = waiter
            .await
            .expect("join")
            .expect("admitted after the first ends");
        assert_eq!(admission.running(), 1);
        drop(second);
        assert_eq!(admission.running(), 0);
        assert!(
            admission.inner.lock().tenants.is_empty(),
            "idle tenants are forgotten"
        );
    }

    #[tokio::test]
    async fn waiting_past_the_deadline_is_refused_and_frees_its_place() {
        let admission = LocalSlots::new(1, 8);
        let a = TenantId::new("a");
        let held = admission.admit(&a, share(8, 8), LONG).await.expect("slot");
        let err = admission
            .admit(&a, share(8, 8), Duration::from_millis(20))
            .await
            .unwrap_err();
        assert_eq!(err, AdmissionError::WaitedPastDeadline { deadline_ms: 20 });
        assert!(err.to_string().contains("deadline of 20 ms"), "{err}");
        drop(held);
        assert_eq!(admission.running(), 0);
        assert_eq!(admission.inner.lock().waiting, 0);
        admission
            .admit(&a, share(8, 8), LONG)
            .await
            .expect("the slot is free");
    }

    #[tokio::test]
    async fn a_tenant_is_held_to_its_own_cap_and_queue() {
        let admission = LocalSlots::new(4, 100);
        let a = TenantId::new("a");
        let b = TenantId::new("b");
        let _one = admission.admit(&a, share(1, 1), LONG).await.expect("slot");
        // a's second call waits although slots are free; its third is refused.
        let queued = {
            let (admission, a) = (admission.clone(), a.clone());
            tokio::spawn(async move { admission.admit(&a, share(1, 1), LONG).await })
        };
        while admission.inner.lock().waiting == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            admission.admit(&a, share(1, 1), LONG).await.unwrap_err(),
            AdmissionError::TenantBusy {
                running: 1,
                queued: 1
            }
        );
        // The slots a leaves idle are b's to use.
        let _b1 = admission
            .admit(&b, share(4, 4), LONG)
            .await
            .expect("b runs");
        let _b2 = admission
            .admit(&b, share(4, 4), LONG)
            .await
            .expect("b runs");
        assert_eq!(admission.running(), 3);
        drop(_one);
        queued
            .await
            .unwrap()
            .expect("a's queued call runs once its first ends");
    }

    #[tokio::test]
    async fn freed_slots_go_round_robin_not_to_the_longest_queue() {
        let admission = LocalSlots::new(1, 1000);
        let flood = TenantId::new("flood");
        let quiet = TenantId::new("quiet");
        let held = admission
            .admit(&flood, share(1, 1000), LONG)
            .await
            .expect("slot");
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        // 50 of flood's calls queue first, then one of quiet's.
        let mut tasks = Vec::new();
        for (tenant, n) in [(flood.clone(), 50), (quiet.clone(), 1)] {
            for _ in 0..n {
                let (queued, tenant, order_tx) =
                    (admission.clone(), tenant.clone(), order_tx.clone());
                tasks.push(tokio::spawn(async move {
                    let permit = queued.admit(&tenant, share(1, 1000), LONG).await.unwrap();
                    order_tx.send(tenant.to_string()).unwrap();
                    drop(permit);
                }));
                let expected = tasks.len();
                while admission.inner.lock().waiting < expected {
                    tokio::task::yield_now().await;
                }
            }
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        let mut order = Vec::new();
        while let Ok(t) = order_rx.try_recv() {
            order.push(t);
        }
        let quiet_turn = order.iter().position(|t| t == "quiet").expect("quiet ran");
        assert!(
            quiet_turn <= 1,
            "quiet waited behind {quiet_turn} of flood's calls: {order:?}"
        );
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_in_the_queue_leaves_no_slot_taken() {
        let admission = LocalSlots::new(1, 100);
        let a = TenantId::new("a");
        for _ in 0..50 {
            let held = admission
                .admit(&a, share(8, 100), LONG)
                .await
                .expect("slot");
            let waiter = {
                let (admission, a) = (admission.clone(), a.clone());
                tokio::spawn(async move { admission.admit(&a, share(8, 100), LONG).await })
            };
            while admission.inner.lock().waiting == 0 {
                tokio::task::yield_now().await;
            }
            // The slot is handed to the waiter and the waiter is cancelled, in either order.
            drop(held);
            waiter.abort();
            let _ = waiter.await;
        }
        assert_eq!(admission.running(), 0);
        admission
            .admit(&a, share(8, 100), Duration::from_millis(100))
            .await
            .expect("every slot came back");
    }
}

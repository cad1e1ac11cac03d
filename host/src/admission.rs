//! Admission control: how many guest calls run at once and how many may wait for a slot.
//!
//! Its own layer, outside the sandbox, so that policy (per-tenant quotas, fair queues) can shape
//! it without the runtime knowing: the runtime runs whatever it is given, and whoever calls it
//! holds a [`CallPermit`] from here for as long as the guest runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// Every slot is busy and the wait queue is full: refused at once.
    #[error("the server is running {running} calls and {queued} more are waiting; try again later")]
    Overloaded {
        /// Calls running at once.
        running: usize,
        /// Calls that may wait.
        queued: usize,
    },
    /// No slot came free within the call's deadline.
    #[error("the call ran past its deadline of {deadline_ms} ms and was stopped")]
    WaitedPastDeadline {
        /// The deadline the call had.
        deadline_ms: u64,
    },
    /// The server is shutting down.
    #[error("the runtime is shutting down")]
    Closed,
}

/// The right to run one guest call; the slot is free again when it is dropped.
#[derive(Debug)]
pub struct CallPermit {
    _permit: OwnedSemaphorePermit,
}

/// Call slots and a bounded wait queue.
#[derive(Debug)]
pub struct Admission {
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_running: usize,
    max_queued: usize,
}

impl Admission {
    /// `max_running` calls at once; up to `max_queued` more wait for a slot.
    pub fn new(max_running: usize, max_queued: usize) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_running)),
            waiting: AtomicUsize::new(0),
            max_running,
            max_queued,
        }
    }

    /// Wait for a slot for at most `wait`; refuse at once when the queue is full.
    ///
    /// # Errors
    /// [`AdmissionError::Overloaded`] when too many already wait,
    /// [`AdmissionError::WaitedPastDeadline`] when no slot came free in time,
    /// [`AdmissionError::Closed`] when shutting down.
    pub async fn admit(&self, wait: Duration) -> Result<CallPermit, AdmissionError> {
        let permit = |p| CallPermit { _permit: p };
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(permit(p));
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_queued {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(AdmissionError::Overloaded {
                running: self.max_running,
                queued: self.max_queued,
            });
        }
        let acquired = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match acquired {
            Ok(Ok(p)) => Ok(permit(p)),
            Ok(Err(_)) => Err(AdmissionError::Closed),
            Err(_) => Err(AdmissionError::WaitedPastDeadline {
                deadline_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Slots free right now.
    #[cfg(test)]
    pub fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_freed_slot_admits() {
        let admission = Arc::new(Admission::new(1, 1));
        let first = admission.admit(Duration::from_secs(1)).await.expect("slot");
        assert_eq!(admission.free_slots(), 0);
        // One waiter fits the queue; it gets the slot once the first call ends.
        let waiter = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit(Duration::from_secs(5)).await })
        };
        while admission.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // A third finds the queue full and is refused without waiting.
        let refused = admission.admit(Duration::from_secs(5)).await.unwrap_err();
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
        drop(second);
        assert_eq!(admission.free_slots(), 1);
    }

    #[tokio::test]
    async fn waiting_past_the_deadline_is_refused() {
        let admission = Admission::new(1, 8);
        let _held = admission.admit(Duration::from_secs(1)).await.expect("slot");
        let err = admission
            .admit(Duration::from_millis(20))
            .await
            .unwrap_err();
        assert_eq!(err, AdmissionError::WaitedPastDeadline { deadline_ms: 20 });
        assert!(err.to_string().contains("deadline of 20 ms"), "{err}");
    }
}

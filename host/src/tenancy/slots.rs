//! Call slots counted across a cluster: a tenant whose `max_concurrent_calls` is set below a
//! worker's own capacity runs at most that many calls on all workers together. The count is the
//! cluster's ([`CallSlots`], kept in NATS by `cluster::slots`); alone, a server needs none (its
//! executor counts each tenant's running calls).

use std::time::Duration;

use super::TenantId;
use crate::admission::AdmissionError;

/// A slot taken from the cluster's count; given back when dropped.
pub struct SlotGuard(Option<Box<dyn FnOnce() + Send>>);

impl SlotGuard {
    /// A guard that gives back by calling `release`.
    pub fn new(release: impl FnOnce() + Send + 'static) -> SlotGuard {
        SlotGuard(Some(Box::new(release)))
    }

    /// A guard with nothing to give back (the count could not be reached: the worker's own
    /// limits alone apply).
    pub fn none() -> SlotGuard {
        SlotGuard(None)
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl std::fmt::Debug for SlotGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotGuard").finish_non_exhaustive()
    }
}

/// The cluster's count of each tenant's running calls.
#[async_trait::async_trait]
pub trait CallSlots: Send + Sync + std::fmt::Debug {
    /// Take one of `tenant`'s `max` slots, waiting up to `wait` for one to come free anywhere
    /// in the cluster, with at most `max_waiting` of its calls waiting on this worker.
    ///
    /// # Errors
    /// TENANT_BUSY when `max_waiting` calls wait already; WAITED_PAST_DEADLINE when no slot came
    /// free in time.
    async fn acquire(
        &self,
        tenant: &TenantId,
        max: u64,
        wait: Duration,
        max_waiting: usize,
    ) -> Result<SlotGuard, AdmissionError>;
}

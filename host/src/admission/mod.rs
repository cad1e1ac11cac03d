//! Admission: whether a call may run, and with what. One policy, applied in this order:
//!
//! 1. the tenant's rate (`calls_per_second`, counted across the cluster when the server is in
//!    one: `tenancy/rate.rs`);
//! 2. the call's deadline: the one the caller asked for (or the server's default), capped by the
//!    server's longest and the tenant's `max_deadline_ms`;
//! 3. a slot of the cluster's count, for a tenant limited below a worker's capacity
//!    (`tenancy/slots.rs`, kept in NATS by `cluster::slots`), its wait counted against the
//!    deadline;
//! 4. a slot of the worker that runs the call ([`LocalSlots`], `slots.rs`), fair between tenants,
//!    its wait counted against the deadline too.
//!
//! [`Admission::admit`] takes steps 1 to 3 once per call, on the worker the call arrived at, and
//! returns the [`CallLimits`] the call carries wherever it runs, with the deadline left. Step 4 is
//! taken where the guest runs ([`LocalSlots::admit`], by the local executor), after its
//! component is loaded: a load may itself take a slot (to ask for signatures), and it does not
//! count against the call's deadline. A call arriving from another worker carries the limits its
//! first worker admitted it with, and takes only step 4.

mod bytes;
mod slots;

pub use bytes::{BytesBudget, BytesHeld};

/// One tenant's default share of what tenants share (call slots, the call queue, the bytes in
/// flight): all but an eighth (all of it below 2), which one tenant alone can never hold. A slot
/// is held for a call's whole length, so a tenant that filled them all with slow calls would make
/// every other tenant wait for one of them to end, however fairly freed slots are handed out; the
/// queue and the bytes the same way.
pub fn one_tenants_share(total: u64) -> u64 {
    if total < 2 {
        return total;
    }
    total - total.div_ceil(8)
}
pub use slots::LocalSlots;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::tenancy::slots::{CallSlots, SlotGuard};
use crate::tenancy::{Quota, RateLimiter, TenantId};

/// Why a call was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// Every slot is busy and the server's wait queue is full: refused at once.
    #[error("the server is running {running} calls and {queued} more are waiting; try again later")]
    Overloaded {
        /// Calls running at once.
        running: usize,
        /// Calls that may wait.
        queued: usize,
    },
    /// The tenant's own queue is full: refused at once.
    #[error(
        "quota max_concurrent_calls ({running}) reached and {queued} more calls are waiting; try \
         again later"
    )]
    TenantBusy {
        /// The tenant's running calls.
        running: usize,
        /// The tenant's queue bound.
        queued: usize,
    },
    /// Past the tenant's calls-per-second quota: refused at once.
    #[error(
        "quota calls_per_second ({per_second}) reached; try again in {} ms",
        retry_after.as_millis().max(1)
    )]
    RateLimited {
        /// The rate.
        per_second: u64,
        /// When the next call would be allowed.
        retry_after: Duration,
    },
    /// A request's body or a call's arguments would pass the bytes in flight the server (or one
    /// tenant) may hold: refused at once (`bytes.rs`).
    #[error(
        "{} {held} bytes of request bodies and arguments in flight and this request needs {needed}, \
         past {}; try again later",
        if *tenant { "this tenant's requests hold" } else { "the server holds" },
        if *tenant {
            format!("a tenant's share of {budget} bytes (all but an eighth of --max-bytes-in-flight)")
        } else {
            format!("its budget of {budget} bytes (--max-bytes-in-flight)")
        }
    )]
    BytesBudget {
        /// Bytes the request would hold.
        needed: usize,
        /// Bytes other requests hold (the tenant's others, for its share).
        held: usize,
        /// The budget or share passed.
        budget: usize,
        /// Whether it is the tenant's share, not the server's budget.
        tenant: bool,
    },
    /// No slot came free within the call's deadline.
    #[error("the call ran past its deadline of {deadline_ms} ms and was stopped")]
    WaitedPastDeadline {
        /// The deadline the call had.
        deadline_ms: u64,
    },
}

/// What one tenant may hold.
#[derive(Debug, Clone, Copy)]
pub struct TenantShare {
    /// Its calls running at once.
    pub max_running: usize,
    /// Its calls waiting at once.
    pub max_queued: usize,
}

/// What one call may use wherever it runs: its caller's quota made concrete, and the deadline left.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// The call ends this long after it is handed over, waiting for a slot included.
    pub deadline: Duration,
    /// Linear memory it may hold, in bytes.
    pub memory: usize,
    /// Its tenant's share of the call slots.
    pub share: TenantShare,
}

/// The server's rule for a call's deadline: the default for a call that asks for none, and the
/// longest any call may have.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineRule {
    /// For a call that asks for none (a timeout of zero).
    pub default: Duration,
    /// The longest.
    pub max: Duration,
}

impl DeadlineRule {
    /// The deadline of a call asking for `requested` (zero: the default), at most the longest.
    pub fn deadline_for(&self, requested: Duration) -> Duration {
        if requested.is_zero() {
            self.default.min(self.max)
        } else {
            requested.min(self.max)
        }
    }
}

/// A call admitted on this worker: what it may use, and the cluster slot it holds (given back
/// when this is dropped, once the call has ended wherever it ran).
#[derive(Debug)]
pub struct Admitted {
    /// What the call may use, with the deadline left after admission.
    pub limits: CallLimits,
    _cluster_slot: Option<SlotGuard>,
}

/// The admission policy of this server (see the module's documentation for its order).
#[derive(Debug)]
pub struct Admission {
    rates: RateLimiter,
    /// The cluster's count of running calls, for tenants limited below a worker's capacity
    /// (set when the server joins a cluster with keys), and that capacity.
    cluster_slots: OnceLock<(Arc<dyn CallSlots>, u64)>,
    slots: Arc<LocalSlots>,
    deadlines: DeadlineRule,
    /// Calls one tenant may have waiting for a slot.
    tenant_max_queued: usize,
}

impl Admission {
    /// `max_running` calls at once here, `max_queued` more waiting (of which one tenant may fill
    /// at most `tenant_max_queued`), deadlines by `deadlines`.
    pub fn new(
        max_running: usize,
        max_queued: usize,
        tenant_max_queued: usize,
        deadlines: DeadlineRule,
    ) -> Self {
        Admission {
            rates: RateLimiter::default(),
            cluster_slots: OnceLock::new(),
            slots: Arc::new(LocalSlots::new(max_running, max_queued)),
            deadlines,
            tenant_max_queued,
        }
    }

    /// Count tenants' call rates against the cluster's buckets (a worker joining a cluster), so
    /// that `calls_per_second` holds across workers.
    pub fn share_rates(&self, shared: Arc<dyn crate::tenancy::rate::SharedRates>) {
        self.rates.share(shared);
    }

    /// Count the running calls of tenants whose `max_concurrent_calls` is below
    /// `per_worker_default` (the default quota, which stays each worker's own) across the
    /// cluster (a worker joining a cluster with keys).
    pub fn share_slots(&self, slots: Arc<dyn CallSlots>, per_worker_default: u64) {
        let _ = self.cluster_slots.set((slots, per_worker_default));
    }

    /// This worker's call slots (step 4), for the executor and the module cache.
    pub fn slots(&self) -> &Arc<LocalSlots> {
        &self.slots
    }

    /// The server's deadline rule.
    pub fn deadlines(&self) -> DeadlineRule {
        self.deadlines
    }

    /// Steps 1 to 3 for a call of `tenant` under `quota` that asks for `timeout` (zero: the
    /// default): the limits it runs with, the deadline left after waiting for a cluster slot.
    ///
    /// # Errors
    /// [`AdmissionError::RateLimited`] past the rate; the cluster count's refusals
    /// ([`AdmissionError::TenantBusy`], [`AdmissionError::WaitedPastDeadline`]).
    pub async fn admit(
        &self,
        tenant: &TenantId,
        quota: &Quota,
        timeout: Duration,
    ) -> Result<Admitted, AdmissionError> {
        if let Err(retry_after) = self.rates.take(tenant, quota.calls_per_second).await {
            return Err(AdmissionError::RateLimited {
                per_second: quota.calls_per_second,
                retry_after,
            });
        }
        let deadline = self
            .deadlines
            .deadline_for(timeout)
            .min(Duration::from_millis(quota.max_deadline_ms));
        let max = quota.max_concurrent_calls;
        let (cluster_slot, deadline) = match self.cluster_slots.get() {
            Some((slots, per_worker_default)) if max > 0 && max < *per_worker_default => {
                let started = Instant::now();
                let slot = slots
                    .acquire(tenant, max, deadline, self.tenant_max_queued)
                    .await?;
                (Some(slot), deadline.saturating_sub(started.elapsed()))
            }
            _ => (None, deadline),
        };
        Ok(Admitted {
            limits: CallLimits {
                deadline,
                memory: usize::try_from(quota.memory_per_call_mib << 20).unwrap_or(usize::MAX),
                share: TenantShare {
                    max_running: usize::try_from(quota.max_concurrent_calls).unwrap_or(usize::MAX),
                    max_queued: self.tenant_max_queued,
                },
            },
            _cluster_slot: cluster_slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(max_deadline_ms: u64, calls_per_second: u64) -> Quota {
        Quota {
            max_component_bytes: 1 << 20,
            max_methods: 10,
            max_stored_bytes: 1 << 30,
            memory_per_call_mib: 8,
            max_deadline_ms,
            max_concurrent_calls: 3,
            calls_per_second,
        }
    }

    fn admission() -> Admission {
        Admission::new(
            4,
            16,
            5,
            DeadlineRule {
                default: Duration::from_secs(10),
                max: Duration::from_secs(300),
            },
        )
    }

    #[tokio::test]
    async fn the_deadline_is_the_one_asked_for_within_the_server_and_the_quota() {
        let admission = admission();
        let t = TenantId::new("t");
        let limits = |timeout_ms, max_ms| {
            let admission = &admission;
            let t = &t;
            async move {
                admission
                    .admit(t, &quota(max_ms, 0), Duration::from_millis(timeout_ms))
                    .await
                    .unwrap()
                    .limits
            }
        };
        assert_eq!(
            limits(250, 60_000).await.deadline,
            Duration::from_millis(250)
        );
        // None asked for: the server's default; over the quota's longest: the quota's.
        assert_eq!(limits(0, 60_000).await.deadline, Duration::from_secs(10));
        assert_eq!(
            limits(90_000, 60_000).await.deadline,
            Duration::from_secs(60)
        );
        assert_eq!(limits(0, 2_000).await.deadline, Duration::from_secs(2));
        // Over the server's longest, whatever the quota says.
        assert_eq!(
            limits(900_000, 1_000_000).await.deadline,
            Duration::from_secs(300)
        );
        let made = limits(1, 60_000).await;
        assert_eq!(made.memory, 8 << 20);
        assert_eq!(
            (made.share.max_running, made.share.max_queued),
            (3, 5),
            "the quota's running calls, the server's queue a tenant"
        );
    }

    #[tokio::test]
    async fn a_call_past_its_rate_is_refused_at_once_saying_when_to_come_back() {
        let admission = admission();
        let t = TenantId::new("t");
        let q = quota(60_000, 2);
        // The bucket holds a second's worth.
        for _ in 0..2 {
            admission.admit(&t, &q, Duration::ZERO).await.unwrap();
        }
        match admission.admit(&t, &q, Duration::ZERO).await {
            Err(AdmissionError::RateLimited {
                per_second: 2,
                retry_after,
            }) => assert!(retry_after <= Duration::from_secs(1), "{retry_after:?}"),
            other => panic!("{other:?}"),
        }
        // Another tenant's bucket is its own.
        let other = TenantId::new("u");
        admission.admit(&other, &q, Duration::ZERO).await.unwrap();
    }
}

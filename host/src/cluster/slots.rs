//! The cluster's count of tenants' running calls (`max_concurrent_calls` across workers, for a
//! tenant limited below a worker's capacity): one entry per tenant in the key-value bucket
//! `wasmrpc_slots`, mapping each worker to the slots it holds. A worker holds a slot for each of
//! the tenant's calls it runs and takes one more with a compare-and-set only while the holdings
//! sum to less than the quota; a finished call hands its slot to a call waiting here, or gives
//! it back. Holdings of workers that are no longer live are dropped by the next write, so a dead
//! worker's slots come back within the membership TTL.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures_util::StreamExt as _;

use super::ClusterError;
use super::members::Members;
use super::trust::{Refused, Trust};
use crate::admission::AdmissionError;
use crate::tenancy::TenantId;
use crate::tenancy::slots::{CallSlots, SlotGuard};

/// The bucket of holdings.
pub const BUCKET: &str = "wasmrpc_slots";
/// Compare-and-set attempts before a write gives up.
const ATTEMPTS: usize = 16;
/// How often a call waiting for a slot held elsewhere looks again.
const POLL: Duration = Duration::from_millis(20);
/// The longest one write to the bucket may take before the count is deemed unreachable.
const WRITE_WAIT: Duration = Duration::from_millis(500);

/// What this worker holds and runs of one tenant.
#[derive(Debug, Default)]
struct Local {
    held: u64,
    running: u64,
    waiting: usize,
}

/// The cluster's slots, in NATS, and this worker's part of them.
#[derive(Debug)]
pub struct NatsSlots {
    kv: kv::Store,
    me: String,
    members: Arc<Members>,
    /// Seals the holdings: forged ones (a client without the secret) count for nothing.
    trust: Trust,
    local: Mutex<HashMap<TenantId, Local>>,
    /// Serialises this worker's writes of its own holdings (a take and a give-back of the same
    /// tenant must not overwrite each other's count).
    writes: tokio::sync::Mutex<()>,
    /// Wakes the calls waiting here when one of this worker's calls finishes.
    freed: tokio::sync::Notify,
}

type Holdings = BTreeMap<String, u64>;

impl NatsSlots {
    /// The slots bucket (created on first use), with any holdings left under this worker's name
    /// by an earlier process of the same name dropped.
    ///
    /// # Errors
    /// JetStream is not reachable.
    pub async fn open(
        js: &async_nats::jetstream::Context,
        replicas: usize,
        me: String,
        members: Arc<Members>,
        trust: Trust,
    ) -> Result<Arc<NatsSlots>, ClusterError> {
        let kv = super::lasting_bucket(
            js,
            BUCKET,
            "wasmrpc: the call slots each worker holds, per tenant",
            replicas,
            "creating the slots bucket",
        )
        .await?;
        let slots = Arc::new(NatsSlots {
            kv,
            me,
            members,
            trust,
            local: Mutex::new(HashMap::new()),
            writes: tokio::sync::Mutex::new(()),
            freed: tokio::sync::Notify::new(),
        });
        let mut keys = slots
            .kv
            .keys()
            .await
            .map_err(|e| ClusterError::nats("listing the slots", e))?;
        let mut stale = Vec::new();
        while let Some(key) = keys.next().await {
            stale.push(key.map_err(|e| ClusterError::nats("listing the slots", e))?);
        }
        for key in stale {
            let writing = slots.writes.lock().await;
            slots
                .write_own(&writing, &key, |_| Some(0))
                .await
                .map_err(|e| ClusterError::Store(format!("clearing this worker's slots: {e}")))?;
        }
        Ok(slots)
    }

    fn local(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, Local>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Set this worker's holding of `key` to what `decide` says given the others' sum (`None`:
    /// leave it); returns whether it was written. Holdings of workers that are not live go. The
    /// caller holds `writes` (its guard is the proof).
    async fn write_own(
        &self,
        _writing: &tokio::sync::MutexGuard<'_, ()>,
        key: &str,
        decide: impl Fn(u64) -> Option<u64>,
    ) -> Result<bool, String> {
        let live: Vec<String> = self.members.live().into_iter().map(|w| w.name).collect();
        for _ in 0..ATTEMPTS {
            let entry = tokio::time::timeout(WRITE_WAIT, self.kv.entry(key))
                .await
                .map_err(|_| "NATS did not answer".to_owned())?
                .map_err(|e| e.to_string())?;
            let (mut holdings, revision): (Holdings, Option<u64>) = match &entry {
                Some(e) if e.operation == kv::Operation::Put => {
                    match self.trust.open(BUCKET, key, &e.value) {
                        Ok((value, _)) => (
                            serde_json::from_slice(value).map_err(|e| e.to_string())?,
                            Some(e.revision),
                        ),
                        // Not a worker's: overwritten as if empty.
                        Err(why) => {
                            self.trust.refused(Refused::Entry(BUCKET), why);
                            (Holdings::new(), Some(e.revision))
                        }
                    }
                }
                Some(e) => (Holdings::new(), Some(e.revision)),
                None => (Holdings::new(), None),
            };
            holdings.retain(|worker, _| *worker == self.me || live.contains(worker));
            let others: u64 = holdings
                .iter()
                .filter(|(worker, _)| **worker != self.me)
                .map(|(_, n)| n)
                .sum();
            let Some(own) = decide(others) else {
                return Ok(false);
            };
            if own == 0 {
                holdings.remove(&self.me);
            } else {
                holdings.insert(self.me.clone(), own);
            }
            let value = serde_json::to_vec(&holdings).map_err(|e| e.to_string())?;
            let value = self.trust.seal(BUCKET, key, &value);
            let written = match revision {
                Some(revision) => self.kv.update(key, value, revision).await.is_ok(),
                None => self.kv.create(key, value).await.is_ok(),
            };
            if written {
                return Ok(true);
            }
        }
        Err("the slots entry stayed contended".to_owned())
    }

    /// Take one more slot of `tenant` for this worker if the cluster's holdings leave one.
    async fn grow(&self, tenant: &TenantId, max: u64) -> Result<bool, String> {
        let key = hex::encode(tenant.as_str());
        // Under the write lock, the holding written and the local count move together: a
        // give-back in between only makes the written count one too high until its own write.
        let writing = self.writes.lock().await;
        let held = self.local().get(tenant).map_or(0, |l| l.held);
        let grown = self
            .write_own(&writing, &key, |others| {
                (others + held < max).then_some(held + 1)
            })
            .await?;
        if grown {
            self.local().entry(tenant.clone()).or_default().held += 1;
        }
        Ok(grown)
    }

    /// Write this worker's holding of `tenant` as what it holds now (after a give-back).
    async fn sync(self: Arc<Self>, tenant: TenantId) {
        let key = hex::encode(tenant.as_str());
        let writing = self.writes.lock().await;
        let written = self
            .write_own(&writing, &key, |_| {
                Some(self.local().get(&tenant).map_or(0, |l| l.held))
            })
            .await;
        if let Err(e) = written {
            tracing::warn!(error = %e, "giving call slots back to the cluster failed; they return when this worker leaves");
        }
    }

    /// A finished call of `tenant`: its slot goes to a call waiting here, or back to the
    /// cluster.
    fn release(self: &Arc<Self>, tenant: &TenantId) {
        let give_back = {
            let mut local = self.local();
            let Some(l) = local.get_mut(tenant) else {
                return;
            };
            l.running = l.running.saturating_sub(1);
            if l.waiting > 0 {
                false
            } else {
                l.held = l.held.saturating_sub(1);
                if l.held == 0 && l.running == 0 {
                    local.remove(tenant);
                }
                true
            }
        };
        if give_back {
            tokio::spawn(self.clone().sync(tenant.clone()));
        } else {
            self.freed.notify_waiters();
        }
    }

    /// Take a slot this worker holds and does not use.
    fn take_held(&self, tenant: &TenantId) -> bool {
        let mut local = self.local();
        let l = local.entry(tenant.clone()).or_default();
        if l.running < l.held {
            l.running += 1;
            true
        } else {
            false
        }
    }

    fn guard(self: &Arc<Self>, tenant: &TenantId) -> SlotGuard {
        let (slots, tenant) = (self.clone(), tenant.clone());
        SlotGuard::new(move || slots.release(&tenant))
    }
}

/// A call counted as waiting here while it lives.
struct Waiting {
    slots: Arc<NatsSlots>,
    tenant: TenantId,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let give_back = {
            let mut local = self.slots.local();
            let Some(l) = local.get_mut(&self.tenant) else {
                return;
            };
            l.waiting = l.waiting.saturating_sub(1);
            // The last waiter gave up: slots handed to it and not taken go back.
            let idle = l.held.saturating_sub(l.running);
            if l.waiting == 0 && idle > 0 {
                l.held -= idle;
                true
            } else {
                false
            }
        };
        if give_back {
            tokio::spawn(self.slots.clone().sync(self.tenant.clone()));
        }
    }
}

#[async_trait::async_trait]
impl CallSlots for Arc<NatsSlots> {
    async fn acquire(
        &self,
        tenant: &TenantId,
        max: u64,
        wait: Duration,
        max_waiting: usize,
    ) -> Result<SlotGuard, AdmissionError> {
        let deadline = Instant::now() + wait;
        let mut waiting: Option<Waiting> = None;
        loop {
            if self.take_held(tenant) {
                return Ok(self.guard(tenant));
            }
            match self.grow(tenant, max).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the cluster's call slots cannot be reached; this worker's own limits apply");
                    return Ok(SlotGuard::none());
                }
            }
            if waiting.is_none() {
                let mut local = self.local();
                let l = local.entry(tenant.clone()).or_default();
                if l.waiting >= max_waiting {
                    return Err(AdmissionError::TenantBusy {
                        running: usize::try_from(max).unwrap_or(usize::MAX),
                        queued: max_waiting,
                    });
                }
                l.waiting += 1;
                drop(local);
                waiting = Some(Waiting {
                    slots: self.clone(),
                    tenant: tenant.clone(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(AdmissionError::WaitedPastDeadline {
                    deadline_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                });
            }
            // A slot frees here (a notification) or elsewhere (seen at the next look).
            let freed = self.freed.notified();
            let _ = tokio::time::timeout(POLL.min(deadline - now), freed).await;
        }
    }
}

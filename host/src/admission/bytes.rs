//! The bytes of call bodies and decoded arguments in flight, server-wide and per tenant.
//!
//! Each call body may be up to `--max-request-bytes` (256 MiB by default), and without this
//! budget nothing bounded how many the server buffered at once: 10 000 connections of 1 024
//! HTTP/2 streams each could each hold one. A call takes its bytes from the budget as its body is
//! read (its `Content-Length` up front when it has one, frame by frame otherwise), grows its hold
//! to cover its decoded arguments, and gives it all back when its arguments are dropped (the
//! call ended, or was refused). Past the budget a request is refused at once, before its body is
//! read where its length is known: 429 RESOURCE_EXHAUSTED with `Retry-After`, like the full call
//! queue, because like the queue it is the server's capacity that ran out for now, not a fault.
//!
//! With keys, one tenant may hold at most its share of the budget (all but an eighth, as with
//! call slots), so that one tenant's large or slow bodies never take all of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::AdmissionError;
use crate::tenancy::TenantId;

/// The budget shared by every call of this server.
#[derive(Debug, Clone)]
pub struct BytesBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Bytes all calls may hold at once.
    total: usize,
    /// Bytes one tenant's calls may hold at once.
    tenant_share: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    held: usize,
    by_tenant: HashMap<TenantId, usize>,
}

/// A tenant's share of a budget of `total` bytes when tenants share the server
/// ([`super::one_tenants_share`], the rule of call slots and the queue too).
fn tenant_share_of(total: usize) -> usize {
    usize::try_from(super::one_tenants_share(total as u64)).unwrap_or(total)
}

impl BytesBudget {
    /// A budget of `total` bytes, of which one tenant may hold `tenant_share`.
    pub fn new(total: usize, tenant_share: usize) -> Self {
        BytesBudget {
            inner: Arc::new(Inner {
                total,
                tenant_share: tenant_share.min(total),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The budget of a server whose request bodies are at most `largest_body`: `total`, never
    /// less than one such body; with keys (`shared`), a tenant's share is all but an eighth of
    /// it, never less than one such body either.
    pub fn for_bodies(total: usize, largest_body: usize, shared: bool) -> Self {
        let total = total.max(largest_body);
        let share = if shared {
            tenant_share_of(total).max(largest_body)
        } else {
            total
        };
        BytesBudget::new(total, share)
    }

    /// Bytes held by every call now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.inner.lock().held
    }

    /// Take `bytes` for a call of `tenant`.
    ///
    /// # Errors
    /// [`AdmissionError::BytesBudget`] when the server's budget or the tenant's share would be
    /// passed; nothing is taken then.
    pub fn take(&self, tenant: &TenantId, bytes: usize) -> Result<BytesHeld, AdmissionError> {
        let mut held = BytesHeld {
            budget: self.inner.clone(),
            tenant: tenant.clone(),
            bytes: 0,
        };
        held.grow_to(bytes)?;
        Ok(held)
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Bytes one call holds; given back when dropped.
#[derive(Debug)]
pub struct BytesHeld {
    budget: Arc<Inner>,
    tenant: TenantId,
    bytes: usize,
}

impl BytesHeld {
    /// Hold `bytes` in all, more or fewer than now. Holding fewer always succeeds.
    ///
    /// # Errors
    /// [`AdmissionError::BytesBudget`] when holding more would pass the server's budget or the
    /// tenant's share; what was held before stays held.
    pub fn grow_to(&mut self, bytes: usize) -> Result<(), AdmissionError> {
        let inner = &*self.budget;
        let mut state = inner.lock();
        if bytes <= self.bytes {
            let less = self.bytes - bytes;
            state.held -= less;
            release_tenant(&mut state, &self.tenant, less);
            self.bytes = bytes;
            return Ok(());
        }
        let more = bytes - self.bytes;
        let tenant_held = state.by_tenant.get(&self.tenant).copied().unwrap_or(0);
        if state.held.saturating_add(more) > inner.total {
            return Err(AdmissionError::BytesBudget {
                needed: bytes,
                held: state.held - self.bytes,
                budget: inner.total,
                tenant: false,
            });
        }
        if tenant_held.saturating_add(more) > inner.tenant_share {
            return Err(AdmissionError::BytesBudget {
                needed: bytes,
                held: tenant_held - self.bytes,
                budget: inner.tenant_share,
                tenant: true,
            });
        }
        state.held += more;
        *state.by_tenant.entry(self.tenant.clone()).or_insert(0) += more;
        self.bytes = bytes;
        Ok(())
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

fn release_tenant(state: &mut State, tenant: &TenantId, bytes: usize) {
    if bytes == 0 {
        return;
    }
    if let Some(held) = state.by_tenant.get_mut(tenant) {
        *held -= bytes;
        if *held == 0 {
            state.by_tenant.remove(tenant);
        }
    }
}

impl Drop for BytesHeld {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.held -= self.bytes;
        release_tenant(&mut state, &self.tenant, self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_past_the_budget_are_refused_and_come_back_when_dropped() {
        let budget = BytesBudget::new(1000, 1000);
        let t = TenantId::new("t");
        let a = budget.take(&t, 600).unwrap();
        let mut b = budget.take(&t, 300).unwrap();
        let err = budget.take(&t, 200).unwrap_err();
        assert!(matches!(
            err,
            AdmissionError::BytesBudget {
                needed: 200,
                held: 900,
                budget: 1000,
                tenant: false
            }
        ));
        assert!(err.to_string().contains("--max-bytes-in-flight"), "{err}");
        // Growing past it fails and keeps what was held; shrinking always works.
        assert!(b.grow_to(500).is_err());
        assert_eq!((b.bytes(), budget.held()), (300, 900));
        b.grow_to(100).unwrap();
        assert_eq!(budget.held(), 700);
        b.grow_to(400).unwrap();
        drop(a);
        assert_eq!(budget.held(), 400);
        drop(b);
        assert_eq!(budget.held(), 0);
        budget.take(&t, 1000).unwrap();
    }

    #[test]
    fn one_tenant_cannot_take_the_whole_budget() {
        assert_eq!(tenant_share_of(1000), 875);
        let budget = BytesBudget::new(1000, tenant_share_of(1000));
        let (greedy, other) = (TenantId::new("greedy"), TenantId::new("other"));
        let held = budget.take(&greedy, 800).unwrap();
        let err = budget.take(&greedy, 100).unwrap_err();
        assert!(
            matches!(
                err,
                AdmissionError::BytesBudget {
                    tenant: true,
                    budget: 875,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("this tenant"), "{err}");
        // What the greedy tenant cannot take is left for another.
        let theirs = budget.take(&other, 200).unwrap();
        drop((held, theirs));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn the_budget_and_a_tenants_share_always_hold_the_largest_body() {
        let t = TenantId::new("t");
        // Set below the largest body: raised to it, for the whole and for a tenant.
        let small = BytesBudget::for_bodies(100, 1000, true);
        drop(small.take(&t, 1000).unwrap());
        assert!(small.take(&t, 1001).is_err());
        // Without keys the one tenant may hold it all; with keys all but an eighth.
        let keyless = BytesBudget::for_bodies(8000, 10, false);
        drop(keyless.take(&t, 8000).unwrap());
        let keyed = BytesBudget::for_bodies(8000, 10, true);
        drop(keyed.take(&t, 7000).unwrap());
        assert!(matches!(
            keyed.take(&t, 7001),
            Err(AdmissionError::BytesBudget { tenant: true, .. })
        ));
    }
}

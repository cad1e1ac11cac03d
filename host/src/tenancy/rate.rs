//! Calls per second per tenant: a token bucket that holds one second's worth of calls (so a
//! tenant may burst up to its rate at once) and refills continuously.
//!
//! Alone, a server keeps the buckets itself. In a cluster the bucket is the cluster's
//! ([`SharedRates`], kept in NATS by `cluster::rates`): a worker leases a few tokens at a time
//! from it and spends them locally, so the rate holds across workers without a round trip per
//! call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::TenantId;

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// What a lease from the cluster's bucket gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Leased {
    /// This many tokens (at least one), now this worker's to spend.
    Granted(u64),
    /// None left: the next one comes in this long.
    Empty(Duration),
    /// The shared bucket cannot be reached: the worker falls back to its own bucket.
    Unavailable,
}

/// The cluster's token buckets, one per tenant.
#[async_trait::async_trait]
pub trait SharedRates: Send + Sync + std::fmt::Debug {
    /// Take up to `want` tokens (at least one when any is there) from `tenant`'s bucket at
    /// `per_second`.
    async fn lease(&self, tenant: &TenantId, per_second: u64, want: u64) -> Leased;
}

/// Tokens leased from the cluster and not spent yet.
struct Lease {
    tokens: u64,
    /// Past this, unspent tokens are dropped: a worker that stopped getting calls must not sit on
    /// part of the tenant's rate.
    until: Instant,
}

/// How long leased tokens stay spendable.
const LEASE_LIFE: Duration = Duration::from_millis(200);

/// How much of a second's rate one lease asks for: small enough that the workers share a rate
/// closely, large enough that a busy worker leases at most about 20 times a second.
const LEASE_SHARE: u64 = 20;

/// The buckets of every tenant that has a rate.
#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<TenantId, Bucket>>,
    /// The cluster's buckets, once this server has joined one.
    shared: OnceLock<Arc<dyn SharedRates>>,
    leases: Mutex<HashMap<TenantId, Lease>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// Count rates against the cluster's buckets from now on (a worker joining a cluster).
    pub fn share(&self, shared: Arc<dyn SharedRates>) {
        let _ = self.shared.set(shared);
    }

    /// Take one call from `tenant`'s bucket at `per_second` (0: no limit).
    ///
    /// # Errors
    /// How long until the next call would be allowed, when the bucket is empty.
    pub async fn take(&self, tenant: &TenantId, per_second: u64) -> Result<(), Duration> {
        if per_second == 0 {
            return Ok(());
        }
        let Some(shared) = self.shared.get() else {
            return self.take_at(tenant, per_second, Instant::now());
        };
        if self.spend_leased(tenant, Instant::now()) {
            return Ok(());
        }
        let want = (per_second / LEASE_SHARE).max(1);
        match shared.lease(tenant, per_second, want).await {
            Leased::Granted(tokens) => {
                let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
                let lease = leases.entry(tenant.clone()).or_insert(Lease {
                    tokens: 0,
                    until: Instant::now(),
                });
                // This call spends one; the rest wait for the next calls.
                lease.tokens = lease.tokens.saturating_add(tokens - 1);
                lease.until = Instant::now() + LEASE_LIFE;
                Ok(())
            }
            Leased::Empty(retry_after) => Err(retry_after),
            Leased::Unavailable => self.take_at(tenant, per_second, Instant::now()),
        }
    }

    /// Spend one leased token of `tenant`, if a live lease has one.
    fn spend_leased(&self, tenant: &TenantId, now: Instant) -> bool {
        let mut leases = self.leases.lock().unwrap_or_else(PoisonError::into_inner);
        match leases.get_mut(tenant) {
            Some(lease) if lease.tokens > 0 && now < lease.until => {
                lease.tokens -= 1;
                true
            }
            Some(_) => {
                leases.remove(tenant);
                false
            }
            None => false,
        }
    }

    fn take_at(&self, tenant: &TenantId, per_second: u64, now: Instant) -> Result<(), Duration> {
        if per_second == 0 {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = buckets.entry(tenant.clone()).or_insert(Bucket {
            tokens: per_second as f64,
            last: now,
        });
        let (tokens, taken) = refill_and_take(bucket.tokens, bucket.last, now, per_second, 1);
        bucket.tokens = tokens;
        bucket.last = now;
        if taken == 1 {
            Ok(())
        } else {
            Err(wait_for_one(tokens, per_second))
        }
    }
}

/// A bucket at `per_second` that held `tokens` at `last`, refilled to `now` (never past one
/// second's worth: a lowered rate takes effect at once), then up to `want` whole tokens taken:
/// `(tokens left, tokens taken)`.
pub fn refill_and_take(
    tokens: f64,
    last: Instant,
    now: Instant,
    per_second: u64,
    want: u64,
) -> (f64, u64) {
    let elapsed = now.saturating_duration_since(last).as_secs_f64();
    refill_and_take_after(tokens, elapsed, per_second, want)
}

/// [`refill_and_take`] after `elapsed` seconds (the cluster's buckets keep wall-clock times).
pub fn refill_and_take_after(tokens: f64, elapsed: f64, per_second: u64, want: u64) -> (f64, u64) {
    let rate = per_second as f64;
    let tokens = (tokens + elapsed.max(0.0) * rate).min(rate);
    let taken = (tokens.floor() as u64).min(want);
    (tokens - taken as f64, taken)
}

/// How long until a bucket at `per_second` holding `tokens` has one.
pub fn wait_for_one(tokens: f64, per_second: u64) -> Duration {
    Duration::from_secs_f64(((1.0 - tokens) / per_second as f64).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_one_seconds_worth_then_the_rate() {
        let limiter = RateLimiter::default();
        let t = TenantId::new("t");
        let start = Instant::now();
        for _ in 0..5 {
            limiter.take_at(&t, 5, start).expect("within the burst");
        }
        let wait = limiter.take_at(&t, 5, start).unwrap_err();
        assert!(
            wait > Duration::from_millis(150) && wait <= Duration::from_millis(200),
            "{wait:?}"
        );
        // 200 ms later one more call is allowed, and only one.
        let later = start + Duration::from_millis(200);
        limiter.take_at(&t, 5, later).expect("refilled");
        assert!(limiter.take_at(&t, 5, later).is_err());
        // Other tenants have their own buckets; no rate is no limit.
        limiter
            .take_at(&TenantId::new("u"), 5, later)
            .expect("u's own bucket");
        for _ in 0..1000 {
            limiter.take_at(&t, 0, later).expect("no limit");
        }
    }

    /// The cluster's bucket for one tenant, in memory (the real one is in NATS: tested end to
    /// end in tests/e2e/cluster.rs), counting leases.
    #[derive(Debug)]
    struct OneBucket {
        state: Mutex<(f64, u64)>,
        reachable: bool,
    }

    #[async_trait::async_trait]
    impl SharedRates for OneBucket {
        async fn lease(&self, _: &TenantId, per_second: u64, want: u64) -> Leased {
            if !self.reachable {
                return Leased::Unavailable;
            }
            let mut state = self.state.lock().unwrap();
            let (left, taken) = refill_and_take_after(state.0, 0.0, per_second, want);
            *state = (left, state.1 + 1);
            if taken > 0 {
                Leased::Granted(taken)
            } else {
                Leased::Empty(wait_for_one(left, per_second))
            }
        }
    }

    #[tokio::test]
    async fn leased_tokens_are_spent_here_and_the_shared_bucket_bounds_them() {
        let shared = Arc::new(OneBucket {
            state: Mutex::new((100.0, 0)),
            reachable: true,
        });
        let limiter = RateLimiter::default();
        limiter.share(shared.clone());
        let t = TenantId::new("t");
        // 100 a second: leases of 5 (a twentieth), so 100 calls take 20 leases.
        for _ in 0..100 {
            limiter
                .take(&t, 100)
                .await
                .expect("within the shared burst");
        }
        assert_eq!(shared.state.lock().unwrap().1, 20);
        // The shared bucket is empty (no time passes in it here): refused, with a wait.
        let wait = limiter.take(&t, 100).await.unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(10),
            "{wait:?}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_shared_bucket_falls_back_to_this_servers_own() {
        let limiter = RateLimiter::default();
        limiter.share(Arc::new(OneBucket {
            state: Mutex::new((0.0, 0)),
            reachable: false,
        }));
        let t = TenantId::new("t");
        for _ in 0..3 {
            limiter.take(&t, 3).await.expect("the local burst");
        }
        assert!(limiter.take(&t, 3).await.is_err());
    }
}

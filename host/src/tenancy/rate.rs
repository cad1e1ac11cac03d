//! Calls per second per tenant: a token bucket that holds one second's worth of calls (so a
//! tenant may burst up to its rate at once) and refills continuously.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::TenantId;

struct Bucket {
    tokens: f64,
    last: Instant,
}

/// The buckets of every tenant that has a rate.
#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<TenantId, Bucket>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// Take one call from `tenant`'s bucket at `per_second` (0: no limit).
    ///
    /// # Errors
    /// How long until the next call would be allowed, when the bucket is empty.
    pub fn take(&self, tenant: &TenantId, per_second: u64) -> Result<(), Duration> {
        self.take_at(tenant, per_second, Instant::now())
    }

    fn take_at(&self, tenant: &TenantId, per_second: u64, now: Instant) -> Result<(), Duration> {
        if per_second == 0 {
            return Ok(());
        }
        let rate = per_second as f64;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let bucket = buckets.entry(tenant.clone()).or_insert(Bucket {
            tokens: rate,
            last: now,
        });
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        // A lowered rate takes effect at once: the bucket never holds more than one second's worth.
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }
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
}

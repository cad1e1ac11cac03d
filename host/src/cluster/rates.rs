//! The cluster's call-rate buckets (`calls_per_second` across workers): one entry per tenant in
//! the key-value bucket `wasmrpc_rates`, holding its tokens and when they were counted. A worker
//! leases a few tokens at a time with a compare-and-set on the entry's revision
//! ([`crate::tenancy::rate`] spends them), so two workers never spend the same token.
//!
//! Entries expire [`RATE_TTL`] after their last lease: a tenant idle that long starts again with
//! a full bucket, as it would have anyway. Times are the workers' wall clocks, so workers on
//! several machines need their clocks in step (NTP) for the rate to be exact.

use std::time::Duration;

use async_nats::jetstream::kv;

use super::ClusterError;
use super::trust::{Refused, Trust, now_ms};
use crate::tenancy::TenantId;
use crate::tenancy::rate::{Leased, SharedRates, refill_and_take_after, wait_for_one};

/// The bucket of tenants' tokens.
pub const BUCKET: &str = "wasmrpc_rates";
/// How long an entry outlives its last lease.
pub const RATE_TTL: Duration = Duration::from_secs(60);
/// Compare-and-set attempts before a lease gives up (and the worker counts alone).
const ATTEMPTS: usize = 8;
/// The longest a lease may take.
const LEASE_WAIT: Duration = Duration::from_millis(500);

/// The cluster's buckets, in NATS.
#[derive(Debug, Clone)]
pub struct NatsRates {
    kv: kv::Store,
    /// Seals the tokens: a forged entry (a client without the secret) counts as a full bucket.
    trust: Trust,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct State {
    tokens: f64,
    /// Milliseconds since the epoch when `tokens` was counted.
    at_ms: u64,
}

impl NatsRates {
    /// The rates bucket (created on first use).
    ///
    /// # Errors
    /// JetStream is not reachable.
    pub async fn open(
        js: &async_nats::jetstream::Context,
        replicas: usize,
        trust: Trust,
    ) -> Result<NatsRates, ClusterError> {
        let kv = super::expiring_bucket(
            js,
            BUCKET,
            "wasmrpc: tenants' call-rate tokens",
            RATE_TTL,
            replicas,
            "creating the rates bucket",
        )
        .await?;
        Ok(NatsRates { kv, trust })
    }

    async fn try_lease(
        &self,
        key: &str,
        per_second: u64,
        want: u64,
    ) -> Result<Option<Leased>, String> {
        let entry = self.kv.entry(key).await.map_err(|e| e.to_string())?;
        let now = now_ms();
        let (held, revision) = match &entry {
            Some(e) if e.operation == kv::Operation::Put => {
                match self.trust.open(BUCKET, key, &e.value) {
                    Ok((value, _)) => {
                        let state: State =
                            serde_json::from_slice(value).map_err(|e| e.to_string())?;
                        let elapsed = now.saturating_sub(state.at_ms) as f64 / 1e3;
                        (Some((state.tokens, elapsed)), Some(e.revision))
                    }
                    Err(why) => {
                        self.trust.refused(Refused::Entry(BUCKET), why);
                        (None, Some(e.revision))
                    }
                }
            }
            Some(e) => (None, Some(e.revision)),
            None => (None, None),
        };
        // A tenant seen for the first time (or idle past the TTL) has a full bucket.
        let (tokens, elapsed) = held.unwrap_or((per_second as f64, 0.0));
        let (left, taken) = refill_and_take_after(tokens, elapsed, per_second, want);
        let value = serde_json::to_vec(&State {
            tokens: left,
            at_ms: now,
        })
        .map_err(|e| e.to_string())?;
        let value = self.trust.seal(BUCKET, key, &value);
        let written = match revision {
            Some(revision) => self.kv.update(key, value, revision).await.is_ok(),
            None => self.kv.create(key, value).await.is_ok(),
        };
        if !written {
            // Another worker leased meanwhile: read again.
            return Ok(None);
        }
        Ok(Some(if taken > 0 {
            Leased::Granted(taken)
        } else {
            Leased::Empty(wait_for_one(left, per_second))
        }))
    }
}

#[async_trait::async_trait]
impl SharedRates for NatsRates {
    async fn lease(&self, tenant: &TenantId, per_second: u64, want: u64) -> Leased {
        // A call never waits long on NATS for its rate: past this, the worker counts alone.
        tokio::time::timeout(LEASE_WAIT, self.lease_now(tenant, per_second, want))
            .await
            .unwrap_or_else(|_| {
                tracing::warn!("the cluster's rate bucket is slow to answer; counting this worker's calls alone");
                Leased::Unavailable
            })
    }
}

impl NatsRates {
    async fn lease_now(&self, tenant: &TenantId, per_second: u64, want: u64) -> Leased {
        let key = hex::encode(tenant.as_str());
        for _ in 0..ATTEMPTS {
            match self.try_lease(&key, per_second, want).await {
                Ok(Some(leased)) => return leased,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "the cluster's rate bucket cannot be reached; counting this worker's calls alone");
                    return Leased::Unavailable;
                }
            }
        }
        tracing::warn!(
            tenant = tenant.as_str(),
            "the cluster's rate bucket stayed contended; counting this worker's calls alone"
        );
        Leased::Unavailable
    }
}

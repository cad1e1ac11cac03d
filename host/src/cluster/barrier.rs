//! Barriers across the processes of a cluster (Paddle's `shutdown`): each member puts its key in
//! the key-value bucket `wasmrpc_barriers` and waits, watching the barrier's keys, until `count`
//! distinct members have arrived.
//!
//! Keys expire after [`BARRIER_TTL`], after which a barrier's name can be used again.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation};
use futures_util::StreamExt as _;

use super::ClusterError;
use super::trust::{Refused, Trust};
use crate::tenancy::TenantId;

/// The bucket of barrier arrivals.
pub const BUCKET: &str = "wasmrpc_barriers";
/// How long an arrival is kept.
pub const BARRIER_TTL: Duration = Duration::from_secs(60);

/// The barrier bucket (created on first use).
///
/// # Errors
/// JetStream is not reachable.
pub async fn bucket(
    js: &async_nats::jetstream::Context,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    super::expiring_bucket(
        js,
        BUCKET,
        "wasmrpc: arrivals at barriers",
        BARRIER_TTL,
        replicas,
        "creating the barriers bucket",
    )
    .await
}

/// Why a barrier could not be passed.
#[derive(Debug, thiserror::Error)]
pub enum BarrierError {
    /// NATS failed.
    #[error("{0}")]
    Nats(String),
}

/// Arrive at barrier `name` of `tenant` as `member`; returns the members that arrived once there
/// are `count` of them. The caller bounds the wait.
///
/// # Errors
/// NATS failed.
pub async fn arrive(
    kv: &kv::Store,
    trust: &Trust,
    tenant: &TenantId,
    name: &str,
    member: &str,
    count: usize,
) -> Result<Vec<String>, BarrierError> {
    let prefix = format!("{}.{}", hex::encode(tenant.as_str()), hex::encode(name));
    // Watch first, so no arrival between the put and the watch is missed.
    let mut arrivals = kv
        .watch_with_history(format!("{prefix}.*"))
        .await
        .map_err(|e| BarrierError::Nats(e.to_string()))?;
    let key = format!("{prefix}.{}", hex::encode(member));
    kv.put(&key, trust.seal(BUCKET, &key, b""))
        .await
        .map_err(|e| BarrierError::Nats(e.to_string()))?;
    let mut seen = BTreeSet::new();
    while let Some(entry) = arrivals.next().await {
        let entry = entry.map_err(|e| BarrierError::Nats(e.to_string()))?;
        let Some(who) = entry
            .key
            .rsplit('.')
            .next()
            .and_then(|h| hex::decode(h).ok())
            .and_then(|b| String::from_utf8(b).ok())
        else {
            continue;
        };
        match entry.operation {
            Operation::Put => {
                if let Err(why) = trust.open(BUCKET, &entry.key, &entry.value) {
                    // A forged arrival (a client without the secret) does not count.
                    trust.refused(Refused::Entry(BUCKET), why);
                    continue;
                }
                seen.insert(who);
            }
            Operation::Delete | Operation::Purge => {
                seen.remove(&who);
            }
        }
        if seen.len() >= count {
            return Ok(seen.into_iter().collect());
        }
    }
    Err(BarrierError::Nats("the barrier's watch ended".into()))
}

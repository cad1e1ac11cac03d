//! The tenant directory the workers share: the whole directory (tenants, hashed keys, quota
//! settings: small by nature) as one value of the key-value bucket `wasmrpc_tenants`. A change is
//! a compare-and-set on the revision this worker last saw, so two workers changing it at once
//! cannot overwrite each other (the second gets ABORTED and tries again); a watch brings every
//! change to every worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation};
use futures_util::StreamExt as _;

use super::ClusterError;
use super::trust::{Refused, Trust, Untrusted, now_ms};
use crate::tenancy::TenantDirectory;
use crate::tenancy::directory::SharedDirectory;

/// The bucket of the shared directory.
pub const BUCKET: &str = "wasmrpc_tenants";
/// Its one key.
const KEY: &str = "directory";

/// The shared copy, as [`TenantDirectory`] publishes to it.
struct NatsDirectory {
    kv: kv::Store,
    /// The revision of the copy this worker holds (0: none yet).
    revision: Arc<AtomicU64>,
    runtime: tokio::runtime::Handle,
    trust: Trust,
    /// When the copy this worker holds was sealed: a newer copy is sealed later still (see
    /// [`next_seal`]), so an older one put back (a replay, say of a revoked key) is refused.
    sealed: Arc<AtomicU64>,
}

/// The time to seal the next copy at: now, or just after the copy held if this worker's clock
/// is behind the writer's, so the copies' times always increase.
fn next_seal(sealed: &AtomicU64) -> u64 {
    now_ms().max(sealed.load(Ordering::Acquire).saturating_add(1))
}

impl SharedDirectory for NatsDirectory {
    fn publish(&self, bytes: &[u8]) -> Result<(), String> {
        let (kv, revision) = (self.kv.clone(), self.revision.load(Ordering::Acquire));
        let at = next_seal(&self.sealed);
        let bytes = self.trust.seal_at(BUCKET, KEY, bytes, at);
        // The directory's changes are synchronous (as its file writes are): the NATS round trip
        // runs on the server's runtime from a thread of its own, while this one waits.
        let runtime = self.runtime.clone();
        let published = std::thread::scope(|s| {
            s.spawn(|| {
                runtime.block_on(async {
                    if revision == 0 {
                        kv.create(KEY, bytes).await.map_err(|e| e.to_string())
                    } else {
                        kv.update(KEY, bytes, revision)
                            .await
                            .map_err(|e| e.to_string())
                    }
                })
            })
            .join()
        });
        match published {
            Ok(Ok(next)) => {
                self.revision.fetch_max(next, Ordering::AcqRel);
                self.sealed.fetch_max(at, Ordering::AcqRel);
                Ok(())
            }
            Ok(Err(e)) => Err(format!(
                "the cluster's tenant directory was not changed ({e}): another worker may have \
                 changed it at the same moment; try again"
            )),
            Err(_) => Err("publishing the tenant directory failed".to_owned()),
        }
    }
}

/// Share `directory` with the cluster: adopt the cluster's copy if there is one (else publish
/// this one as the first), then follow every change.
///
/// # Errors
/// NATS failed, or the shared copy is unreadable.
pub async fn share(
    js: &async_nats::jetstream::Context,
    replicas: usize,
    directory: Arc<TenantDirectory>,
    trust: Trust,
) -> Result<(), ClusterError> {
    let kv = super::lasting_bucket(
        js,
        BUCKET,
        "wasmrpc: the tenant directory every worker shares",
        replicas,
        "creating the tenants bucket",
    )
    .await?;
    let revision = Arc::new(AtomicU64::new(0));
    let sealed = Arc::new(AtomicU64::new(0));
    let local = directory.share(Box::new(NatsDirectory {
        kv: kv.clone(),
        revision: revision.clone(),
        runtime: tokio::runtime::Handle::current(),
        trust: trust.clone(),
        sealed: sealed.clone(),
    }));
    let following = Following {
        directory: directory.clone(),
        revision: revision.clone(),
        trust: trust.clone(),
        sealed: sealed.clone(),
    };
    let current = kv
        .entry(KEY)
        .await
        .map_err(|e| ClusterError::nats("reading the tenant directory", e))?
        .filter(|e| e.operation == Operation::Put);
    let first = now_ms();
    let current = match current {
        Some(entry) => entry,
        // The first worker with keys: its directory becomes the cluster's.
        None => match kv
            .create(KEY, trust.seal_at(BUCKET, KEY, &local, first))
            .await
        {
            Ok(r) => {
                revision.store(r, Ordering::Release);
                sealed.store(first, Ordering::Release);
                tokio::spawn(follow(kv, following));
                return Ok(());
            }
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => kv
                .entry(KEY)
                .await
                .map_err(|e| ClusterError::nats("reading the tenant directory", e))?
                .ok_or_else(|| ClusterError::Store("the tenant directory vanished".into()))?,
            Err(e) => return Err(ClusterError::nats("publishing the tenant directory", e)),
        },
    };
    let (value, at) = trust.open(BUCKET, KEY, &current.value).map_err(|why| {
        ClusterError::Store(format!(
            "the tenant directory in NATS (bucket {BUCKET}, key {KEY}) cannot be trusted: {why}. \
             Either this worker's cluster secret differs from the other workers' (give every \
             worker the same --cluster-secret-file), or the directory was written without one \
             (before the cluster had a secret, or forged): delete it (`nats kv del {BUCKET} \
             {KEY}`) and start the workers again; the first publishes its own"
        ))
    })?;
    directory
        .adopt(value)
        .map_err(|e| ClusterError::Store(e.to_string()))?;
    revision.store(current.revision, Ordering::Release);
    sealed.store(at, Ordering::Release);
    tokio::spawn(follow(kv, following));
    Ok(())
}

/// What following the shared copy updates.
struct Following {
    directory: Arc<TenantDirectory>,
    revision: Arc<AtomicU64>,
    trust: Trust,
    sealed: Arc<AtomicU64>,
}

/// Adopt every newer copy of the directory, for as long as the connection lives.
async fn follow(kv: kv::Store, following: Following) {
    let Following {
        directory,
        revision,
        trust,
        sealed,
    } = following;
    loop {
        let mut changes = match kv.watch_with_history(KEY).await {
            Ok(changes) => changes,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the tenant directory; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        while let Some(change) = changes.next().await {
            let Ok(change) = change else { break };
            if change.operation != Operation::Put
                || change.revision <= revision.load(Ordering::Acquire)
            {
                continue;
            }
            let opened = match trust.open(BUCKET, KEY, &change.value) {
                // An older copy put back is refused like a forged one.
                Ok((_, at)) if trust.enforced() && at <= sealed.load(Ordering::Acquire) => {
                    Err(Untrusted::Stale)
                }
                opened => opened,
            };
            let (value, at) = match opened {
                Ok(opened) => opened,
                Err(why) => {
                    trust.refused(Refused::Entry(BUCKET), why);
                    // The next change made here writes over it (a compare-and-set on the
                    // revision it took), rather than failing on it forever.
                    revision.fetch_max(change.revision, Ordering::AcqRel);
                    continue;
                }
            };
            match directory.adopt(value) {
                Ok(()) => {
                    revision.fetch_max(change.revision, Ordering::AcqRel);
                    sealed.fetch_max(at, Ordering::AcqRel);
                }
                Err(e) => tracing::warn!(error = %e, "could not adopt the tenant directory"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

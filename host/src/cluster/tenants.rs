//! The tenant directory the workers share: the whole directory (tenants, hashed keys, quota
//! settings: small by nature) as one value of the key-value bucket `wasmrpc_tenants`. A change is
//! a compare-and-set on the revision this worker last saw, so two workers changing it at once
//! cannot overwrite each other (the second gets ABORTED and tries again); a watch brings every
//! change to every worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation};
use bytes::Bytes;
use futures_util::StreamExt as _;

use super::ClusterError;
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
}

impl SharedDirectory for NatsDirectory {
    fn publish(&self, bytes: &[u8]) -> Result<(), String> {
        let (kv, revision) = (self.kv.clone(), self.revision.load(Ordering::Acquire));
        let bytes = Bytes::copy_from_slice(bytes);
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
    let local = directory.share(Box::new(NatsDirectory {
        kv: kv.clone(),
        revision: revision.clone(),
        runtime: tokio::runtime::Handle::current(),
    }));
    let current = kv
        .entry(KEY)
        .await
        .map_err(|e| ClusterError::nats("reading the tenant directory", e))?
        .filter(|e| e.operation == Operation::Put);
    let current = match current {
        Some(entry) => entry,
        // The first worker with keys: its directory becomes the cluster's.
        None => match kv.create(KEY, Bytes::from(local)).await {
            Ok(r) => {
                revision.store(r, Ordering::Release);
                tokio::spawn(follow(kv, directory, revision));
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
    directory
        .adopt(&current.value)
        .map_err(|e| ClusterError::Store(e.to_string()))?;
    revision.store(current.revision, Ordering::Release);
    tokio::spawn(follow(kv, directory, revision));
    Ok(())
}

/// Adopt every newer copy of the directory, for as long as the connection lives.
async fn follow(kv: kv::Store, directory: Arc<TenantDirectory>, revision: Arc<AtomicU64>) {
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
            match directory.adopt(&change.value) {
                Ok(()) => {
                    revision.fetch_max(change.revision, Ordering::AcqRel);
                }
                Err(e) => tracing::warn!(error = %e, "could not adopt the tenant directory"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! The module store of a cluster: the [`Registry`] trait on JetStream. Component bytes live in the
//! object store `wasmrpc_blobs` under their digest (verified on every load, as locally);
//! registrations in the key-value bucket `wasmrpc_registrations`, one key per (tenant, name,
//! version), each value a [`record`] as the local store writes it, sealed with the cluster's
//! secret ([`super::trust`]): a record a worker of the cluster did not write is never indexed.
//!
//! Every worker keeps the same in-memory index as the local store, loaded at start and then fed by
//! a watch of the bucket, so a registration made through any worker is visible on all of them as
//! soon as NATS delivers it. A version number is taken with a compare-and-set create of its key, so
//! two workers registering the same name at once get different versions.
//!
//! A write is sent only while the connection to NATS is up: the NATS client keeps what is
//! published while it is cut off and sends it when it reconnects, so a write refused with "try
//! again" would otherwise be applied later, behind the client's back. One sent whose
//! acknowledgement does not come in time may or may not be applied, and the error says so.
//!
//! A blob stays while any registration (of any tenant) uses it; each worker sweeps the unused
//! ones every few minutes, once they have been unused and unwritten for [`BLOB_GRACE`]
//! ([`NatsRegistry::sweep_blobs`]).

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation};
use async_nats::jetstream::object_store::{self, GetErrorKind, ObjectStore};
use bytes::Bytes;
use futures_util::StreamExt as _;
use tokio::io::AsyncReadExt as _;

use super::ClusterError;
use super::trust::{Refused, Trust, now_ms};
use crate::registry::index::RegistrationIndex;
use crate::registry::record;
use crate::registry::{Digest, NewRegistration, Registration, Registry, RegistryError};
use crate::tenancy::TenantId;

/// The bucket of registrations.
pub const REGISTRATIONS: &str = "wasmrpc_registrations";
/// The object store of component bytes.
pub const BLOBS: &str = "wasmrpc_blobs";
/// How long a registration's quota check waits for the index to reach the registration.
const QUOTA_CATCH_UP: Duration = Duration::from_secs(5);
/// How long a blob that no registration uses is kept: the sweep removes it after this, so a
/// registration of the same bytes in flight meanwhile finds it (and writes it again if older
/// than half of this).
pub const BLOB_GRACE: Duration = Duration::from_secs(600);
/// How often each worker sweeps the unused blobs.
const SWEEP_EVERY: Duration = Duration::from_secs(300);

/// A [`Registry`] whose truth is in JetStream. Cloning shares it.
#[derive(Clone)]
pub struct NatsRegistry {
    js: async_nats::jetstream::Context,
    kv: kv::Store,
    blobs: ObjectStore,
    index: Arc<RwLock<RegistrationIndex>>,
    /// The bucket revision of each registration in the index (by key), and the last revision the
    /// index has applied: what the quota check after a registration needs (see `register`).
    revisions: Arc<RwLock<std::collections::HashMap<String, u64>>>,
    applied: Arc<tokio::sync::watch::Sender<u64>>,
    /// Serialises this worker's writes, so its own quota checks and version picks do not race
    /// each other (other workers' writes are ordered by the compare-and-set creates).
    write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Seals each record, so one a client without the secret writes is never indexed.
    trust: Trust,
}

impl std::fmt::Debug for NatsRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsRegistry").finish_non_exhaustive()
    }
}

/// The key of one version: tenant and name in hex (a key allows few characters), then the version.
fn key(tenant: &str, name: &str, version: u32) -> String {
    format!("{}.{}.{version}", hex::encode(tenant), hex::encode(name))
}

/// (tenant, name, version) from a key.
fn parse_key(key: &str) -> Option<(TenantId, String, u32)> {
    let mut parts = key.split('.');
    let tenant = String::from_utf8(hex::decode(parts.next()?).ok()?).ok()?;
    let name = String::from_utf8(hex::decode(parts.next()?).ok()?).ok()?;
    let version = parts.next()?.parse().ok()?;
    parts
        .next()
        .is_none()
        .then(|| (TenantId::new(tenant), name, version))
}

/// A NATS failure: the shared store could not be reached (what was being done is logged; the
/// client is told to try again): reads, and writes no client sees (a blob no registration
/// refers to yet, a sweep's removal of one).
fn nats_err(what: &str, e: impl std::fmt::Display) -> RegistryError {
    tracing::warn!(error = %e, "{what}");
    RegistryError::Unreachable(format!(
        "the cluster's store cannot be reached ({what}); try again"
    ))
}

/// A write that was sent and not confirmed (NATS did not answer in time, or the connection
/// dropped): it may yet be applied, when NATS gets it, so the client must look before trying
/// again. `what` is the write, as the client would name it ("the registration of `add`").
fn unconfirmed(what: &str, e: impl std::fmt::Display) -> RegistryError {
    tracing::warn!(error = %e, "{what} was not confirmed");
    RegistryError::Unreachable(format!(
        "the cluster's store did not confirm {what} in time: it may or may not have been \
         applied; look before trying again"
    ))
}

/// A write refused before it was sent, the connection to NATS being down; `outcome` says what the
/// request had changed before ("nothing was changed; try again").
fn cut_off(outcome: &str) -> RegistryError {
    RegistryError::Unreachable(format!(
        "the cluster's store cannot be reached (NATS is not connected): {outcome}"
    ))
}

impl NatsRegistry {
    /// Whether a write may be sent: only while the connection to NATS is up. One published while
    /// it is down waits in the client and is sent when it reconnects (async-nats queues every
    /// command until then), long after the client here was told nothing was changed.
    fn connected(&self) -> bool {
        self.js.client().connection_state() == async_nats::connection::State::Connected
    }

    /// The revision of `k` if it holds exactly `record`: this worker's own write, which NATS
    /// stored but whose acknowledgement was lost (NATS restarting as it landed), so the client
    /// sent it again and was told the key exists. That write is this registration, not another
    /// worker's taking of the version (whose record would differ, at least in its time).
    async fn own_write(&self, k: &str, record: &Bytes) -> Option<u64> {
        match self.kv.entry(k).await {
            Ok(Some(entry)) if entry.operation == Operation::Put && entry.value == *record => {
                Some(entry.revision)
            }
            _ => None,
        }
    }

    /// Open (creating if needed) the buckets, load every registration, and start following the
    /// bucket: returns when the index holds everything committed before it was called.
    ///
    /// # Errors
    /// JetStream is not reachable, or a record cannot be read (or is of a newer format).
    pub async fn open(
        js: &async_nats::jetstream::Context,
        replicas: usize,
        trust: Trust,
    ) -> Result<NatsRegistry, ClusterError> {
        let kv = super::lasting_bucket(
            js,
            REGISTRATIONS,
            "wasmrpc: registrations, one key per tenant, name and version",
            replicas,
            "creating the registrations bucket",
        )
        .await?;
        let blobs = match js.get_object_store(BLOBS).await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: BLOBS.to_owned(),
                    description: Some("wasmrpc: component bytes by sha256 digest".to_owned()),
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::nats("creating the blob store", e))?,
        };
        // Everything up to `last` is read below; the watch takes over from the message after it
        // (replaying a change the read already saw is harmless: inserts and removals repeat).
        let last = js
            .get_stream(&kv.stream_name)
            .await
            .map_err(|e| ClusterError::nats("reading the registrations bucket", e))?
            .info()
            .await
            .map_err(|e| ClusterError::nats("reading the registrations bucket", e))?
            .state
            .last_sequence;
        let mut index = RegistrationIndex::default();
        let mut revisions = std::collections::HashMap::new();
        let mut keys = kv
            .keys()
            .await
            .map_err(|e| ClusterError::nats("listing registrations", e))?;
        while let Some(k) = keys.next().await {
            let k = k.map_err(|e| ClusterError::nats("listing registrations", e))?;
            let entry = kv
                .entry(&k)
                .await
                .map_err(|e| ClusterError::nats("reading a registration", e))?;
            if let Some(entry) = entry
                && entry.operation == Operation::Put
            {
                let value = match trust.open(REGISTRATIONS, &k, &entry.value) {
                    Ok((value, _)) => value,
                    Err(why) => {
                        trust.refused(Refused::Entry(REGISTRATIONS), why);
                        continue;
                    }
                };
                index.insert(decode(value).map_err(|e| ClusterError::Store(e.to_string()))?);
                revisions.insert(k, entry.revision);
            }
        }
        let registry = NatsRegistry {
            js: js.clone(),
            kv,
            blobs,
            index: Arc::new(RwLock::new(index)),
            revisions: Arc::new(RwLock::new(revisions)),
            applied: Arc::new(tokio::sync::watch::Sender::new(last)),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            trust,
        };
        tokio::spawn(registry.clone().follow(last + 1));
        tokio::spawn(registry.clone().sweep_forever());
        Ok(registry)
    }

    /// Apply every change of the bucket from revision `from` on, for as long as the connection
    /// lives (the watch is restarted where it stopped when it fails).
    async fn follow(self, mut from: u64) {
        loop {
            let mut changes = match self.kv.watch_all_from_revision(from).await {
                Ok(changes) => changes,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the registrations bucket; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            while let Some(change) = changes.next().await {
                let change = match change {
                    Ok(change) => change,
                    Err(e) => {
                        tracing::warn!(error = %e, "the registrations watch failed; restarting it");
                        break;
                    }
                };
                from = change.revision + 1;
                self.apply(
                    &change.key,
                    change.operation,
                    &change.value,
                    change.revision,
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn apply(&self, key: &str, operation: Operation, value: &[u8], revision: u64) {
        match operation {
            Operation::Put => match self.trust.open(REGISTRATIONS, key, value) {
                // Not written by a worker of this cluster: never indexed, never run.
                Err(why) => self.trust.refused(Refused::Entry(REGISTRATIONS), why),
                Ok((value, _)) => match decode(value) {
                    Ok(r) => {
                        self.index_mut().insert(r);
                        self.revisions_mut().insert(key.to_owned(), revision);
                    }
                    Err(e) => {
                        tracing::warn!(key, error = %e, "unreadable registration in the bucket");
                    }
                },
            },
            Operation::Delete | Operation::Purge => match parse_key(key) {
                Some((tenant, name, version)) => {
                    self.index_mut().remove_version(&tenant, &name, version);
                    self.revisions_mut().remove(key);
                }
                None => tracing::warn!(key, "unexpected key in the registrations bucket"),
            },
        }
        self.applied.send_if_modified(|applied| {
            let newer = revision > *applied;
            *applied = (*applied).max(revision);
            newer
        });
    }

    fn revisions_mut(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, std::collections::HashMap<String, u64>> {
        self.revisions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the registration committed at `revision` puts its tenant over `limits`, counting
    /// only the registrations committed before it. Two workers may pass the first check at the
    /// same moment (each index is a moment behind the other's writes); this one, run once the
    /// index has caught up with `revision`, orders them: the later one is refused.
    async fn over_quota_at(
        &self,
        new: &NewRegistration,
        digest: &Digest,
        size: u64,
        revision: u64,
    ) -> Option<String> {
        if new.limits.max_methods == 0 && new.limits.max_stored_bytes == 0 {
            return None;
        }
        let mut applied = self.applied.subscribe();
        let caught_up = tokio::time::timeout(
            QUOTA_CATCH_UP,
            applied.wait_for(|applied| *applied >= revision),
        )
        .await;
        if !matches!(caught_up, Ok(Ok(_))) {
            tracing::warn!(
                revision,
                "the registrations watch is behind; the quota was checked on this worker's view alone"
            );
            return None;
        }
        let earlier = {
            let index = self.index();
            let revisions = self
                .revisions
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            RegistrationIndex::from_registrations(
                index.list(&new.tenant).into_iter().flatten().filter(|r| {
                    revisions
                        .get(&key(r.tenant.as_str(), &r.name, r.version))
                        .is_some_and(|&at| at < revision)
                }),
            )
        };
        earlier.over_quota(&new.tenant, &new.name, digest, size, &new.limits)
    }

    fn index_mut(&self) -> std::sync::RwLockWriteGuard<'_, RegistrationIndex> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Store a blob unless it is there already (same digest, same size) and young: one older
    /// than half [`BLOB_GRACE`] is written again, so that the sweep, which removes only blobs
    /// older than [`BLOB_GRACE`], leaves alone a blob that is about to be referred to.
    async fn put_blob(&self, digest: &Digest, component: &[u8]) -> Result<(), RegistryError> {
        let name = digest.to_hex();
        if let Ok(info) = self.blobs.info(&name).await
            && !info.deleted
            && info.size == component.len()
            && !older_than(info.modified, BLOB_GRACE / 2)
        {
            return Ok(());
        }
        let mut reader = component;
        self.blobs
            .put(name.as_str(), &mut reader)
            .await
            .map_err(|e| nats_err("storing the component", e))?;
        Ok(())
    }
}

/// Whether an object last written at `modified` is older than `age` (one without a time is).
fn older_than(modified: Option<async_nats::datetime::DateTime>, age: Duration) -> bool {
    let Some(modified) = modified else {
        return true;
    };
    let written_ms = modified.unix_timestamp_nanos() / 1_000_000;
    i128::from(now_ms()) - written_ms
        > i128::from(u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
}

impl NatsRegistry {
    /// Remove every blob that no registration refers to and that was written more than `grace`
    /// ago; returns how many were removed. The index is first brought up to the bucket's last
    /// revision, so a registration committed before the sweep began counts; each blob is looked
    /// at again just before it goes.
    ///
    /// # Errors
    /// NATS cannot be reached, or the index does not catch up within a few seconds.
    pub async fn sweep_blobs(&self, grace: Duration) -> Result<usize, RegistryError> {
        let last = self
            .js
            .get_stream(&self.kv.stream_name)
            .await
            .map_err(|e| nats_err("reading the registrations bucket", e))?
            .info()
            .await
            .map_err(|e| nats_err("reading the registrations bucket", e))?
            .state
            .last_sequence;
        let mut applied = self.applied.subscribe();
        if !matches!(
            tokio::time::timeout(QUOTA_CATCH_UP, applied.wait_for(|a| *a >= last)).await,
            Ok(Ok(_))
        ) {
            return Err(RegistryError::Unreachable(
                "the registrations watch is behind; blobs were not swept".into(),
            ));
        }
        let unused = |info: &object_store::ObjectInfo| -> Option<Digest> {
            let digest: Digest = info.name.parse().ok()?;
            (!info.deleted && older_than(info.modified, grace) && !self.index().uses(&digest))
                .then_some(digest)
        };
        let mut candidates = Vec::new();
        let mut listed = self
            .blobs
            .list()
            .await
            .map_err(|e| nats_err("listing blobs", e))?;
        while let Some(info) = listed.next().await {
            let info = info.map_err(|e| nats_err("listing blobs", e))?;
            candidates.extend(unused(&info));
        }
        let mut removed = 0;
        for digest in candidates {
            let name = digest.to_hex();
            match self.blobs.info(&name).await {
                Ok(info) if unused(&info).is_some() => {}
                _ => continue,
            }
            self.blobs
                .delete(&name)
                .await
                .map_err(|e| nats_err("removing a blob", e))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Sweep every [`SWEEP_EVERY`] (with a worker's own offset, so workers do not sweep at the
    /// same moment), for as long as the process lives.
    async fn sweep_forever(self) {
        let offset = Duration::from_millis(u64::from_le_bytes(super::rand_id()) % 60_000);
        tokio::time::sleep(SWEEP_EVERY / 2 + offset).await;
        loop {
            match self.sweep_blobs(BLOB_GRACE).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "removed blobs no registration uses"),
                Err(e) => tracing::warn!(error = %e, "sweeping unused blobs"),
            }
            tokio::time::sleep(SWEEP_EVERY).await;
        }
    }
}

fn decode(value: &[u8]) -> Result<Arc<Registration>, RegistryError> {
    let text = std::str::from_utf8(value)
        .map_err(|e| RegistryError::Database(format!("a registration is not text: {e}")))?;
    record::decode(text)
}

#[async_trait::async_trait]
impl Registry for NatsRegistry {
    fn index(&self) -> RwLockReadGuard<'_, RegistrationIndex> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    async fn register(
        &self,
        new: NewRegistration,
        component: Arc<Vec<u8>>,
    ) -> Result<Arc<Registration>, RegistryError> {
        let digest = Digest::of(&component);
        if !self.connected() {
            return Err(cut_off("nothing was changed; try again"));
        }
        // A registration over its tenant's quota by this worker's view stores nothing: the blob
        // of one refused would stay until the sweep (checked again below, under the lock and
        // once committed, where a refusal leaves its blob to the sweep: another registration of
        // the same bytes may be on its way to use it).
        if let Some(why) = self.index().over_quota(
            &new.tenant,
            &new.name,
            &digest,
            component.len() as u64,
            &new.limits,
        ) {
            return Err(RegistryError::Quota(why));
        }
        // Unused blobs are swept only past BLOB_GRACE, and this writes one again when it is older
        // than half of that: it stays for the registration below (checked again after it). A
        // blob that lands late, without its registration, is swept like any unused one.
        self.put_blob(&digest, &component).await.map_err(|_| {
            RegistryError::Unreachable(
                "the cluster's store cannot be reached (storing the component): nothing was \
                 registered; try again"
                    .to_owned(),
            )
        })?;
        let _guard = self.write_lock.lock().await;
        if let Some(why) = self.index().over_quota(
            &new.tenant,
            &new.name,
            &digest,
            component.len() as u64,
            &new.limits,
        ) {
            return Err(RegistryError::Quota(why));
        }
        let mut version = self
            .index()
            .version_numbers(&new.tenant, &new.name)
            .last()
            .map_or(1, |v| v.saturating_add(1));
        loop {
            let registration = Registration {
                tenant: new.tenant.clone(),
                name: new.name.clone(),
                version,
                digest,
                size: component.len() as u64,
                created_ms: now_ms(),
                export: new.export.clone(),
                signature: new.signature.clone(),
            };
            let k = key(new.tenant.as_str(), &new.name, version);
            let record =
                self.trust
                    .seal(REGISTRATIONS, &k, record::encode(&registration).as_bytes());
            if !self.connected() {
                return Err(cut_off("nothing was changed; try again"));
            }
            let created = match self.kv.create(&k, record.clone()).await {
                Ok(revision) => Ok(revision),
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                    match self.own_write(&k, &record).await {
                        Some(revision) => Ok(revision),
                        None => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            match created {
                Ok(revision) => {
                    if let Some(why) = self
                        .over_quota_at(&new, &digest, component.len() as u64, revision)
                        .await
                    {
                        // Another worker's registration came first: this one is withdrawn.
                        let what = format!(
                            "the withdrawal of `{}` version {version} (over the tenant's quota)",
                            new.name
                        );
                        if !self.connected() {
                            return Err(cut_off(&format!(
                                "`{}` version {version} was registered over the tenant's quota \
                                 and is not withdrawn; look before trying again",
                                new.name
                            )));
                        }
                        self.kv
                            .delete(&k)
                            .await
                            .map_err(|e| unconfirmed(&what, e))?;
                        return Err(RegistryError::Quota(why));
                    }
                    // A sweep that began before this commit may still have taken the blob.
                    if !matches!(self.blobs.info(digest.to_hex()).await, Ok(info) if !info.deleted)
                    {
                        self.put_blob(&digest, &component).await.map_err(|_| {
                            RegistryError::Unreachable(format!(
                                "`{}` version {version} was registered, but the cluster's \
                                 store could not be reached to keep its component; look \
                                 before trying again",
                                new.name
                            ))
                        })?;
                    }
                    let registration = Arc::new(registration);
                    self.index_mut().insert(registration.clone());
                    self.revisions_mut().insert(k, revision);
                    return Ok(registration);
                }
                // Another worker took this version first: the next one.
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                    version = version.checked_add(1).ok_or_else(|| {
                        RegistryError::Database(format!("`{}` has run out of versions", new.name))
                    })?;
                }
                Err(e) => {
                    return Err(unconfirmed(
                        &format!("the registration of `{}` version {version}", new.name),
                        e,
                    ));
                }
            }
        }
    }

    async fn delete(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Vec<Arc<Registration>>, RegistryError> {
        let _guard = self.write_lock.lock().await;
        let removed: Vec<Arc<Registration>> = self
            .index()
            .list(tenant)
            .into_iter()
            .find(|versions| versions.first().is_some_and(|r| r.name == name))
            .unwrap_or_default()
            .into_iter()
            .filter(|r| version.is_none_or(|v| r.version == v))
            .collect();
        for (i, r) in removed.iter().enumerate() {
            // Versions are removed one by one: an error says which went before it.
            let before = (i > 0).then(|| {
                let versions: Vec<String> =
                    removed[..i].iter().map(|r| r.version.to_string()).collect();
                format!(
                    "version(s) {} of `{name}` were removed",
                    versions.join(", ")
                )
            });
            if !self.connected() {
                return Err(cut_off(&match &before {
                    None => "nothing was changed; try again".to_owned(),
                    Some(before) => format!("{before}, the others were not; try again"),
                }));
            }
            self.kv
                .delete(key(tenant.as_str(), name, r.version))
                .await
                .map_err(|e| {
                    let what = format!("the removal of `{name}` version {}", r.version);
                    match &before {
                        None => unconfirmed(&what, e),
                        Some(before) => unconfirmed(&format!("{what} ({before})"), e),
                    }
                })?;
            self.index_mut().remove_version(tenant, name, r.version);
        }
        Ok(removed)
    }

    async fn blob(&self, digest: Digest) -> Result<Vec<u8>, RegistryError> {
        let mut object = match self.blobs.get(digest.to_hex()).await {
            Ok(object) => object,
            Err(e) if e.kind() == GetErrorKind::NotFound => {
                return Err(RegistryError::MissingBlob(digest));
            }
            Err(e) => return Err(nats_err("loading a component", e)),
        };
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| nats_err("loading a component", e))?;
        let actual = Digest::of(&bytes);
        if actual != digest {
            return Err(RegistryError::Corrupt {
                expected: digest,
                actual,
            });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_any_tenant_and_name() {
        let k = key("team.a", "add-v2", 7);
        assert!(
            k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'),
            "{k}"
        );
        let (tenant, name, version) = parse_key(&k).expect("parses");
        assert_eq!(
            (tenant.as_str(), name.as_str(), version),
            ("team.a", "add-v2", 7)
        );
        assert!(parse_key("zz.00.1").is_none());
        assert!(parse_key("00.00.1.2").is_none());
    }
}

//! The single-node registry: component bytes in a content-addressed blob directory, registrations
//! in an embedded redb database (`<data-dir>/registry.redb`) whose commits are durable, so every
//! `register` that returned `Ok` survives a crash. Every registration is also kept in memory
//! ([`RegistrationIndex`]), loaded at open and changed under the write lock, so reads never touch
//! disk. The disk work is synchronous; the [`Registry`] impl runs it off the async workers (the
//! tests call it directly, through the `*_blocking` methods).

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use redb::{Database, ReadOnlyTable, ReadableTable, TableDefinition};

use super::blobs::{self, BlobStore};
use super::index::RegistrationIndex;
use super::record;
use super::{Digest, NewRegistration, Registration, Registry, RegistryError};
use crate::tenancy::TenantId;

/// Key: (tenant, name, version). redb compares tuples element by element (strings bytewise,
/// integers numerically), so one tenant's entries are contiguous, sorted by name and then by
/// version, and a name's versions are one range scan.
type Key = (&'static str, &'static str, u32);

/// Registrations, each stored as a [`record`] (versioned JSON, independent of the wire types).
const REGISTRATIONS: TableDefinition<Key, &str> = TableDefinition::new("registrations");

/// redb's default page cache may grow to 1 GiB; the metadata is tiny and memory is better left
/// to the components.
const DB_CACHE_BYTES: usize = 32 << 20;

/// A [`Registry`] on the local disk. Cloning shares it.
///
/// Only one process may open a data directory at a time (redb holds a lock on the database file);
/// inside it, one `LocalRegistry` is shared by all threads. Writes (`register`, `delete`) are
/// serialised by a mutex; reads come from the in-memory index and never wait for the disk.
#[derive(Clone)]
pub struct LocalRegistry {
    inner: Arc<Store>,
}

struct Store {
    data_dir: PathBuf,
    db: Database,
    blobs: BlobStore,
    /// Serialises metadata writes *together with* the blob checks and deletions that go with
    /// them and the index updates that follow their commits, so a `delete` cannot remove a blob
    /// that a concurrent `register` is about to point to, and the index never disagrees with disk.
    write_lock: Mutex<()>,
    /// Every registration, as committed.
    index: RwLock<RegistrationIndex>,
}

impl fmt::Debug for LocalRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalRegistry")
            .field("data_dir", &self.inner.data_dir)
            .finish_non_exhaustive()
    }
}

impl LocalRegistry {
    /// Open the registry in `data_dir`, creating the directory and the database if needed.
    ///
    /// Loads every registration into memory, and cleans up after a crash: unfinished blob
    /// writes are removed, and so are blobs no registration references (written by a `register`
    /// whose metadata never committed, or left by a `delete` interrupted between its commit and
    /// the blob removal).
    ///
    /// # Errors
    /// The directory cannot be created, the database cannot be opened (including: another
    /// process has it open), a record cannot be read (or is of a newer format), or the clean-up
    /// fails.
    pub fn open(data_dir: &Path) -> Result<LocalRegistry, RegistryError> {
        let created = !data_dir.is_dir();
        fs::create_dir_all(data_dir)?;
        if created && let Some(parent) = data_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            // Make the new data directory's own entry durable.
            blobs::sync_dir(parent)?;
        }

        // The database first: its file lock is what guarantees no other process is using this
        // data directory, which the blob store's temp-file clean-up relies on.
        let db = Database::builder()
            .set_cache_size(DB_CACHE_BYTES)
            .create(data_dir.join("registry.redb"))
            .map_err(db_err)?;
        // Create the table up front so read transactions never meet a missing table.
        let txn = db.begin_write().map_err(db_err)?;
        txn.open_table(REGISTRATIONS).map_err(db_err)?;
        txn.commit().map_err(db_err)?;
        // A freshly created database file needs its directory entry synced too.
        blobs::sync_dir(data_dir)?;

        let blobs = BlobStore::open(data_dir)?;
        let store = Store {
            data_dir: data_dir.to_path_buf(),
            db,
            blobs,
            write_lock: Mutex::new(()),
            index: RwLock::new(RegistrationIndex::default()),
        };
        // One pass over the records: they fill the index, which the clean-up then consults.
        let all = store.read(|table| {
            let mut out = Vec::new();
            for entry in table.iter().map_err(db_err)? {
                let (_, value) = entry.map_err(db_err)?;
                out.push(record::decode(value.value())?);
            }
            Ok(out)
        })?;
        *store.index.write().unwrap_or_else(PoisonError::into_inner) =
            RegistrationIndex::from_registrations(all);
        store.collect_orphans()?;
        Ok(LocalRegistry {
            inner: Arc::new(store),
        })
    }

    /// Store `component` and record a new version of `new.name` (see [`Registry::register`]).
    /// Blocks on disk.
    ///
    /// # Errors
    /// Storage or database failure; nothing is recorded then.
    #[cfg(test)]
    pub fn register_blocking(
        &self,
        new: NewRegistration,
        component: &[u8],
    ) -> Result<Arc<Registration>, RegistryError> {
        self.inner.register(new, component)
    }

    /// Remove every version of a name (see [`Registry::delete`]). Blocks on disk.
    ///
    /// # Errors
    /// Storage or database failure.
    #[cfg(test)]
    pub fn delete_blocking(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Vec<Arc<Registration>>, RegistryError> {
        self.inner.delete(tenant, name, None)
    }

    /// The component's bytes, verified against `digest`. Blocks on disk.
    ///
    /// # Errors
    /// [`RegistryError::MissingBlob`], [`RegistryError::Corrupt`], or storage failure.
    #[cfg(test)]
    pub fn blob_blocking(&self, digest: &Digest) -> Result<Vec<u8>, RegistryError> {
        self.inner.blobs.read(digest)
    }

    /// Run blocking store work on tokio's blocking pool.
    async fn off_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, RegistryError> + Send + 'static,
    ) -> Result<T, RegistryError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| RegistryError::Task(e.to_string()))?
    }
}

impl Store {
    /// Take the write lock. Poisoning is ignored: the mutex guards no data, and a panicking
    /// writer's uncommitted transaction was rolled back when it was dropped.
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `f` on a read snapshot of the registrations table.
    fn read<T>(
        &self,
        f: impl FnOnce(&ReadOnlyTable<Key, &'static str>) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let table = txn.open_table(REGISTRATIONS).map_err(db_err)?;
        f(&table)
    }

    /// Delete blobs no registration references; warn about registrations whose blob is gone.
    /// The index must hold every committed registration (it is loaded first).
    fn collect_orphans(&self) -> Result<(), RegistryError> {
        let _guard = self.lock();
        let referenced: HashSet<Digest> =
            self.index_read().all().iter().map(|r| r.digest).collect();

        let mut removed = 0usize;
        for digest in self.blobs.list()? {
            if !referenced.contains(&digest) && self.blobs.delete(&digest)? {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(removed, "removed blobs no registration references");
        }
        for digest in &referenced {
            if !self.blobs.contains(digest)? {
                tracing::warn!(%digest, "a registered component's blob is missing");
            }
        }
        Ok(())
    }
}

impl Store {
    fn register(
        &self,
        new: NewRegistration,
        component: &[u8],
    ) -> Result<Arc<Registration>, RegistryError> {
        let digest = Digest::of(component);
        // Written before taking the lock so that writing a large component does not hold up
        // other registrations. Until the metadata commits, nothing references it.
        self.blobs.write(&digest, component)?;

        let _guard = self.lock();
        // Quotas are checked under the lock, against what is committed, so two registrations at
        // once cannot both squeeze under a limit.
        if let Some(why) = self.index_read().over_quota(
            &new.tenant,
            &new.name,
            &digest,
            component.len() as u64,
            &new.limits,
        ) {
            // The blob was written before the lock; nothing refers to it unless another
            // registration already did.
            if !self.index_read().uses(&digest)
                && let Err(e) = self.blobs.delete(&digest)
            {
                tracing::warn!(%digest, error = %e, "could not remove a refused upload's blob");
            }
            return Err(RegistryError::Quota(why));
        }
        // A `delete` that ran between the write above and the lock saw no reference to this blob
        // and may have removed it: write it again if so (a cheap no-op otherwise). From here on
        // the lock keeps deletes out until the reference is committed.
        self.blobs.write(&digest, component)?;

        let txn = self.db.begin_write().map_err(db_err)?;
        let registration = {
            let mut table = txn.open_table(REGISTRATIONS).map_err(db_err)?;
            let newest = table
                .range(versions_of(new.tenant.as_str(), &new.name))
                .map_err(db_err)?
                .next_back()
                .transpose()
                .map_err(db_err)?
                .map(|(key, _)| key.value().2);
            let version = match newest {
                None => 1,
                Some(v) => v.checked_add(1).ok_or_else(|| {
                    RegistryError::Database(format!("`{}` has run out of versions", new.name))
                })?,
            };
            let registration = Registration {
                tenant: new.tenant,
                name: new.name,
                version,
                digest,
                size: component.len() as u64,
                created_ms: now_ms(),
                export: new.export,
                signature: new.signature,
            };
            let stored = record::encode(&registration);
            table
                .insert(
                    (
                        registration.tenant.as_str(),
                        registration.name.as_str(),
                        version,
                    ),
                    stored.as_str(),
                )
                .map_err(db_err)?;
            Arc::new(registration)
        };
        // Durability::Immediate (redb's default): fsynced when `commit` returns.
        txn.commit().map_err(db_err)?;
        self.index_mut().insert(registration.clone());
        Ok(registration)
    }

    fn index_read(&self) -> RwLockReadGuard<'_, RegistrationIndex> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn index_mut(&self) -> std::sync::RwLockWriteGuard<'_, RegistrationIndex> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn delete(
        &self,
        tenant_id: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Vec<Arc<Registration>>, RegistryError> {
        let tenant = tenant_id.as_str();
        let _guard = self.lock();
        let txn = self.db.begin_write().map_err(db_err)?;
        let (removed, unreferenced) = {
            let mut table = txn.open_table(REGISTRATIONS).map_err(db_err)?;
            let mut removed = Vec::new();
            let range = match version {
                None => versions_of(tenant, name),
                Some(v) => (tenant, name, v)..=(tenant, name, v),
            };
            for entry in table.range(range).map_err(db_err)? {
                let (_, value) = entry.map_err(db_err)?;
                removed.push(record::decode(value.value())?);
            }
            for r in &removed {
                table.remove((tenant, name, r.version)).map_err(db_err)?;
            }
            // Which of the removed blobs does nobody else (any name, any tenant) still use?
            let mut unreferenced: BTreeSet<Digest> = removed.iter().map(|r| r.digest).collect();
            if !unreferenced.is_empty() {
                for entry in table.iter().map_err(db_err)? {
                    let (_, value) = entry.map_err(db_err)?;
                    unreferenced.remove(&record::decode_digest(value.value())?);
                }
            }
            (removed, unreferenced)
        };
        if removed.is_empty() {
            txn.abort().map_err(db_err)?;
            return Ok(removed);
        }
        txn.commit().map_err(db_err)?;
        match version {
            None => self.index_mut().remove(tenant_id, name),
            Some(v) => self.index_mut().remove_version(tenant_id, name, v),
        }

        // Still under the lock, so no `register` can commit a new reference to these meanwhile.
        // The metadata is already gone: a blob that cannot be removed now is only an orphan,
        // which the next `open` collects, so it is logged rather than failing the delete.
        for digest in &unreferenced {
            if let Err(e) = self.blobs.delete(digest) {
                tracing::warn!(%digest, error = %e, "could not remove an unreferenced blob");
            }
        }
        Ok(removed)
    }
}

/// Every version of one name, as a key range.
fn versions_of<'a>(
    tenant: &'a str,
    name: &'a str,
) -> std::ops::RangeInclusive<(&'a str, &'a str, u32)> {
    (tenant, name, 0)..=(tenant, name, u32::MAX)
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A redb error, keeping an I/O failure (a full disk, too many open files) as one, so it can be
/// told apart by its kind rather than its text.
fn db_err(e: impl Into<redb::Error>) -> RegistryError {
    match e.into() {
        redb::Error::Io(io) => RegistryError::Io(io),
        other => RegistryError::Database(other.to_string()),
    }
}

#[async_trait::async_trait]
impl Registry for LocalRegistry {
    fn index(&self) -> RwLockReadGuard<'_, RegistrationIndex> {
        self.inner
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn register(
        &self,
        new: NewRegistration,
        component: Arc<Vec<u8>>,
    ) -> Result<Arc<Registration>, RegistryError> {
        self.off_thread(move |store| store.register(new, &component))
            .await
    }

    async fn delete(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Vec<Arc<Registration>>, RegistryError> {
        let (tenant, name) = (tenant.clone(), name.to_owned());
        self.off_thread(move |store| store.delete(&tenant, &name, version))
            .await
    }

    async fn blob(&self, digest: Digest) -> Result<Vec<u8>, RegistryError> {
        self.off_thread(move |store| store.blobs.read(&digest))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::{Lookup, RegistrationLimits, Usage};

    fn t(name: &str) -> TenantId {
        TenantId::new(name)
    }

    /// One version (`None`: the newest), as an owned value for comparisons.
    fn get(
        reg: &LocalRegistry,
        tenant: &str,
        name: &str,
        v: Option<u32>,
    ) -> Option<Arc<Registration>> {
        match Registry::get(reg, &t(tenant), name, v) {
            Lookup::Found(r) => Some(r),
            Lookup::NoSuchVersion | Lookup::NoSuchName => None,
        }
    }

    /// The newest version of every name of a tenant, sorted by name.
    fn list(reg: &LocalRegistry, tenant: &str) -> Vec<Arc<Registration>> {
        Registry::list(reg, &t(tenant))
            .into_iter()
            .filter_map(|versions| versions.last().cloned())
            .collect()
    }

    /// Every registration, sorted by (tenant, name, version) as the database orders them.
    fn list_all(reg: &LocalRegistry) -> Vec<Arc<Registration>> {
        let mut all = reg.all();
        all.sort_by(|a, b| {
            (a.tenant.as_str(), &a.name, a.version).cmp(&(b.tenant.as_str(), &b.name, b.version))
        });
        all
    }

    fn sig(name: &str) -> wasmrpc_proto::MethodSignature {
        wasmrpc_proto::MethodSignature {
            name: name.into(),
            inputs: vec![],
            outputs: vec![],
            doc: String::new(),
        }
    }

    fn new(tenant: &str, name: &str) -> NewRegistration {
        NewRegistration {
            tenant: t(tenant),
            name: name.into(),
            export: "add".into(),
            signature: sig("add"),
            limits: RegistrationLimits::default(),
        }
    }

    fn open(dir: &Path) -> LocalRegistry {
        LocalRegistry::open(dir).expect("open registry")
    }

    /// The blob files on disk.
    fn blob_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.join("blobs/sha256"))
            .expect("blob dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn versions<R: std::ops::Deref<Target = Registration>>(regs: &[R]) -> Vec<u32> {
        regs.iter().map(|r| r.version).collect()
    }

    fn versions_of(reg: &LocalRegistry, tenant: &str, name: &str) -> Vec<u32> {
        Registry::versions(reg, &t(tenant), name)
    }

    #[test]
    fn is_send_sync_and_usable_as_dyn_registry() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<LocalRegistry>();
        let dir = tempfile::tempdir().expect("tempdir");
        let registry: Arc<dyn Registry> = Arc::new(open(dir.path()));
        assert!(registry.list(&t("t")).is_empty());
    }

    #[test]
    fn versions_increment_and_restart_after_delete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        for expected in 1..=3 {
            let r = reg
                .register_blocking(new("t", "add"), b"v")
                .expect("register");
            assert_eq!(r.version, expected);
        }
        // Another name has its own counter.
        assert_eq!(
            reg.register_blocking(new("t", "mul"), b"m")
                .expect("register")
                .version,
            1
        );
        assert_eq!(versions_of(&reg, "t", "add"), [1, 2, 3]);

        let removed = reg.delete_blocking(&t("t"), "add").expect("delete");
        assert_eq!(versions(&removed), [1, 2, 3]);
        assert!(versions_of(&reg, "t", "add").is_empty());
        assert!(
            reg.delete_blocking(&t("t"), "add")
                .expect("second delete")
                .is_empty()
        );

        assert_eq!(
            reg.register_blocking(new("t", "add"), b"v")
                .expect("register")
                .version,
            1
        );
        assert_eq!(versions_of(&reg, "t", "mul"), [1]);
    }

    #[test]
    fn register_fills_in_metadata() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let bytes = b"\0asm\x0d\0\x01\0".to_vec();
        let r = reg
            .register_blocking(new("t", "add"), &bytes)
            .expect("register");
        assert_eq!(r.tenant.as_str(), "t");
        assert_eq!(r.name, "add");
        assert_eq!(r.export, "add");
        assert_eq!(r.signature, sig("add"));
        assert_eq!(r.digest, Digest::of(&bytes));
        assert_eq!(r.size, bytes.len() as u64);
        assert!(
            r.created_ms > 1_600_000_000_000,
            "created_ms = {}",
            r.created_ms
        );
        assert_eq!(reg.blob_blocking(&r.digest).expect("blob"), bytes);
    }

    #[test]
    fn get_with_and_without_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let v1 = reg
            .register_blocking(new("t", "add"), b"one")
            .expect("register");
        let v2 = reg
            .register_blocking(new("t", "add"), b"two")
            .expect("register");

        assert_eq!(get(&reg, "t", "add", None), Some(v2.clone()));
        assert_eq!(get(&reg, "t", "add", Some(1)), Some(v1.clone()));
        assert_eq!(get(&reg, "t", "add", Some(2)), Some(v2));
        assert_eq!(get(&reg, "t", "add", Some(3)), None);
        assert_eq!(get(&reg, "t", "nope", None), None);
        // A name that is a prefix of another is not confused with it.
        reg.register_blocking(new("t", "addx"), b"x")
            .expect("register");
        assert_eq!(get(&reg, "t", "add", Some(1)), Some(v1));
        assert_eq!(get(&reg, "t", "ad", None), None);
    }

    #[test]
    fn list_is_sorted_and_newest_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        for name in ["softmax", "add", "matmul", "add", "softmax", "add"] {
            reg.register_blocking(new("t", name), name.as_bytes())
                .expect("register");
        }
        let newest = list(&reg, "t");
        let summary: Vec<(&str, u32)> = newest
            .iter()
            .map(|r| (r.name.as_str(), r.version))
            .collect();
        assert_eq!(summary, [("add", 3), ("matmul", 1), ("softmax", 2)]);
        assert_eq!(list_all(&reg).len(), 6);
        assert!(list(&reg, "other").is_empty());
    }

    #[test]
    fn tenants_are_separate_namespaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let shared = b"shared component";
        reg.register_blocking(new("a", "add"), shared)
            .expect("register");
        reg.register_blocking(new("a", "add"), shared)
            .expect("register");
        let b1 = reg
            .register_blocking(new("b", "add"), shared)
            .expect("register");
        // A tenant whose name extends another's.
        reg.register_blocking(new("ab", "zzz"), b"ab")
            .expect("register");
        assert_eq!(b1.version, 1, "tenant b's versions do not count tenant a's");

        assert_eq!(versions(&list(&reg, "a")), [2]);
        assert_eq!(list(&reg, "b"), std::slice::from_ref(&b1));
        assert_eq!(list(&reg, "ab").len(), 1);
        assert_eq!(versions_of(&reg, "b", "add"), [1]);
        assert_eq!(get(&reg, "b", "add", Some(2)), None);

        // Deleting a's name leaves b's, and the blob b still uses.
        assert_eq!(
            reg.delete_blocking(&t("a"), "add").expect("delete").len(),
            2
        );
        assert_eq!(get(&reg, "b", "add", None), Some(b1.clone()));
        assert_eq!(reg.blob_blocking(&b1.digest).expect("blob"), shared);
        assert!(
            reg.delete_blocking(&t("a"), "zzz")
                .expect("delete")
                .is_empty()
        );
        assert_eq!(list(&reg, "ab").len(), 1);

        reg.delete_blocking(&t("b"), "add").expect("delete");
        assert!(matches!(
            reg.blob_blocking(&b1.digest),
            Err(RegistryError::MissingBlob(_))
        ));
    }

    #[test]
    fn same_bytes_under_two_names_is_one_blob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let a = reg
            .register_blocking(new("t", "add"), b"component")
            .expect("register");
        let b = reg
            .register_blocking(new("t", "plus"), b"component")
            .expect("register");
        assert_eq!(a.digest, b.digest);
        assert_eq!(blob_files(dir.path()), [a.digest.to_hex()]);
    }

    #[test]
    fn delete_removes_a_blob_only_when_unreferenced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let shared = reg
            .register_blocking(new("t", "add"), b"shared")
            .expect("register");
        reg.register_blocking(new("t", "plus"), b"shared")
            .expect("register");
        let own = reg
            .register_blocking(new("t", "add"), b"only add v2")
            .expect("register");

        // `add` goes: its v2 blob is unreferenced, its v1 blob is still used by `plus`.
        reg.delete_blocking(&t("t"), "add").expect("delete");
        assert_eq!(blob_files(dir.path()), [shared.digest.to_hex()]);
        assert!(matches!(
            reg.blob_blocking(&own.digest),
            Err(RegistryError::MissingBlob(_))
        ));
        assert_eq!(reg.blob_blocking(&shared.digest).expect("blob"), b"shared");

        reg.delete_blocking(&t("t"), "plus").expect("delete");
        assert!(blob_files(dir.path()).is_empty());
    }

    #[test]
    fn flipped_byte_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let r = reg
            .register_blocking(new("t", "add"), b"precious bytes")
            .expect("register");
        let path = dir.path().join("blobs/sha256").join(r.digest.to_hex());
        let mut bytes = fs::read(&path).expect("read blob file");
        bytes[0] ^= 0x80;
        fs::write(&path, &bytes).expect("damage blob file");
        match reg.blob_blocking(&r.digest) {
            Err(RegistryError::Corrupt { expected, actual }) => {
                assert_eq!(expected, r.digest);
                assert_eq!(actual, Digest::of(&bytes));
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn reopen_keeps_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let before = {
            let reg = open(dir.path());
            reg.register_blocking(new("a", "add"), b"one")
                .expect("register");
            reg.register_blocking(new("a", "add"), b"two")
                .expect("register");
            reg.register_blocking(new("b", "mul"), b"three")
                .expect("register");
            reg.register_blocking(new("b", "gone"), b"four")
                .expect("register");
            reg.delete_blocking(&t("b"), "gone").expect("delete");
            list_all(&reg)
        };
        let reg = open(dir.path());
        assert_eq!(list_all(&reg), before);
        for r in &before {
            assert_eq!(
                Digest::of(&reg.blob_blocking(&r.digest).expect("blob")),
                r.digest
            );
        }
        assert_eq!(blob_files(dir.path()).len(), 3);
        // Versions carry on from where they were.
        assert_eq!(
            reg.register_blocking(new("a", "add"), b"x")
                .expect("register")
                .version,
            3
        );
        assert_eq!(
            reg.register_blocking(new("b", "gone"), b"y")
                .expect("register")
                .version,
            1
        );
    }

    #[test]
    fn open_removes_orphan_blobs_and_temp_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = {
            let reg = open(dir.path());
            reg.register_blocking(new("t", "add"), b"kept")
                .expect("register")
        };
        // What a crash leaves: a blob whose registration never committed, a half-written temp.
        let orphan = Digest::of(b"orphan");
        fs::write(
            dir.path().join("blobs/sha256").join(orphan.to_hex()),
            b"orphan",
        )
        .expect("write orphan");
        fs::write(dir.path().join("blobs/tmp/partial.tmp"), b"orph").expect("write temp");

        let reg = open(dir.path());
        assert_eq!(blob_files(dir.path()), [kept.digest.to_hex()]);
        assert_eq!(
            fs::read_dir(dir.path().join("blobs/tmp"))
                .expect("tmp")
                .count(),
            0
        );
        assert_eq!(reg.blob_blocking(&kept.digest).expect("blob"), b"kept");
    }

    #[test]
    fn second_open_of_the_same_directory_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _reg = open(dir.path());
        assert!(matches!(
            LocalRegistry::open(dir.path()),
            Err(RegistryError::Database(_))
        ));
    }

    #[test]
    fn concurrent_registrations_of_the_same_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let bytes = vec![42u8; 64 * 1024];
        let mut got: Vec<u32> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        reg.register_blocking(new("t", "add"), &bytes)
                            .expect("register")
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread").version)
                .collect()
        });
        got.sort_unstable();
        assert_eq!(got, (1..=8).collect::<Vec<u32>>());
        assert_eq!(blob_files(dir.path()), [Digest::of(&bytes).to_hex()]);
        assert_eq!(
            fs::read_dir(dir.path().join("blobs/tmp"))
                .expect("tmp")
                .count(),
            0
        );
        assert_eq!(versions_of(&reg, "t", "add"), (1..=8).collect::<Vec<_>>());
    }

    /// A delete garbage-collecting a blob while another thread registers the same bytes must
    /// never leave a committed registration without its blob.
    #[test]
    fn delete_racing_register_never_loses_a_blob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let bytes = b"contended component".to_vec();
        // Both threads churn, so each one's delete often finds the blob unreferenced while the
        // other has written it but not yet committed its registration.
        std::thread::scope(|s| {
            for name in ["one", "two"] {
                let (reg, bytes) = (&reg, &bytes);
                s.spawn(move || {
                    for _ in 0..30 {
                        let r = reg
                            .register_blocking(new("t", name), bytes)
                            .expect("register");
                        // Reads run alongside the writers, without the lock.
                        list(reg, "t");
                        assert_eq!(&reg.blob_blocking(&r.digest).expect("blob"), bytes);
                        reg.delete_blocking(&t("t"), name).expect("delete");
                    }
                    reg.register_blocking(new("t", name), bytes)
                        .expect("final register");
                });
            }
        });
        let all = list_all(&reg);
        assert_eq!(all.len(), 2);
        for r in all {
            assert_eq!(
                reg.blob_blocking(&r.digest).expect("blob after race"),
                bytes
            );
        }
    }

    #[test]
    fn quotas_are_checked_per_tenant_under_the_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let limited = |tenant: &str, name: &str, max_methods, max_stored_bytes| NewRegistration {
            limits: RegistrationLimits {
                max_methods,
                max_stored_bytes,
            },
            ..new(tenant, name)
        };
        reg.register_blocking(limited("t", "one", 2, 0), b"aaaa")
            .expect("first name");
        reg.register_blocking(limited("t", "two", 2, 0), b"bbbb")
            .expect("second name");
        // A new version of a name is not a new method; a third name is over the quota.
        reg.register_blocking(limited("t", "two", 2, 0), b"cccc")
            .expect("new version");
        match reg.register_blocking(limited("t", "three", 2, 0), b"dddd") {
            Err(RegistryError::Quota(why)) => assert!(why.contains("max_methods (2)"), "{why}"),
            other => panic!("expected a quota error, got {other:?}"),
        }
        // Another tenant is not counted against t.
        reg.register_blocking(limited("u", "three", 2, 0), b"dddd")
            .expect("u's own quota");
        assert_eq!(
            reg.usage(&t("t")),
            Usage {
                methods: 2,
                stored_bytes: 12
            }
        );
        // Bytes: the same component again costs nothing; new bytes past the limit are refused.
        reg.register_blocking(limited("t", "one", 0, 12), b"aaaa")
            .expect("the same bytes again");
        match reg.register_blocking(limited("t", "one", 0, 12), b"eeee") {
            Err(RegistryError::Quota(why)) => {
                assert!(why.contains("max_stored_bytes (12)"), "{why}")
            }
            other => panic!("expected a quota error, got {other:?}"),
        }
        // Nothing refused was stored, not even its blob.
        assert_eq!(versions_of(&reg, "t", "three"), Vec::<u32>::new());
        assert!(matches!(
            reg.blob_blocking(&Digest::of(b"eeee")),
            Err(RegistryError::MissingBlob(_))
        ));
        assert_eq!(versions_of(&reg, "t", "one"), [1, 2]);
    }

    /// Whether a tenant itself uses some bytes is known per tenant, so that registering known
    /// bytes can skip the compile without telling a tenant that another stored the same bytes.
    #[test]
    fn a_tenants_own_use_of_a_blob_is_known_apart_from_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = open(dir.path());
        let r = reg
            .register_blocking(new("a", "add"), b"shared")
            .expect("register");
        assert!(reg.tenant_uses(&t("a"), &r.digest));
        assert!(!reg.tenant_uses(&t("b"), &r.digest));
        reg.register_blocking(new("b", "add"), b"shared")
            .expect("register");
        assert!(reg.tenant_uses(&t("b"), &r.digest));
        reg.delete_blocking(&t("a"), "add").expect("delete");
        assert!(!reg.tenant_uses(&t("a"), &r.digest));
        assert!(reg.uses(&r.digest), "b still uses the blob");
    }
}

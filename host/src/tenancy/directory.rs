//! The tenant directory: tenants, their keys (hashed) and quota settings, and who a request's key
//! belongs to.
//!
//! Kept in memory and persisted to `<data-dir>/tenants.json` (owner-only, written to a temporary
//! file, fsynced and renamed, so a crash leaves the old file or the new one). Small by nature:
//! tenants are teams, not users.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use super::TenantId;
use super::id::DEFAULT_TENANT;
use super::keys::{self, KeyHash, NewKey};
use super::quota::{Quota, QuotaPatch};

/// Keys a tenant may hold at once: one in use and one being rolled out.
pub const MAX_KEYS_PER_TENANT: usize = 2;

/// Who sent a request, as its key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A tenant, by one of its keys (or the implicit tenant of a server without authentication).
    Tenant(TenantId),
    /// The admin key.
    Admin,
}

/// Why a request's credentials were refused. Unknown and revoked keys are one case: the answer
/// must not tell which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization` header.
    #[error("this server needs an API key: send `Authorization: Bearer <key>`")]
    Missing,
    /// Not `Bearer <key>`.
    #[error("the Authorization header is not `Bearer <key>`")]
    Malformed,
    /// No such key, or a revoked one.
    #[error("the API key is not valid (unknown or revoked)")]
    Refused,
}

/// Why an admin operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// No tenant of that name.
    #[error("no tenant named `{0}`")]
    NoSuchTenant(String),
    /// The tenant has no key with that id.
    #[error("tenant `{tenant}` has no key `{key_id}`")]
    NoSuchKey {
        /// The tenant.
        tenant: String,
        /// The key id asked for.
        key_id: String,
    },
    /// A tenant of that name exists.
    #[error("a tenant named `{0}` exists already")]
    Exists(String),
    /// The tenant holds as many keys as it may.
    #[error(
        "tenant `{0}` holds {MAX_KEYS_PER_TENANT} keys already; revoke one before adding another"
    )]
    TooManyKeys(String),
    /// A bad name or quota setting.
    #[error("{0}")]
    Invalid(String),
    /// Writing the directory to disk failed.
    #[error("saving the tenant directory failed: {0}")]
    Io(#[from] std::io::Error),
    /// The cluster's shared copy changed meanwhile (another worker's change), or cannot be
    /// reached; nothing was changed.
    #[error("{0}")]
    Shared(String),
}

/// Where a cluster keeps the one directory its workers share: every change is published there
/// before it takes effect here, and fails when another worker changed the directory first.
pub trait SharedDirectory: Send + Sync + 'static {
    /// Publish `bytes` (the stored directory) as the next version after the last one this worker
    /// saw.
    ///
    /// # Errors
    /// Another worker published first, or the store cannot be reached (the message says which).
    fn publish(&self, bytes: &[u8]) -> Result<(), String>;
}

/// One key as stored: never the key itself.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct StoredKey {
    key_id: String,
    /// sha256 of the key's secret, hex.
    hash: String,
    created_ms: u64,
}

/// One tenant as stored.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct StoredTenant {
    name: String,
    created_ms: u64,
    keys: Vec<StoredKey>,
    #[serde(default)]
    quota: QuotaPatch,
}

/// The file: a format number, then the tenants.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct StoredDirectory {
    format: u32,
    tenants: Vec<StoredTenant>,
}

/// A key as shown to the admin: its id and when it was made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyInfo {
    /// The key's public id.
    pub key_id: String,
    /// When it was created, milliseconds since the Unix epoch.
    pub created_ms: u64,
}

/// A tenant as shown to the admin (never its keys' secrets).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TenantInfo {
    /// Its name.
    pub name: String,
    /// When it was created, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Its keys.
    pub keys: Vec<KeyInfo>,
    /// The quota in force.
    pub quota: Quota,
    /// What the admin set (the rest are the server's defaults).
    pub quota_overrides: QuotaPatch,
}

/// A key just made: the only time the key itself is seen.
#[derive(Debug, Clone)]
pub struct IssuedKey {
    /// The tenant it belongs to.
    pub tenant: TenantInfo,
    /// The whole key.
    pub key: String,
    /// Its id.
    pub key_id: String,
}

#[derive(Default)]
struct State {
    tenants: BTreeMap<String, StoredTenant>,
    /// key id → (tenant name, hash of the secret).
    keys: HashMap<String, (String, KeyHash)>,
}

impl State {
    /// The state of a stored directory's tenants, with their keys indexed.
    fn of(tenants: Vec<StoredTenant>) -> State {
        let mut state = State {
            tenants: tenants.into_iter().map(|t| (t.name.clone(), t)).collect(),
            keys: HashMap::new(),
        };
        state.index_keys();
        state
    }

    fn index_keys(&mut self) {
        self.keys = self
            .tenants
            .values()
            .flat_map(|t| {
                t.keys.iter().filter_map(|k| {
                    let hash = KeyHash::from_hex(&k.hash).ok()?;
                    Some((k.key_id.clone(), (t.name.clone(), hash)))
                })
            })
            .collect();
    }
}

/// The tenants of a server with authentication.
pub struct TenantDirectory {
    path: PathBuf,
    admin: KeyHash,
    defaults: Quota,
    limits: Quota,
    state: RwLock<State>,
    /// Serialises changes together with the file write that makes them durable.
    writes: Mutex<()>,
    /// The cluster's shared copy, when the server is a worker of one.
    shared: std::sync::OnceLock<Box<dyn SharedDirectory>>,
}

impl std::fmt::Debug for TenantDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantDirectory")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl TenantDirectory {
    /// The directory stored in `data_dir`, with `admin_key` as the admin's key; quotas not set
    /// for a tenant are `defaults`, and none may exceed `limits` (0 there: no limit).
    ///
    /// # Errors
    /// The file exists but cannot be read or is not a tenant directory.
    pub fn open(
        data_dir: &Path,
        admin_key: &str,
        defaults: Quota,
        limits: Quota,
    ) -> anyhow::Result<TenantDirectory> {
        let path = data_dir.join("tenants.json");
        let stored: StoredDirectory = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                anyhow::anyhow!("{} is not a tenant directory: {e}", path.display())
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => StoredDirectory::default(),
            Err(e) => anyhow::bail!("reading {}: {e}", path.display()),
        };
        if stored.format > 1 {
            anyhow::bail!(
                "{} was written by a newer wasmrpc (format {}); upgrade to use it",
                path.display(),
                stored.format
            );
        }
        if stored.tenants.iter().any(|t| t.name == DEFAULT_TENANT) {
            tracing::warn!(
                "{} holds a tenant named `{DEFAULT_TENANT}`, made before the name was reserved: \
                 it sees every method registered while the server ran without keys; move its \
                 users to a tenant of another name and delete it",
                path.display()
            );
        }
        let state = State::of(stored.tenants);
        Ok(TenantDirectory {
            path,
            admin: KeyHash::of(admin_key),
            defaults,
            limits,
            state: RwLock::new(state),
            writes: Mutex::new(()),
            shared: std::sync::OnceLock::new(),
        })
    }

    /// Share this directory with a cluster: from now on every change is published to `shared`
    /// first. Returns the directory as stored (what to publish when the cluster has none yet).
    pub fn share(&self, shared: Box<dyn SharedDirectory>) -> Vec<u8> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self.shared.set(shared);
        stored_bytes(&self.read().tenants)
    }

    /// Take `bytes`, the directory as another worker published it, as this one's (and keep it in
    /// the local file too, for a restart without the cluster).
    ///
    /// # Errors
    /// Bytes that are not a tenant directory of a format this build reads; the file write.
    pub fn adopt(&self, bytes: &[u8]) -> Result<(), DirectoryError> {
        let stored: StoredDirectory = serde_json::from_slice(bytes)
            .map_err(|e| DirectoryError::Shared(format!("the shared tenant directory: {e}")))?;
        if stored.format > 1 {
            return Err(DirectoryError::Shared(format!(
                "the shared tenant directory is of format {}, written by a newer wasmrpc",
                stored.format
            )));
        }
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let next = State::of(stored.tenants);
        write_atomically(&self.path, &stored_bytes(&next.tenants))?;
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(())
    }

    /// Who `authorization` (the header's value, if any) belongs to.
    ///
    /// Takes the same time for an unknown key id as for a known one with a wrong secret.
    ///
    /// # Errors
    /// A missing, malformed, unknown or revoked key.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, AuthError> {
        let value = authorization.ok_or(AuthError::Missing)?;
        let value = std::str::from_utf8(value).map_err(|_| AuthError::Malformed)?;
        let (scheme, key) = value.trim().split_once(' ').ok_or(AuthError::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Malformed);
        }
        let key = key.trim();
        if KeyHash::of(key).matches(&self.admin) {
            return Ok(Principal::Admin);
        }
        let (key_id, hash) = keys::parse_tenant_key(key).ok_or(AuthError::Refused)?;
        let state = self.read();
        // An unknown id still costs one comparison, against a hash nothing has.
        let (tenant, stored) = match state.keys.get(key_id) {
            Some((tenant, stored)) => (Some(tenant), *stored),
            None => (None, KeyHash([0; 32])),
        };
        match (tenant, hash.matches(&stored)) {
            (Some(tenant), true) => Ok(Principal::Tenant(TenantId::new(tenant.as_str()))),
            _ => Err(AuthError::Refused),
        }
    }

    /// The quota in force for `tenant` (the defaults for a tenant the directory does not know).
    pub fn quota(&self, tenant: &TenantId) -> Quota {
        self.read()
            .tenants
            .get(tenant.as_str())
            .map_or(self.defaults, |t| t.quota.over(&self.defaults))
    }

    /// Every tenant, sorted by name.
    pub fn list(&self) -> Vec<TenantInfo> {
        self.read().tenants.values().map(|t| self.info(t)).collect()
    }

    /// One tenant.
    ///
    /// # Errors
    /// [`DirectoryError::NoSuchTenant`].
    pub fn show(&self, name: &str) -> Result<TenantInfo, DirectoryError> {
        self.read()
            .tenants
            .get(name)
            .map(|t| self.info(t))
            .ok_or_else(|| DirectoryError::NoSuchTenant(name.to_owned()))
    }

    /// Whether `name` may be given to a new tenant: a valid name, and not the implicit tenant's.
    ///
    /// # Errors
    /// [`DirectoryError::Invalid`], saying why.
    pub fn check_new_name(name: &str) -> Result<(), DirectoryError> {
        wasmrpc_proto::names::check_name(name)
            .map_err(|why| DirectoryError::Invalid(why.replace("method name", "tenant name")))?;
        if name == DEFAULT_TENANT {
            // What a server ran without keys registered belongs to `default`: a tenant of that
            // name would be handed all of it.
            return Err(DirectoryError::Invalid(format!(
                "the tenant name `{DEFAULT_TENANT}` is reserved: it is the implicit tenant of a \
                 server without keys, and what was registered then stays its own; choose another \
                 name"
            )));
        }
        Ok(())
    }

    /// Create a tenant with its first key.
    ///
    /// # Errors
    /// A bad name, a name taken, or the file cannot be written.
    pub fn create(&self, name: &str) -> Result<IssuedKey, DirectoryError> {
        Self::check_new_name(name)?;
        let new = keys::new_tenant_key();
        self.change(|state| {
            if state.tenants.contains_key(name) {
                return Err(DirectoryError::Exists(name.to_owned()));
            }
            state.tenants.insert(
                name.to_owned(),
                StoredTenant {
                    name: name.to_owned(),
                    created_ms: now_ms(),
                    keys: vec![stored_key(&new)],
                    quota: QuotaPatch::default(),
                },
            );
            Ok(())
        })?;
        Ok(self.issued(name, new))
    }

    /// Give a tenant a further key (to rotate: add one, move clients over, revoke the old one).
    ///
    /// # Errors
    /// No such tenant, [`MAX_KEYS_PER_TENANT`] keys already, or the file cannot be written.
    pub fn add_key(&self, name: &str) -> Result<IssuedKey, DirectoryError> {
        let new = keys::new_tenant_key();
        self.change(|state| {
            let tenant = state
                .tenants
                .get_mut(name)
                .ok_or_else(|| DirectoryError::NoSuchTenant(name.to_owned()))?;
            if tenant.keys.len() >= MAX_KEYS_PER_TENANT {
                return Err(DirectoryError::TooManyKeys(name.to_owned()));
            }
            tenant.keys.push(stored_key(&new));
            Ok(())
        })?;
        Ok(self.issued(name, new))
    }

    /// Revoke one key; requests with it fail from now on.
    ///
    /// # Errors
    /// No such tenant or key, or the file cannot be written.
    pub fn revoke(&self, name: &str, key_id: &str) -> Result<TenantInfo, DirectoryError> {
        self.change(|state| {
            let tenant = state
                .tenants
                .get_mut(name)
                .ok_or_else(|| DirectoryError::NoSuchTenant(name.to_owned()))?;
            let before = tenant.keys.len();
            tenant.keys.retain(|k| k.key_id != key_id);
            if tenant.keys.len() == before {
                return Err(DirectoryError::NoSuchKey {
                    tenant: name.to_owned(),
                    key_id: key_id.to_owned(),
                });
            }
            Ok(())
        })?;
        self.show(name)
    }

    /// Change some of a tenant's quota settings; the rest stay as they were.
    ///
    /// # Errors
    /// No such tenant, a setting above the server's limit, or the file cannot be written.
    pub fn set_quota(&self, name: &str, patch: &QuotaPatch) -> Result<TenantInfo, DirectoryError> {
        patch.check(&self.limits).map_err(DirectoryError::Invalid)?;
        self.change(|state| {
            let tenant = state
                .tenants
                .get_mut(name)
                .ok_or_else(|| DirectoryError::NoSuchTenant(name.to_owned()))?;
            tenant.quota = tenant.quota.merged(patch);
            Ok(())
        })?;
        self.show(name)
    }

    /// Remove a tenant and its keys (its registrations are the service's to delete).
    ///
    /// # Errors
    /// No such tenant, or the file cannot be written.
    pub fn delete(&self, name: &str) -> Result<(), DirectoryError> {
        self.change(|state| {
            state
                .tenants
                .remove(name)
                .map(drop)
                .ok_or_else(|| DirectoryError::NoSuchTenant(name.to_owned()))
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn info(&self, t: &StoredTenant) -> TenantInfo {
        TenantInfo {
            name: t.name.clone(),
            created_ms: t.created_ms,
            keys: t
                .keys
                .iter()
                .map(|k| KeyInfo {
                    key_id: k.key_id.clone(),
                    created_ms: k.created_ms,
                })
                .collect(),
            quota: t.quota.over(&self.defaults),
            quota_overrides: t.quota,
        }
    }

    fn issued(&self, name: &str, new: NewKey) -> IssuedKey {
        let tenant = self.show(name).expect("the tenant was just written");
        IssuedKey {
            tenant,
            key: new.key,
            key_id: new.key_id,
        }
    }

    /// Apply `f` to a copy of the state, write it durably, then make it the state: a failed write
    /// changes nothing.
    fn change(
        &self,
        f: impl FnOnce(&mut State) -> Result<(), DirectoryError>,
    ) -> Result<(), DirectoryError> {
        let _writing = self.writes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = State {
            tenants: self.read().tenants.clone(),
            keys: HashMap::new(),
        };
        f(&mut next)?;
        let bytes = stored_bytes(&next.tenants);
        if let Some(shared) = self.shared.get() {
            shared.publish(&bytes).map_err(DirectoryError::Shared)?;
        }
        write_atomically(&self.path, &bytes)?;
        next.index_keys();
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(())
    }
}

/// The stored form of `tenants`.
fn stored_bytes(tenants: &BTreeMap<String, StoredTenant>) -> Vec<u8> {
    let stored = StoredDirectory {
        format: 1,
        tenants: tenants.values().cloned().collect(),
    };
    serde_json::to_vec_pretty(&stored).expect("serialises")
}

fn stored_key(new: &NewKey) -> StoredKey {
    StoredKey {
        key_id: new.key_id.clone(),
        hash: new.hash.to_hex(),
        created_ms: now_ms(),
    }
}

/// Write `bytes` to `path` so that a crash leaves either the old file or the new one, readable by
/// its owner only.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    {
        let mut options = fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(n: u64) -> Quota {
        Quota {
            max_component_bytes: n,
            max_methods: n,
            max_stored_bytes: n,
            memory_per_call_mib: n,
            max_deadline_ms: n,
            max_concurrent_calls: n,
            calls_per_second: 0,
        }
    }

    fn open(dir: &Path) -> TenantDirectory {
        TenantDirectory::open(dir, "the-admin-key", quota(10), quota(100)).expect("open")
    }

    fn bearer(key: &str) -> Vec<u8> {
        format!("Bearer {key}").into_bytes()
    }

    #[test]
    fn keys_authenticate_their_tenant_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = open(dir.path());
        let a = d.create("team-a").unwrap();
        let b = d.create("team-b").unwrap();
        assert_eq!(
            d.authenticate(Some(&bearer(&a.key))),
            Ok(Principal::Tenant(TenantId::new("team-a")))
        );
        assert_eq!(
            d.authenticate(Some(&bearer(&b.key))),
            Ok(Principal::Tenant(TenantId::new("team-b")))
        );
        assert_eq!(
            d.authenticate(Some(b"bearer the-admin-key")),
            Ok(Principal::Admin)
        );
        assert_eq!(d.authenticate(None), Err(AuthError::Missing));
        assert_eq!(
            d.authenticate(Some(b"Basic abc")),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            d.authenticate(Some(&[0xff, 0xfe])),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            d.authenticate(Some(b"Bearer nope")),
            Err(AuthError::Refused)
        );
        // Another key's id with this key's secret is refused.
        let (_, secret) = a.key.rsplit_once('_').unwrap();
        let forged = format!("wrpc_{}_{secret}", b.key_id);
        assert_eq!(
            d.authenticate(Some(&bearer(&forged))),
            Err(AuthError::Refused)
        );
    }

    #[test]
    fn the_implicit_tenants_name_is_reserved() {
        let dir = tempfile::tempdir().unwrap();
        let d = open(dir.path());
        let refused = d.create(DEFAULT_TENANT).unwrap_err().to_string();
        assert!(refused.contains("reserved"), "{refused}");
        assert!(d.show(DEFAULT_TENANT).is_err());
        // Only the exact name: others that contain it are ordinary.
        d.create("default-team").unwrap();
    }

    #[test]
    fn rotation_allows_two_keys_and_a_revoked_key_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let d = open(dir.path());
        let first = d.create("team-a").unwrap();
        let second = d.add_key("team-a").unwrap();
        assert!(matches!(
            d.add_key("team-a"),
            Err(DirectoryError::TooManyKeys(_))
        ));
        assert!(d.authenticate(Some(&bearer(&first.key))).is_ok());
        assert!(d.authenticate(Some(&bearer(&second.key))).is_ok());
        let info = d.revoke("team-a", &first.key_id).unwrap();
        assert_eq!(info.keys.len(), 1);
        assert_eq!(
            d.authenticate(Some(&bearer(&first.key))),
            Err(AuthError::Refused)
        );
        assert!(d.authenticate(Some(&bearer(&second.key))).is_ok());
        assert!(matches!(
            d.revoke("team-a", &first.key_id),
            Err(DirectoryError::NoSuchKey { .. })
        ));
    }

    #[test]
    fn the_directory_survives_a_restart_and_stores_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = {
            let d = open(dir.path());
            let a = d.create("team-a").unwrap();
            d.set_quota(
                "team-a",
                &QuotaPatch {
                    max_methods: Some(3),
                    ..QuotaPatch::default()
                },
            )
            .unwrap();
            a.key
        };
        let text = std::fs::read_to_string(dir.path().join("tenants.json")).unwrap();
        assert!(!text.contains(&key), "the key itself is stored");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join("tenants.json"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let d = open(dir.path());
        assert!(d.authenticate(Some(&bearer(&key))).is_ok());
        let q = d.quota(&TenantId::new("team-a"));
        assert_eq!((q.max_methods, q.max_stored_bytes), (3, 10));
    }

    #[test]
    fn names_quotas_and_duplicates_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let d = open(dir.path());
        assert!(matches!(d.create("a/b"), Err(DirectoryError::Invalid(_))));
        d.create("team-a").unwrap();
        assert!(matches!(d.create("team-a"), Err(DirectoryError::Exists(_))));
        let too_much = QuotaPatch {
            memory_per_call_mib: Some(101),
            ..QuotaPatch::default()
        };
        assert!(matches!(
            d.set_quota("team-a", &too_much),
            Err(DirectoryError::Invalid(_))
        ));
        assert!(matches!(
            d.set_quota("nobody", &QuotaPatch::default()),
            Err(DirectoryError::NoSuchTenant(_))
        ));
        d.delete("team-a").unwrap();
        assert!(d.list().is_empty());
    }
}

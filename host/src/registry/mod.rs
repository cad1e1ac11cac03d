//! Storage of components and their registrations, behind the [`Registry`] trait so that the local
//! embedded store and a cluster store are interchangeable.
//!
//! The registry never sees wasmtime: it stores bytes and metadata. Blobs are content-addressed by
//! sha256 and verified on every read; registrations are versioned per (tenant, name). Every
//! registry owns an in-memory cache of its registrations ([`index`]), loaded before it is handed
//! out, so lookups are plain memory reads; writes are async and durable when they return.

mod blobs;
pub mod index;
mod local;
pub mod record;

pub use local::LocalRegistry;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use wasmrpc_proto::MethodSignature;

use crate::tenancy::TenantId;

/// The sha256 of a component's bytes; printed as `sha256:<64 hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        use sha2::Digest as _;
        Digest(sha2::Sha256::digest(bytes).into())
    }

    /// The 64 lowercase hex digits, without the `sha256:` prefix (used as a file name).
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hex_part = s.strip_prefix("sha256:").unwrap_or(s);
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut out).map_err(|e| format!("bad digest `{s}`: {e}"))?;
        Ok(Digest(out))
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// What a caller asks to register; the registry assigns the version and time.
#[derive(Debug, Clone)]
pub struct NewRegistration {
    /// The tenant that owns the name.
    pub tenant: TenantId,
    /// The method name it is registered under.
    pub name: String,
    /// The method inside the component this name calls.
    pub export: String,
    /// The method's signature, read from the component at upload.
    pub signature: MethodSignature,
    /// The tenant's quotas that this registration must fit, checked under the store's lock.
    pub limits: RegistrationLimits,
}

/// What a tenant may hold in the store; 0 means no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistrationLimits {
    /// Method names registered at once.
    pub max_methods: u64,
    /// Bytes of distinct components.
    pub max_stored_bytes: u64,
}

/// What a tenant holds in the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Method names registered.
    pub methods: u64,
    /// Bytes of its distinct components (each counted once, whoever else stored the same bytes).
    pub stored_bytes: u64,
}

/// One version of one registered method. How it is stored on disk is [`record`]'s business.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The owning tenant.
    pub tenant: TenantId,
    /// The registered name.
    pub name: String,
    /// 1 for the first registration of a name, then N+1 for each re-registration.
    pub version: u32,
    /// Digest of the component's bytes.
    pub digest: Digest,
    /// Size of the component in bytes.
    pub size: u64,
    /// Registration time, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The method inside the component.
    pub export: String,
    /// The method's signature.
    pub signature: MethodSignature,
}

/// Why the registry could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No blob is stored under this digest.
    #[error("component {0} is missing from the store")]
    MissingBlob(Digest),
    /// The stored bytes no longer hash to their digest.
    #[error("component {expected} is corrupt: the stored bytes hash to {actual}")]
    Corrupt {
        /// The digest it was stored under.
        expected: Digest,
        /// What the bytes hash to now.
        actual: Digest,
    },
    /// A file operation failed (disk full, permissions…).
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
    /// The metadata database failed, or holds a record this build cannot read.
    #[error("metadata database error: {0}")]
    Database(String),
    /// The thread running a blocking store operation failed (panicked or was cancelled).
    #[error("a store task failed: {0}")]
    Task(String),
    /// The registration does not fit the tenant's quota (the message names it and its value).
    #[error("{0}")]
    Quota(String),
    /// A shared store (the cluster's) cannot be reached now. The message, the store's own, says
    /// whether anything was changed: nothing (try again), or maybe (look before trying again).
    #[error("{0}")]
    Unreachable(String),
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The registration asked for.
    Found(Arc<Registration>),
    /// The name is registered, but not in the version asked for.
    NoSuchVersion,
    /// The name is not registered (for this tenant).
    NoSuchName,
}

/// Where components and registrations live: the local embedded store, or (later) a cluster store.
///
/// Reads (`get`, `versions`, `list`, `all`, `uses`) come from the registry's own in-memory cache
/// and never wait for I/O. Writes are async; when one returns `Ok`, its effect is durable and
/// already visible to reads.
#[async_trait::async_trait]
pub trait Registry: Send + Sync + 'static {
    /// Store `component` (if its blob is not there already) and record a new version of
    /// `new.name` pointing at it. Durable when it returns: blob fsynced before the metadata commits.
    ///
    /// # Errors
    /// Storage or database failure; nothing is recorded then.
    async fn register(
        &self,
        new: NewRegistration,
        component: Arc<Vec<u8>>,
    ) -> Result<Arc<Registration>, RegistryError>;

    /// Remove every version of a name, or only `version`; returns what was removed (empty if
    /// nothing matched). Blobs no other registration uses are deleted. The next registration of
    /// the name is numbered one past the newest version left (1 when none is).
    ///
    /// # Errors
    /// Storage or database failure.
    async fn delete(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Vec<Arc<Registration>>, RegistryError>;

    /// The component's bytes, verified against `digest`.
    ///
    /// # Errors
    /// `RegistryError::MissingBlob`, `RegistryError::Corrupt`, or storage failure.
    async fn blob(&self, digest: Digest) -> Result<Vec<u8>, RegistryError>;

    /// The registry's in-memory cache of its registrations, which every read below answers
    /// from (kept current by the registry's own writes, and by whatever else it follows).
    fn index(&self) -> std::sync::RwLockReadGuard<'_, index::RegistrationIndex>;

    /// One version of a name (`None`: the newest).
    fn get(&self, tenant: &TenantId, name: &str, version: Option<u32>) -> Lookup {
        self.index().get(tenant, name, version)
    }

    /// The version numbers of a name, oldest first; empty if it is not registered.
    fn versions(&self, tenant: &TenantId, name: &str) -> Vec<u32> {
        self.index().version_numbers(tenant, name)
    }

    /// Every name of a tenant with all its versions (oldest first), sorted by name.
    fn list(&self, tenant: &TenantId) -> Vec<Vec<Arc<Registration>>> {
        self.index().list(tenant)
    }

    /// Every registration of every tenant (to warm caches at start-up).
    fn all(&self) -> Vec<Arc<Registration>> {
        self.index().all()
    }

    /// Whether any registration of any tenant points at `digest`.
    fn uses(&self, digest: &Digest) -> bool {
        self.index().uses(digest)
    }

    /// Whether a registration of `tenant` points at `digest`.
    fn tenant_uses(&self, tenant: &TenantId, digest: &Digest) -> bool {
        self.index().tenant_uses(tenant, digest)
    }

    /// What `tenant` holds.
    fn usage(&self, tenant: &TenantId) -> Usage {
        self.index().usage(tenant)
    }
}

//! Storage of components and their registrations, behind the [`Registry`] trait so that the local
//! embedded store and a cluster store are interchangeable.
//!
//! The registry never sees wasmtime: it stores bytes and metadata. Blobs are content-addressed by
//! sha256 and verified on every read; registrations are versioned per (tenant, name).

mod blobs;
mod local;

pub use local::LocalRegistry;

use std::fmt;
use std::str::FromStr;

use wasmrpc_proto::MethodSignature;

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
    pub fn to_hex(&self) -> String {
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
    pub tenant: String,
    /// The method name it is registered under.
    pub name: String,
    /// The method inside the component this name calls.
    pub export: String,
    /// The method's signature, read from the component at upload.
    pub signature: MethodSignature,
}

/// One version of one registered method.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Registration {
    /// The owning tenant.
    pub tenant: String,
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
    /// The metadata database failed.
    #[error("metadata database error: {0}")]
    Database(String),
}

/// Where components and registrations live.
///
/// Every method is synchronous and may block on disk: call it from a blocking context
/// (`tokio::task::spawn_blocking`). When a mutating method returns `Ok`, its effect is durable.
pub trait Registry: Send + Sync + 'static {
    /// Store `component` (if its blob is not there already) and record a new version of
    /// `new.name` pointing at it. Durable when it returns: blob fsynced before the metadata commits.
    ///
    /// # Errors
    /// Storage or database failure; nothing is recorded then.
    fn register(
        &self,
        new: NewRegistration,
        component: &[u8],
    ) -> Result<Registration, RegistryError>;

    /// The component's bytes, verified against `digest`.
    ///
    /// # Errors
    /// [`RegistryError::MissingBlob`], [`RegistryError::Corrupt`], or storage failure.
    fn blob(&self, digest: &Digest) -> Result<Vec<u8>, RegistryError>;

    /// One version of a name (`None`: the newest), if registered.
    ///
    /// # Errors
    /// Database failure.
    fn get(
        &self,
        tenant: &str,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<Registration>, RegistryError>;

    /// Every version of a name, oldest first; empty if the name is not registered.
    ///
    /// # Errors
    /// Database failure.
    fn versions(&self, tenant: &str, name: &str) -> Result<Vec<Registration>, RegistryError>;

    /// The newest version of every name of a tenant, sorted by name.
    ///
    /// # Errors
    /// Database failure.
    fn list(&self, tenant: &str) -> Result<Vec<Registration>, RegistryError>;

    /// Every version of every name of every tenant (used to warm caches at start-up).
    ///
    /// # Errors
    /// Database failure.
    fn list_all(&self) -> Result<Vec<Registration>, RegistryError>;

    /// Remove every version of a name; returns what was removed (empty if nothing was registered).
    /// Blobs no other registration uses are deleted.
    ///
    /// # Errors
    /// Storage or database failure.
    fn delete(&self, tenant: &str, name: &str) -> Result<Vec<Registration>, RegistryError>;
}

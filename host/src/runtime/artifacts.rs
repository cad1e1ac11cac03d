//! Compiled components on disk, so that a restart loads them instead of compiling them again.
//!
//! An artifact is what this server's own compiler made from a component's bytes (the `__compile`
//! child's output, or `Component::serialize` in process): never anything a tenant sent, since
//! uploads of precompiled artifacts are refused before they get here. It is stored under its
//! owner (the tenant whose registration it serves), the sha256 of the component's bytes and a
//! key of the engine's settings (wasmtime's compatibility hash: its version, the target, the
//! compiler's settings), so an upgraded server or a changed setting never loads an old one.
//! Keyed by owner because a compile skipped for bytes another tenant uploaded would tell, by the
//! time it takes, that someone here uploaded them (docs/security.md).
//!
//! An artifact is written only for a registration that succeeded ([`ArtifactCache::put`] after
//! the registry committed), and [`ArtifactCache::sweep`] deletes those no registration uses: at
//! start-up and after a delete. Each file is the artifact followed by an HMAC-SHA256 of its name
//! and the artifact, under a random key kept owner-only in the directory (`mac.key`), checked
//! before the artifact is loaded as native code: a file cut short by a crash, changed on disk, or
//! copied under another name is deleted (logged) and the component compiled again. Files are
//! owner-only, written to a temporary name and renamed, never written in place, so a reader
//! never sees half of one.
//!
//! The artifact comes first so that wasmtime can map the file itself ([`ArtifactCache::open_file`]
//! and `Component::deserialize_file`), at start-up and as soon as an upload's registration has
//! stored it (`runtime/kept.rs`): its code and its copy-on-write memory images are then
//! pages of the file, shared with the page cache and given back under pressure, instead of a
//! private copy of tens of MiB per Python or JavaScript component and a memfd per image. The
//! mapping holds the file open: one descriptor per component loaded this way. A cache that
//! cannot be written is only slower: failures are logged, never returned.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ring::hmac;
use sha2::Digest as _;
use wasmtime::Engine;

/// The artifacts of one engine configuration in one directory.
#[derive(Debug)]
pub struct ArtifactCache {
    dir: PathBuf,
    /// Hex of a hash of the engine's compatibility hash: part of every file name.
    engine_key: String,
    /// The HMAC key of this directory's artifacts.
    mac_key: [u8; 32],
    /// Held while writing or sweeping, so a sweep never deletes a file being written.
    writing: Mutex<()>,
}

/// The sha256 of a component's bytes.
pub type SourceDigest = [u8; 32];

/// What one artifact is stored under: its owner and its component's digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArtifactKey {
    /// A hash of the owning tenant's name (names stay out of file names).
    owner: [u8; 16],
    source: SourceDigest,
}

impl ArtifactKey {
    /// The artifact of `source` (a sha256) compiled for `owner`.
    pub fn new(owner: &str, source: SourceDigest) -> Self {
        let hash = sha2::Sha256::digest(owner.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&hash[..16]);
        ArtifactKey { owner: key, source }
    }
}

/// The layout of an artifact file, part of every file name.
const ARTIFACT_LAYOUT: u32 = 2;

/// The file holding the MAC key, in the artifacts directory.
const MAC_KEY_FILE: &str = "mac.key";

impl ArtifactCache {
    /// The cache in `dir` (created owner-only if missing) for artifacts of `engine`, with the
    /// directory's MAC key (made if missing).
    ///
    /// # Errors
    /// `dir` or its key cannot be created or read.
    pub fn open(dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.recursive(true).create(dir)?;
        // DefaultHasher::new() has fixed keys: the same settings give the same name every run.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        // The file layout: 2 puts the MAC after the artifact (1 put it first). Files of another
        // layout get other names and are swept at start-up, not logged as damaged.
        ARTIFACT_LAYOUT.hash(&mut hasher);
        Ok(ArtifactCache {
            mac_key: mac_key(&dir.join(MAC_KEY_FILE))?,
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
            writing: Mutex::new(()),
        })
    }

    /// The sha256 of a component's bytes.
    pub fn digest(source: &[u8]) -> SourceDigest {
        sha2::Sha256::digest(source).into()
    }

    fn file_name(&self, key: &ArtifactKey) -> String {
        format!(
            "{}-{}-{}.cwasm",
            hex::encode(key.owner),
            hex::encode(key.source),
            self.engine_key
        )
    }

    fn path(&self, key: &ArtifactKey) -> PathBuf {
        self.dir.join(self.file_name(key))
    }

    /// The MAC of `artifact` stored as `name`.
    fn mac(&self, name: &str, artifact: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.mac_key, &[name.as_bytes(), b"\0", artifact])
    }

    /// The stored artifact of `key`, if there is one and its MAC holds (a file that fails is
    /// deleted, logged).
    #[cfg(test)]
    pub fn get(&self, key: &ArtifactKey) -> Option<Vec<u8>> {
        let (_, mut bytes) = self.verified(key)?;
        bytes.truncate(bytes.len() - 32);
        Some(bytes)
    }

    /// The stored artifact file of `key`, open, if its MAC holds (a file that fails is deleted,
    /// logged): the artifact is the file's bytes but the last 32, which wasmtime ignores (they
    /// lie past every section it reads). Map it through `/proc/self/fd/N` of this very file, so
    /// what is loaded is what was checked, whatever is renamed meanwhile.
    pub fn open_file(&self, key: &ArtifactKey) -> Option<std::fs::File> {
        self.verified(key).map(|(file, _)| file)
    }

    /// The file of `key` and its bytes, when the MAC holds.
    fn verified(&self, key: &ArtifactKey) -> Option<(std::fs::File, Vec<u8>)> {
        use std::io::Read as _;
        let path = self.path(key);
        let mut file = std::fs::File::open(&path).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        let intact = bytes.len() >= 32 && {
            let (artifact, mac) = bytes.split_at(bytes.len() - 32);
            constant_time_eq(&self.mac(&self.file_name(key), artifact), mac)
        };
        if !intact {
            tracing::warn!(
                path = %path.display(),
                "deleting a compiled artifact whose MAC does not hold (damaged or changed on \
                 disk); the component is compiled again"
            );
            self.remove(key);
            return None;
        }
        Some((file, bytes))
    }

    /// Store `artifact`, the compiled form of `key`'s component, owner-only.
    pub fn put(&self, key: &ArtifactKey, artifact: &[u8]) {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let path = self.path(key);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let mac = self.mac(&self.file_name(key), artifact);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(artifact)?;
                file.write_all(&mac)
            })
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), error = %e, "cannot store a compiled artifact");
        }
    }

    /// Delete the artifact of `key` (its file is damaged).
    pub fn remove(&self, key: &ArtifactKey) {
        remove_logged(&self.path(key));
    }

    /// Delete every file here but the key and the artifacts of `wanted` (called with the
    /// write lock held, so a registration stored meanwhile is either in it or written after):
    /// artifacts of deleted registrations, of refused uploads of older versions, of other engine
    /// settings, and temporary files. Returns how many files were deleted.
    pub fn sweep(&self, wanted: impl FnOnce() -> HashSet<ArtifactKey>) -> usize {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let keep: HashSet<String> = wanted().iter().map(|k| self.file_name(k)).collect();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == MAC_KEY_FILE || keep.contains(name.as_ref()) {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_file()) && remove_logged(&entry.path()) {
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(
                removed,
                dir = %self.dir.display(),
                "swept compiled artifacts no registration uses"
            );
        }
        removed
    }
}

/// Delete `path`; whether it was there and is gone.
fn remove_logged(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot delete an artifact");
            false
        }
    }
}

/// The 32-byte key in `path`, made (random, owner-only) if missing or not 32 bytes long; a new
/// key makes every artifact already there fail its MAC, to be compiled again.
fn mac_key(path: &Path) -> std::io::Result<[u8; 32]> {
    if let Ok(bytes) = std::fs::read(path)
        && let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice())
    {
        return Ok(key);
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(format!("random key: {e}")))?;
    let temporary = path.with_extension("tmp");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()))?;
    std::fs::rename(&temporary, path)?;
    Ok(key)
}

/// HMAC-SHA256 of the concatenation of `parts` under `key`: ring's, as the cluster's signatures
/// (`cluster/trust.rs`), fed part by part so an artifact is never copied to be signed.
fn hmac_sha256(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut context = hmac::Context::with_key(&hmac::Key::new(hmac::HMAC_SHA256, key));
    for part in parts {
        context.update(part);
    }
    context
        .sign()
        .as_ref()
        .try_into()
        .expect("an HMAC-SHA256 tag is 32 bytes")
}

/// Equality whose time does not depend on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> ArtifactCache {
        ArtifactCache::open(dir, &Engine::default()).unwrap()
    }

    fn key(owner: &str, source: &[u8]) -> ArtifactKey {
        ArtifactKey::new(owner, ArtifactCache::digest(source))
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 test case 2 has a 4-byte key; zero-padding it to 32 bytes is the same HMAC
        // (keys shorter than a block are zero-padded to the block).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex::encode(hmac_sha256(&key, &[b"what do ya want ", b"for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn an_artifact_comes_back_as_stored_under_its_owner_and_sources_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let a = key("team-a", b"one");
        assert_eq!(cache.get(&a), None);
        cache.put(&a, b"compiled one");
        assert_eq!(cache.get(&a).as_deref(), Some(&b"compiled one"[..]));
        assert_eq!(cache.get(&key("team-a", b"two")), None, "another source");
        assert_eq!(cache.get(&key("team-b", b"one")), None, "another owner");
        cache.remove(&a);
        assert_eq!(cache.get(&a), None);
    }

    #[test]
    fn files_and_the_directory_are_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let artifacts = dir.path().join("artifacts");
        let cache = cache(&artifacts);
        cache.put(&key("t", b"one"), b"compiled");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&artifacts), 0o700);
        for entry in std::fs::read_dir(&artifacts).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }

    #[test]
    fn a_damaged_or_tampered_artifact_is_deleted_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let source = key("t", b"source");
        // A tamperer who rewrites the artifact and fixes up a plain sha256 after it is caught by
        // the MAC.
        let resummed = |b: &mut Vec<u8>| {
            let mut forged = b"forged native code".to_vec();
            let sum = sha2::Sha256::digest(&forged);
            forged.extend_from_slice(&sum);
            *b = forged;
        };
        for damage in [
            |b: &mut Vec<u8>| b.truncate(b.len() - 1),
            |b: &mut Vec<u8>| *b.last_mut().unwrap() ^= 1,
            |b: &mut Vec<u8>| b.truncate(10),
            resummed,
        ] {
            cache.put(&source, b"a compiled artifact");
            let path = cache.path(&source);
            let mut bytes = std::fs::read(&path).unwrap();
            damage(&mut bytes);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(cache.get(&source), None);
            assert!(!path.exists(), "the damaged file is gone");
        }
        // Another owner's intact file copied under this owner's name does not hold either.
        let other = key("u", b"source");
        cache.put(&other, b"the other's artifact");
        std::fs::copy(cache.path(&other), cache.path(&source)).unwrap();
        assert_eq!(cache.get(&source), None);
    }

    #[test]
    fn another_engine_configuration_does_not_see_the_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let source = key("t", b"source");
        cache(dir.path()).put(&source, b"artifact");
        let mut other = wasmtime::Config::new();
        other.cranelift_opt_level(wasmtime::OptLevel::None);
        let other = ArtifactCache::open(dir.path(), &Engine::new(&other).unwrap()).unwrap();
        assert_eq!(other.get(&source), None);
        assert_eq!(
            cache(dir.path()).get(&source).as_deref(),
            Some(&b"artifact"[..])
        );
    }

    #[test]
    fn a_sweep_keeps_the_key_and_the_wanted_artifacts_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let (kept, gone) = (key("t", b"kept"), key("t", b"gone"));
        cache.put(&kept, b"kept");
        cache.put(&gone, b"gone");
        std::fs::write(dir.path().join("old-format.cwasm"), b"x").unwrap();
        let removed = cache.sweep(|| HashSet::from([kept.clone()]));
        assert_eq!(removed, 2);
        assert_eq!(cache.get(&kept).as_deref(), Some(&b"kept"[..]));
        assert_eq!(cache.get(&gone), None);
        // The key survives: the kept artifact still verifies with a reopened cache.
        assert_eq!(
            self::cache(dir.path()).get(&kept).as_deref(),
            Some(&b"kept"[..])
        );
    }
}

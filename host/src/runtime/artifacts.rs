//! Compiled components on disk, so that a restart loads them instead of compiling them again.
//!
//! An artifact is what this server's own compiler made from a component's bytes (the `__compile`
//! child's output, or `Component::serialize` in process): never anything a tenant sent, since
//! uploads of precompiled artifacts are refused before they get here. It is stored under the
//! sha256 of the component's bytes and a key of the engine's settings (wasmtime's
//! compatibility hash: its version, the target, the compiler's settings), so an upgraded server
//! or a changed setting never loads an old one, and one component registered by many tenants
//! or under many names is stored once.
//!
//! Each file starts with the sha256 of the artifact that follows, checked before the artifact
//! is deserialized: a file cut short by a crash or changed on disk is deleted and the component
//! compiled again. Files are written to a temporary name and renamed, so a reader never sees
//! half of one. A cache that cannot be written is only slower: failures are logged, never
//! returned.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::Digest as _;
use wasmtime::Engine;

/// The artifacts of one engine configuration in one directory.
#[derive(Debug)]
pub struct ArtifactCache {
    dir: PathBuf,
    /// Hex of a hash of the engine's compatibility hash: part of every file name.
    engine_key: String,
}

/// The sha256 of a component's bytes: what its artifact is stored under.
pub type SourceDigest = [u8; 32];

impl ArtifactCache {
    /// The cache in `dir` (created if missing) for artifacts of `engine`.
    ///
    /// # Errors
    /// `dir` cannot be created.
    pub fn open(dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        // DefaultHasher::new() has fixed keys: the same settings give the same name every run.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        Ok(ArtifactCache {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    /// The digest artifacts of `source` are stored under.
    pub fn digest(source: &[u8]) -> SourceDigest {
        sha2::Sha256::digest(source).into()
    }

    fn path(&self, source: &SourceDigest) -> PathBuf {
        self.dir
            .join(format!("{}-{}.cwasm", hex::encode(source), self.engine_key))
    }

    /// The stored artifact of `source`, if there is one and it is intact (a damaged one is
    /// deleted).
    pub fn get(&self, source: &SourceDigest) -> Option<Vec<u8>> {
        let path = self.path(source);
        let mut bytes = std::fs::read(&path).ok()?;
        let intact = bytes.len() >= 32 && {
            let (sum, artifact) = bytes.split_at(32);
            sha2::Sha256::digest(artifact).as_slice() == sum
        };
        if !intact {
            tracing::warn!(path = %path.display(), "deleting a damaged compiled artifact");
            self.remove(source);
            return None;
        }
        bytes.drain(..32);
        Some(bytes)
    }

    /// Store `artifact`, the compiled form of `source`.
    pub fn put(&self, source: &SourceDigest, artifact: &[u8]) {
        let path = self.path(source);
        let temporary = path.with_extension(format!("tmp{}", std::process::id()));
        let mut bytes = Vec::with_capacity(32 + artifact.len());
        bytes.extend_from_slice(&sha2::Sha256::digest(artifact));
        bytes.extend_from_slice(artifact);
        let written =
            std::fs::write(&temporary, &bytes).and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            tracing::warn!(path = %path.display(), error = %e, "cannot store a compiled artifact");
        }
    }

    /// Delete the artifact of `source` (its component is gone, or the file is damaged).
    pub fn remove(&self, source: &SourceDigest) {
        let path = self.path(source);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete an artifact");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> ArtifactCache {
        ArtifactCache::open(dir, &Engine::default()).unwrap()
    }

    #[test]
    fn an_artifact_comes_back_as_stored_under_its_sources_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let (a, b) = (ArtifactCache::digest(b"one"), ArtifactCache::digest(b"two"));
        assert_eq!(cache.get(&a), None);
        cache.put(&a, b"compiled one");
        assert_eq!(cache.get(&a).as_deref(), Some(&b"compiled one"[..]));
        assert_eq!(cache.get(&b), None, "another source has no artifact");
        cache.remove(&a);
        assert_eq!(cache.get(&a), None);
    }

    #[test]
    fn a_damaged_or_cut_artifact_is_deleted_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(dir.path());
        let source = ArtifactCache::digest(b"source");
        for damage in [
            |b: &mut Vec<u8>| b.truncate(b.len() - 1),
            |b: &mut Vec<u8>| *b.last_mut().unwrap() ^= 1,
            |b: &mut Vec<u8>| b.truncate(10),
        ] {
            cache.put(&source, b"a compiled artifact");
            let path = cache.path(&source);
            let mut bytes = std::fs::read(&path).unwrap();
            damage(&mut bytes);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(cache.get(&source), None);
            assert!(!path.exists(), "the damaged file is gone");
        }
    }

    #[test]
    fn another_engine_configuration_does_not_see_the_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let source = ArtifactCache::digest(b"source");
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
}

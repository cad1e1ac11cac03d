//! A fresh compile's artifact stored once its registration is committed, and the component served
//! from that file from then on.
//!
//! A fresh compile is loaded from bytes (`Component::deserialize` of the compile child's output):
//! its code is a private anonymous copy (about 37 MiB for an 18 MB Python component) and its
//! memory image a memfd. The same component loaded from its artifact file
//! (`Component::deserialize_file`, as a restart does) is pages of the file instead: shared with the
//! page cache and given back under pressure (docs/benchmarks.md, issue 33). So once the artifact
//! is on disk, [`Runtime::keep_artifact`] loads it again from there, through the same MAC check
//! as a restart, and the registration is served by that copy; the anonymous one is dropped with
//! the last reference to it.
//!
//! Why reload after writing, rather than write the artifact to a pending file before the
//! registration and rename it on commit: the pending file would be on disk while the upload can
//! still be refused (by its signatures, its quota, the store), and every one of those paths, and
//! a crash, would have to delete it; a refused upload leaving nothing on disk would then rest on
//! each error path instead of on one line after the commit. Reloading costs a read of the file
//! (its MAC) and a map, no compile, and changes nothing of what is written when: the artifact is
//! still written only after the commit, under its owner's key. The signatures are those the
//! component gave at upload: the file holds the very artifact that was described, so it is not
//! asked again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::artifacts::{ArtifactCache, ArtifactKey};
use super::idle_code::CodePages;
use super::outputs::CallExport;
use super::{Module, NEXT_MODULE_ID, NewArtifact, Runtime};

impl Runtime {
    /// Store the artifact of a fresh compile whose registration has been committed, and return
    /// `module` (that compile's) loaded from the stored file. Without an artifact cache, or when
    /// the file cannot be written or loaded (logged), `module` itself: only slower to hold.
    pub fn keep_artifact(&self, artifact: NewArtifact, module: Arc<Module>) -> Arc<Module> {
        let Some(cache) = &self.artifacts else {
            return module;
        };
        let NewArtifact { key, bytes } = artifact;
        cache.put(&key, &bytes);
        // The artifact's bytes are on disk now: not held while the file is loaded.
        drop(bytes);
        match self.loaded_from_file(cache, &key, &module) {
            Ok(mapped) => mapped,
            Err(why) => {
                tracing::warn!(
                    error = %why,
                    "serving a new component from memory, not its artifact file"
                );
                module
            }
        }
    }

    /// `module` again, loaded from its stored artifact (`key`), with the signatures it gave.
    fn loaded_from_file(
        &self,
        cache: &ArtifactCache,
        key: &ArtifactKey,
        module: &Module,
    ) -> Result<Arc<Module>, String> {
        let file = cache
            .open_file(key)
            .ok_or("the stored artifact cannot be opened or does not verify")?;
        let component = self.deserialize_file(&file).map_err(|e| e.to_string())?;
        let compiled = self
            .prepare(&component, module.size, None)
            .map_err(|e| e.to_string())?;
        let call = CallExport::find(&component).ok_or("no `call` export")?;
        let mapped = Arc::new(Module {
            // A new id: instances made ahead for the copy in memory are never this one's.
            id: NEXT_MODULE_ID.fetch_add(1, Ordering::Relaxed),
            pre: compiled.pre,
            call,
            signatures: module.signatures.clone(),
            size: module.size,
            ahead_failures: Arc::new(AtomicU32::new(0)),
            code_pages: Some(CodePages::of_file(&component)),
        });
        self.idle_code.track(&mapped);
        Ok(mapped)
    }
}

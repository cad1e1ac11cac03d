//! Content-addressed blob store: component bytes live in `<data-dir>/blobs/sha256/<hex>`.
//! Blobs are written to a temp file, fsynced and renamed into place so that a crash never leaves a
//! partial blob under its final name, and every read is checked against its digest.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use super::{Digest, RegistryError};

/// The blobs of one data directory.
///
/// Holds no lock: the file system's atomic rename is what makes concurrent writers safe.
/// Deciding *when* a blob may be deleted (nothing references it) is the caller's job.
#[derive(Debug)]
pub struct BlobStore {
    /// `<data-dir>/blobs/sha256`: one file per blob, named by its digest's hex.
    dir: PathBuf,
    /// `<data-dir>/blobs/tmp`: blobs being written. On the same file system as `dir` so the
    /// final rename is atomic.
    tmp: PathBuf,
}

impl BlobStore {
    /// Open (creating if needed) the blob store under `data_dir`, removing temp files left by
    /// writes a crash interrupted.
    ///
    /// Only one process may use a data directory at a time (the caller holds the metadata
    /// database's lock before calling this), so every file in the temp directory is stale.
    ///
    /// # Errors
    /// The directories cannot be created or read.
    pub fn open(data_dir: &Path) -> Result<BlobStore, RegistryError> {
        let root = data_dir.join("blobs");
        let store = BlobStore {
            dir: root.join("sha256"),
            tmp: root.join("tmp"),
        };
        create_dir_durably(&store.dir)?;
        create_dir_durably(&store.tmp)?;
        let removed = store.remove_temp_files()?;
        if removed > 0 {
            tracing::info!(removed, dir = %store.tmp.display(), "removed unfinished blob writes");
        }
        Ok(store)
    }

    /// Where the blob of `digest` lives (whether or not it exists).
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.to_hex())
    }

    /// Whether a blob is stored under `digest` (its contents are not checked).
    ///
    /// # Errors
    /// The file system cannot tell (permissions…).
    pub fn contains(&self, digest: &Digest) -> Result<bool, RegistryError> {
        Ok(self.path(digest).try_exists()?)
    }

    /// Store `bytes`, which must hash to `digest`. Durable when it returns: the file and its
    /// directory entry are fsynced.
    ///
    /// A blob already present that still hashes to `digest` is left alone, so writing is idempotent and
    /// concurrent writers of the same bytes all succeed (each renames its own complete temp file;
    /// the last rename wins, and every version of the file is whole).
    ///
    /// # Errors
    /// The temp file cannot be written, synced or renamed (disk full, permissions…).
    pub fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<(), RegistryError> {
        debug_assert_eq!(
            Digest::of(bytes),
            *digest,
            "blob written under the wrong digest"
        );
        let path = self.path(digest);
        // An existing file is kept only if it still hashes to its digest: uploading the same
        // bytes again is how a user repairs a blob damaged outside our control.
        match fs::read(&path) {
            Ok(existing) if Digest::of(&existing) == *digest => return Ok(()),
            Ok(_) => tracing::warn!(%digest, "stored blob is damaged; rewriting it"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }

        // A unique temp name per writer: concurrent writers never share a file. If anything
        // below fails, dropping `tmp` removes the temp file.
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!("{}.", digest.to_hex()))
            .tempfile_in(&self.tmp)?;
        tmp.write_all(bytes)?;
        // The data must be on disk before the rename makes it visible under its final name,
        // otherwise a crash could leave a complete-looking name over incomplete contents.
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| RegistryError::Io(e.error))?;
        // The rename itself is only durable once the directory is synced.
        sync_dir(&self.dir)?;
        Ok(())
    }

    /// The bytes stored under `digest`, checked against it.
    ///
    /// # Errors
    /// [`RegistryError::MissingBlob`] if absent, [`RegistryError::Corrupt`] if the bytes hash to
    /// something else, or a read failure.
    pub fn read(&self, digest: &Digest) -> Result<Vec<u8>, RegistryError> {
        let bytes = match fs::read(self.path(digest)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RegistryError::MissingBlob(*digest));
            }
            Err(e) => return Err(e.into()),
        };
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(RegistryError::Corrupt {
                expected: *digest,
                actual,
            });
        }
        Ok(bytes)
    }

    /// Remove the blob of `digest`; returns whether there was one. Durable when it returns.
    ///
    /// # Errors
    /// The file cannot be removed or the directory synced.
    pub fn delete(&self, digest: &Digest) -> Result<bool, RegistryError> {
        match fs::remove_file(self.path(digest)) {
            Ok(()) => {
                sync_dir(&self.dir)?;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The digests of every stored blob. Files whose names are not digests are not ours and are
    /// skipped (with a warning) rather than touched.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn list(&self) -> Result<Vec<Digest>, RegistryError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            match name.to_str().filter(|n| n.len() == 64).map(str::parse) {
                Some(Ok(digest)) => out.push(digest),
                _ => {
                    tracing::warn!(file = %entry.path().display(), "unexpected file in blob store")
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Remove every file in the temp directory; returns how many.
    fn remove_temp_files(&self) -> Result<usize, RegistryError> {
        let mut removed = 0;
        for entry in fs::read_dir(&self.tmp)? {
            let entry = entry?;
            let path = entry.path();
            // Only files are ever created here; a directory would be someone else's, keep it.
            if entry.file_type()?.is_dir() {
                tracing::warn!(dir = %path.display(), "unexpected directory in blob temp dir");
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if removed > 0 {
            sync_dir(&self.tmp)?;
        }
        Ok(removed)
    }
}

/// `create_dir_all`, then fsync the parents so the new directories survive a crash (a blob
/// fsynced into a directory whose own entry was lost would be lost with it).
fn create_dir_durably(dir: &Path) -> Result<(), RegistryError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    // `dir` is `<data-dir>/blobs/<x>`: `blobs` holds the entry of `x`, the data directory holds
    // the entry of `blobs`. The data directory's own entry is its creator's business.
    for parent in dir.ancestors().skip(1).take(2) {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        sync_dir(parent)?;
    }
    Ok(())
}

/// fsync a directory, making renames, creations and removals in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), RegistryError> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, BlobStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = BlobStore::open(dir.path()).expect("open blob store");
        (dir, store)
    }

    #[test]
    fn write_then_read_round_trips() {
        let (dir, store) = store();
        let bytes = b"\0asm component bytes".to_vec();
        let digest = Digest::of(&bytes);
        store.write(&digest, &bytes).expect("write");
        assert_eq!(store.read(&digest).expect("read"), bytes);
        let expected = dir.path().join("blobs/sha256").join(digest.to_hex());
        assert_eq!(store.path(&digest), expected);
        assert!(expected.is_file());
        assert_eq!(store.list().expect("list"), vec![digest]);
        // Nothing is left behind in the temp directory.
        assert_eq!(
            fs::read_dir(dir.path().join("blobs/tmp"))
                .expect("tmp")
                .count(),
            0
        );
    }

    #[test]
    fn writing_twice_is_a_no_op() {
        let (_dir, store) = store();
        let bytes = b"same bytes".to_vec();
        let digest = Digest::of(&bytes);
        store.write(&digest, &bytes).expect("first write");
        store.write(&digest, &bytes).expect("second write");
        assert_eq!(store.list().expect("list"), vec![digest]);
        assert_eq!(store.read(&digest).expect("read"), bytes);
    }

    #[test]
    fn concurrent_writers_of_the_same_bytes_all_succeed() {
        let (dir, store) = store();
        let bytes = vec![7u8; 256 * 1024];
        let digest = Digest::of(&bytes);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| store.write(&digest, &bytes).expect("concurrent write"));
            }
        });
        assert_eq!(store.list().expect("list"), vec![digest]);
        assert_eq!(store.read(&digest).expect("read"), bytes);
        assert_eq!(
            fs::read_dir(dir.path().join("blobs/tmp"))
                .expect("tmp")
                .count(),
            0
        );
    }

    #[test]
    fn damaged_blob_is_rewritten_on_write() {
        let (_dir, store) = store();
        let bytes = b"a blob that will be truncated".to_vec();
        let digest = Digest::of(&bytes);
        store.write(&digest, &bytes).expect("write");
        fs::write(store.path(&digest), &bytes[..5]).expect("truncate");
        store.write(&digest, &bytes).expect("rewrite");
        assert_eq!(store.read(&digest).expect("read"), bytes);
        // Same size, one byte flipped: also repaired by writing the bytes again.
        let mut flipped = bytes.clone();
        flipped[3] ^= 0xff;
        fs::write(store.path(&digest), &flipped).expect("flip");
        store.write(&digest, &bytes).expect("rewrite");
        assert_eq!(store.read(&digest).expect("read"), bytes);
    }

    #[test]
    fn missing_blob_is_reported() {
        let (_dir, store) = store();
        let digest = Digest::of(b"never written");
        assert!(!store.contains(&digest).expect("contains"));
        match store.read(&digest) {
            Err(RegistryError::MissingBlob(d)) => assert_eq!(d, digest),
            other => panic!("expected MissingBlob, got {other:?}"),
        }
    }

    #[test]
    fn flipped_byte_is_reported_as_corrupt() {
        let (_dir, store) = store();
        let bytes = b"important weights".to_vec();
        let digest = Digest::of(&bytes);
        store.write(&digest, &bytes).expect("write");
        let mut damaged = bytes.clone();
        damaged[3] ^= 0x01;
        fs::write(store.path(&digest), &damaged).expect("damage");
        match store.read(&digest) {
            Err(RegistryError::Corrupt { expected, actual }) => {
                assert_eq!(expected, digest);
                assert_eq!(actual, Digest::of(&damaged));
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn delete_removes_the_file() {
        let (_dir, store) = store();
        let bytes = b"short-lived".to_vec();
        let digest = Digest::of(&bytes);
        store.write(&digest, &bytes).expect("write");
        assert!(store.contains(&digest).expect("contains"));
        assert!(store.delete(&digest).expect("delete"));
        assert!(!store.contains(&digest).expect("contains"));
        assert!(!store.delete(&digest).expect("second delete"));
        assert!(store.list().expect("list").is_empty());
    }

    #[test]
    fn open_removes_leftover_temp_files_and_list_skips_strangers() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let store = BlobStore::open(dir.path()).expect("open");
            let bytes = b"kept".to_vec();
            store.write(&Digest::of(&bytes), &bytes).expect("write");
        }
        let tmp = dir.path().join("blobs/tmp");
        fs::write(tmp.join("abc.partial"), b"half a blob").expect("leftover temp file");
        fs::write(dir.path().join("blobs/sha256/README"), b"not a blob").expect("stranger");

        let store = BlobStore::open(dir.path()).expect("reopen");
        assert_eq!(fs::read_dir(&tmp).expect("tmp").count(), 0);
        assert_eq!(store.list().expect("list"), vec![Digest::of(b"kept")]);
        assert!(dir.path().join("blobs/sha256/README").is_file());
    }
}

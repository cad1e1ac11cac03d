//! The data directory is the server's alone: owner-only (0700 for directories, no group or
//! other bits on files) for what the server keeps there.
//!
//! It holds the registered components (other tenants' code), the tenant directory, and the
//! compiled artifacts that the server loads as native code. A directory made under a lax umask,
//! or by an older version, is fixed at start, and the fix logged; files created later inside it
//! are out of other users' reach whatever their own mode, and the server's own writers make
//! theirs owner-only too.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;

/// What the server keeps in its data directory: only these are walked, so a data directory
/// given as a folder that holds other things too never has those changed.
const OURS: &[&str] = &[
    "registry.redb",
    "blobs",
    "artifacts",
    "tenants.json",
    "tenants.tmp",
];

/// Create `dir` owner-only if it is missing, and take group and other permissions off it and
/// everything the server keeps in it ([`OURS`], recursively; symbolic links are left alone, not
/// followed). Returns how many entries were changed.
///
/// # Errors
/// `dir` cannot be created, read, or changed.
pub fn make_private(dir: &Path) -> std::io::Result<usize> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut changed = restrict_one(dir)?;
    for name in OURS {
        match restrict(&dir.join(name)) {
            Ok(n) => changed += n,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(changed)
}

/// Take group and other permissions off `path` alone; whether it changed.
fn restrict_one(path: &Path) -> std::io::Result<usize> {
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o077 == 0 {
        return Ok(0);
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
    Ok(1)
}

fn restrict(path: &Path) -> std::io::Result<usize> {
    let metadata = std::fs::symlink_metadata(path)?;
    if metadata.file_type().is_symlink() {
        return Ok(0);
    }
    let mut changed = 0;
    let mode = metadata.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700))?;
        changed += 1;
    }
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path)? {
            match restrict(&entry?.path()) {
                Ok(n) => changed += n,
                // Removed meanwhile (a temporary file): nothing left to protect.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_new_directory_is_owner_only_and_an_open_one_is_closed() {
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("fresh/data");
        assert_eq!(make_private(&fresh).unwrap(), 0);
        assert_eq!(mode(&fresh), 0o700);

        let open = root.path().join("open");
        std::fs::create_dir_all(open.join("artifacts")).unwrap();
        std::fs::write(open.join("registry.redb"), b"x").unwrap();
        std::fs::write(open.join("artifacts/a.cwasm"), b"x").unwrap();
        for (path, m) in [
            (open.clone(), 0o755),
            (open.join("artifacts"), 0o777),
            (open.join("registry.redb"), 0o644),
            (open.join("artifacts/a.cwasm"), 0o640),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).unwrap();
        }
        std::os::unix::fs::symlink("/etc/hostname", open.join("artifacts/link")).unwrap();
        // Something of the user's own beside the server's files is left as it is.
        std::fs::write(open.join("notes.txt"), b"x").unwrap();
        std::fs::set_permissions(
            open.join("notes.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        assert_eq!(make_private(&open).unwrap(), 4);
        assert_eq!(mode(&open.join("notes.txt")), 0o644);
        assert_eq!(mode(&open), 0o700);
        assert_eq!(mode(&open.join("artifacts")), 0o700);
        assert_eq!(mode(&open.join("registry.redb")), 0o600);
        assert_eq!(mode(&open.join("artifacts/a.cwasm")), 0o600);
        assert_eq!(make_private(&open).unwrap(), 0, "nothing left to fix");
    }
}

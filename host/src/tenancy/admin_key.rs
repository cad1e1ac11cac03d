//! The admin key's file: `--admin-key-file FILE` bootstraps authentication. When FILE does not
//! exist the server makes a new random admin key and writes it there, readable by its owner only.

use std::io::Write as _;
use std::path::Path;

use super::keys;

/// Shorter keys are refused: a hand-written admin key must still be hard to guess.
const MIN_KEY_LEN: usize = 24;

/// The admin key from `path`, and whether it was just created there.
///
/// # Errors
/// The file cannot be read or written (for example, its folder does not exist), or holds a key
/// that is too short.
pub fn load_or_create(path: &Path) -> anyhow::Result<(String, bool)> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let key = text.trim().to_owned();
            if key.len() < MIN_KEY_LEN {
                anyhow::bail!(
                    "the admin key in {} is {} characters long; it needs at least {MIN_KEY_LEN} \
                     (delete the file and the server writes a new random key there)",
                    path.display(),
                    key.len()
                );
            }
            Ok((key, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = keys::new_admin_key();
            let mut options = std::fs::OpenOptions::new();
            // `create_new`: never overwrite a key another process wrote meanwhile.
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(path).map_err(|e| {
                anyhow::anyhow!("writing a new admin key to {}: {e}", path.display())
            })?;
            writeln!(file, "{key}")?;
            file.sync_all()?;
            Ok((key, true))
        }
        Err(e) => anyhow::bail!("reading the admin key file {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_gets_a_new_owner_only_key_which_is_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.key");
        let (key, created) = load_or_create(&path).unwrap();
        assert!(created);
        assert!(key.starts_with("wrpc_admin_"), "{key}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(load_or_create(&path).unwrap(), (key, false));
    }

    #[test]
    fn a_short_key_or_a_missing_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admin.key");
        std::fs::write(&path, "secret\n").unwrap();
        assert!(
            load_or_create(&path)
                .unwrap_err()
                .to_string()
                .contains("at least 24")
        );
        assert!(load_or_create(&dir.path().join("no/such/dir/key")).is_err());
    }
}

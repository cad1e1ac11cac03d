//! What a Python or JavaScript build needs from this repository, carried in the binary so that
//! `wasmrpc build app.py` works anywhere: the `wasmrpc:tensor` WIT package and the guest SDKs'
//! sources. Each list is checked against the directory it mirrors by a test below.

use std::path::Path;

use anyhow::Context as _;

/// One file: its path relative to where it is written, and its text.
pub type File = (&'static str, &'static str);

macro_rules! files {
    ($base:literal: $($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $base, "/", $path)))),*]
    };
}

/// The WIT package of the `tensor-function` world (`wit/*.wit`; `wit/panic/` is the Rust SDK's
/// own package and no part of the world).
pub const WIT: &[File] = files!("wit": "tensor.wit");

/// The Python SDK's package, written as `wasmrpc_guest/` on componentize-py's path.
pub const PYTHON_SDK: &[File] = files!("guest-sdk/python/src":
    "wasmrpc_guest/__init__.py",
    "wasmrpc_guest/component.py",
    "wasmrpc_guest/dtypes.py",
    "wasmrpc_guest/errors.py",
    "wasmrpc_guest/log.py",
    "wasmrpc_guest/registry.py",
    "wasmrpc_guest/signature.py",
    "wasmrpc_guest/tensor.py",
);

/// The JavaScript SDK's sources; `index.js` is what `@wasmrpc/guest` resolves to.
pub const JS_SDK: &[File] = files!("guest-sdk/js/src":
    "dtypes.js",
    "errors.js",
    "half.js",
    "index.d.ts",
    "index.js",
    "method.js",
    "shapes.js",
);

/// The Rust guest SDK and the files it includes by path, written by `wasmrpc new` under the
/// project's `wasmrpc/` in this repository's own layout, so that the relative paths inside
/// (`wit_bindgen::generate!`'s `../wit`, the macro's `#[path]` to `proto/src/names.rs`) hold as
/// they are. Their manifests are made by `new.rs` from the ones below.
pub const RUST_SDK: &[File] = files!(".":
    "guest-sdk/src/__private.rs",
    "guest-sdk/src/dtype.rs",
    "guest-sdk/src/elements.rs",
    "guest-sdk/src/error.rs",
    "guest-sdk/src/heap.rs",
    "guest-sdk/src/lib.rs",
    "guest-sdk/src/log.rs",
    "guest-sdk/src/tensor.rs",
    "guest-sdk/macro/src/lib.rs",
    "proto/src/names.rs",
    "wit/tensor.wit",
    "wit/panic/report.wit",
);

/// The manifests of the Rust SDK's two crates, and the workspace's, whose inherited settings
/// `new.rs` writes into them.
pub const RUST_SDK_MANIFEST: &str = include_str!("../../../guest-sdk/Cargo.toml");
/// The guest macro crate's manifest.
pub const RUST_MACRO_MANIFEST: &str = include_str!("../../../guest-sdk/macro/Cargo.toml");
/// The workspace's manifest.
pub const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");

/// Write `files` under `dir`, making directories as needed.
///
/// # Errors
/// A directory or file cannot be written.
pub fn write_all(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// The files below `dir` (relative to it) whose names end with one of `suffixes`.
    fn on_disk(dir: &Path, suffixes: &[&str]) -> Vec<String> {
        fn walk(root: &Path, dir: &Path, suffixes: &[&str], out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name != "__pycache__" {
                        walk(root, &path, suffixes, out);
                    }
                } else if suffixes.iter().any(|s| name.ends_with(s)) {
                    let relative = path.strip_prefix(root).unwrap();
                    out.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, dir, suffixes, &mut out);
        out.sort();
        out
    }

    fn embedded(files: &[File]) -> Vec<String> {
        let mut names: Vec<String> = files.iter().map(|(p, _)| (*p).to_owned()).collect();
        names.sort();
        names
    }

    fn repo(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
    }

    #[test]
    fn every_python_sdk_module_is_embedded() {
        let dir = repo("guest-sdk/python/src");
        assert_eq!(embedded(PYTHON_SDK), on_disk(&dir, &[".py"]));
    }

    #[test]
    fn every_js_sdk_source_is_embedded() {
        let dir = repo("guest-sdk/js/src");
        assert_eq!(embedded(JS_SDK), on_disk(&dir, &[".js", ".mjs", ".ts"]));
    }

    #[test]
    fn every_rust_sdk_source_and_wit_file_is_vendored() {
        let mut expected: Vec<String> = on_disk(&repo("guest-sdk/src"), &[".rs"])
            .into_iter()
            .map(|f| format!("guest-sdk/src/{f}"))
            .chain(
                on_disk(&repo("guest-sdk/macro/src"), &[".rs"])
                    .into_iter()
                    .map(|f| format!("guest-sdk/macro/src/{f}")),
            )
            .chain(
                on_disk(&repo("wit"), &[".wit"])
                    .into_iter()
                    .map(|f| format!("wit/{f}")),
            )
            .chain(["proto/src/names.rs".to_owned()])
            .collect();
        expected.sort();
        assert_eq!(embedded(RUST_SDK), expected);
    }

    #[test]
    fn every_wit_file_of_the_tensor_package_is_embedded() {
        let wit = repo("wit");
        let top: Vec<String> = std::fs::read_dir(&wit)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "wit"))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let mut top = top;
        top.sort();
        assert_eq!(embedded(WIT), top);
    }
}

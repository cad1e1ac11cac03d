//! The Python SDK (`python/`, package `wasmrpc`) against the real server binary and guests built
//! from source: pytest runs `python/tests` with the interpreter of `target/py-venv`, where
//! `bash python/install.sh` (run by `tests/run.sh`) has built and installed the package.
//!
//! The tests start their own servers from `WASMRPC_BIN` (this build's `wasmrpc`), register the
//! components in `WASMRPC_GUEST_DIR`, and embed a server in Python too. A plain `cargo test`
//! without `WASMRPC_PYTHON` says how to run them and passes. `WASMRPC_PYTEST_ARGS` adds pytest
//! arguments (`-k fork`, `-x`, `-v`...).

use std::process::Command;

use crate::support::guests::{guest_path, workspace_root};

#[test]
fn python_sdk_tests_pass_against_the_server() {
    let Some(python) = crate::support::python::interpreter("python_sdk", "bash python/install.sh")
    else {
        return;
    };
    let installed = Command::new(&python)
        .args(["-c", "import wasmrpc"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        installed,
        "the wasmrpc package is not installed in {}: run `bash python/install.sh`",
        python.to_string_lossy()
    );

    let guest_dir = guest_path("example-add")
        .parent()
        .expect("guests live in a folder")
        .to_path_buf();
    // A CA and a server certificate for the https tests, made here as for tests/e2e/tls.rs.
    let pki = crate::tls::Pki::new();
    let extra = std::env::var("WASMRPC_PYTEST_ARGS").unwrap_or_default();
    let status = Command::new(&python)
        .current_dir(workspace_root())
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .args(extra.split_whitespace())
        .env("WASMRPC_BIN", env!("CARGO_BIN_EXE_wasmrpc"))
        .env("WASMRPC_GUEST_DIR", &guest_dir)
        .env("WASMRPC_TEST_TLS_DIR", pki.path(""))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.to_string_lossy()));
    assert!(
        status.success(),
        "pytest python/tests failed ({status}); its report is above"
    );
}

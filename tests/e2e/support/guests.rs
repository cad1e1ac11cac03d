//! Building the guest components from source, once per test process.
//!
//! Runs `cargo build --profile guest --target wasm32-wasip2` for every example and hostile guest
//! into `target/guests`, and `wasmrpc build` (wasm32-unknown-unknown, no WASI imports) for a few;
//! cargo's own lock serialises concurrent test processes, and a no-op rebuild takes well under a
//! second.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Every guest package the suite uses.
pub const PACKAGES: &[&str] = &[
    "example-add",
    "example-matmul",
    "example-softmax",
    "example-strings",
    "example-linalg",
    "guest-hostile",
    "guest-forbidden-fs",
    "guest-forbidden-net",
    "guest-coarse-clock",
    "guest-wrong-world",
];

/// The root of the cargo workspace (the repository).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// The packages also built with `wasmrpc build`, as components with no WASI imports.
pub const NO_WASI_PACKAGES: &[&str] = &[
    "example-add",
    "example-matmul",
    "example-softmax",
    "example-strings",
    "example-linalg",
    "guest-hostile",
];

/// Run a guest build (`cmd`) for `packages` in the repository, free of the outer build's flags
/// (they are for the host); `target` names the rustup target to suggest when it fails.
fn run_guest_build(mut cmd: Command, packages: &[&str], target: &str) {
    cmd.current_dir(workspace_root());
    for p in packages {
        cmd.args(["-p", p]);
    }
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("running the guest build");
    assert!(
        status.success(),
        "building the guest components failed; is the target installed? \
         run `rustup target add {target}`"
    );
}

fn build_all() -> PathBuf {
    let target_dir = workspace_root().join("target/guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "--profile", "guest"])
        .args(["--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir);
    run_guest_build(cmd, PACKAGES, "wasm32-wasip2");
    target_dir.join("wasm32-wasip2/guest")
}

/// The path of a built guest component, e.g. `guest_path("example-add")`.
pub fn guest_path(package: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(build_all);
    dir.join(format!("{}.wasm", package.replace('-', "_")))
}

/// The bytes of a guest component, e.g. `guest("example-add")`.
pub fn guest(package: &str) -> Vec<u8> {
    let file = guest_path(package);
    std::fs::read(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

/// `wasmrpc build` of [`NO_WASI_PACKAGES`] into `target/guests`; the directory of the components.
fn build_all_without_wasi() -> PathBuf {
    let target_dir = workspace_root().join("target/guests");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmrpc"));
    cmd.args(["build", "--quiet", "--profile", "guest", "--target-dir"])
        .arg(&target_dir)
        .stdout(std::process::Stdio::null());
    run_guest_build(cmd, NO_WASI_PACKAGES, "wasm32-unknown-unknown");
    target_dir.join("wasm32-unknown-unknown/guest")
}

/// The path of a guest built with `wasmrpc build` (one of [`NO_WASI_PACKAGES`]).
pub fn guest_without_wasi_path(package: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    assert!(
        NO_WASI_PACKAGES.contains(&package),
        "{package} is not built without WASI"
    );
    let dir = DIR.get_or_init(build_all_without_wasi);
    dir.join(format!("{}.component.wasm", package.replace('-', "_")))
}

/// The bytes of a guest built with `wasmrpc build`, e.g. `guest_without_wasi("example-add")`.
pub fn guest_without_wasi(package: &str) -> Vec<u8> {
    let file = guest_without_wasi_path(package);
    std::fs::read(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

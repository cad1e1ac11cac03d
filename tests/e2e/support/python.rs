//! The Python interpreter the Python tests run pytest with: `WASMRPC_PYTHON`, which
//! `tests/run.sh` sets to `target/py-venv/bin/python` (with `WASMRPC_REQUIRE_PYTHON=1`).

use std::ffi::OsString;
use std::io::Write as _;

/// The interpreter, or `None` (after saying on stderr how to run `test`) when it is not set and
/// not required. `setup` is the command that prepares the venv for `test`.
///
/// # Panics
/// `WASMRPC_REQUIRE_PYTHON=1` without `WASMRPC_PYTHON`.
pub fn interpreter(test: &str, setup: &str) -> Option<OsString> {
    if let Some(python) = std::env::var_os("WASMRPC_PYTHON") {
        return Some(python);
    }
    assert_ne!(
        std::env::var("WASMRPC_REQUIRE_PYTHON").as_deref(),
        Ok("1"),
        "WASMRPC_REQUIRE_PYTHON=1 but WASMRPC_PYTHON is not set: run `{setup}` and point \
         WASMRPC_PYTHON at target/py-venv/bin/python"
    );
    // Straight to stderr, past the test harness's capture, so that it shows on a pass.
    let _ = writeln!(
        std::io::stderr(),
        "{test}: not run, WASMRPC_PYTHON is not set; `bash tests/run.sh` prepares \
         target/py-venv (`{setup}`) and runs it"
    );
    None
}

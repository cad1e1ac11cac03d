//! Existing, independently written v2 clients against the real server: pytest runs
//! `tests/python` (tritonclient's HTTP and gRPC clients, sync and aio, KServe's gRPC client,
//! open-inference-openapi, an idle keep-alive check and schemathesis) with the interpreter of
//! `target/py-venv`.
//!
//! `tests/run.sh` builds that venv (`tests/python/setup.sh`) and sets `WASMRPC_PYTHON` and
//! `WASMRPC_REQUIRE_PYTHON=1`; a plain `cargo test` says how to run these and passes.
//! `WASMRPC_PYTEST_ARGS` adds pytest arguments (`-k json`, `-x`, `-v`...).

use std::process::Command;

use serde_json::json;

use crate::support::guests::{guest_path, workspace_root};
use crate::support::{TestServer, register};
use crate::tenants::Keyed;

/// The header timeout of the server the idle keep-alive tests use, in seconds: short, so that
/// they idle past it quickly.
const IDLE_HEADER_TIMEOUT_S: &str = "1";

/// The models the Python tests call: every export of the add example under its own name (`add`
/// is int32, `add_<dtype>` the others) and the two string methods.
const MODELS: &[(&str, &str)] = &[
    ("add", "example-add"),
    ("add_bool", "example-add"),
    ("add_int8", "example-add"),
    ("add_int16", "example-add"),
    ("add_int32", "example-add"),
    ("add_int64", "example-add"),
    ("add_uint8", "example-add"),
    ("add_uint16", "example-add"),
    ("add_uint32", "example-add"),
    ("add_uint64", "example-add"),
    ("add_float16", "example-add"),
    ("add_bfloat16", "example-add"),
    ("add_float32", "example-add"),
    ("add_float64", "example-add"),
    ("upper", "example-strings"),
    ("length", "example-strings"),
];

#[test]
fn python_v2_clients_pass_against_the_server() {
    let Some(python) =
        crate::support::python::interpreter("python_clients", "bash tests/python/setup.sh")
    else {
        return;
    };

    let server = TestServer::start(&[]);
    let http = server.http();
    for (name, package) in MODELS {
        register(&http, name, package, Some(name));
    }
    let idle = TestServer::start(&["--header-timeout-s", IDLE_HEADER_TIMEOUT_S]);
    register(&idle.http(), "add", "example-add", Some("add"));
    // Keys and tenants: `team-a` has `add` and an infinite loop, and one call slot (so a call
    // right after a deadline shows the loop's slot was freed); `team-b` has nothing.
    let keyed = Keyed::start(&[]);
    let (team_a, a) = keyed.tenant("team-a");
    let (_, b) = keyed.tenant("team-b");
    register(&team_a, "add", "example-add", Some("add"));
    register(&team_a, "spin", "guest-hostile", Some("spin"));
    let quota = keyed.admin.put(
        "/v1/tenants/team-a/quota",
        json!({ "max_concurrent_calls": 1 }).to_string().as_bytes(),
    );
    assert_eq!(
        quota.status,
        200,
        "{}",
        String::from_utf8_lossy(&quota.body)
    );

    let extra = std::env::var("WASMRPC_PYTEST_ARGS").unwrap_or_default();
    // KServe's client and tritonclient's gRPC modules cannot share a process (their protobuf
    // messages collide in protobuf's one pool, tests/python/conftest.py): two runs.
    for (what, path, kserve) in [
        ("tests/python", "tests/python", "0"),
        (
            "KServe's gRPC client",
            "tests/python/test_kserve_grpc.py",
            "1",
        ),
    ] {
        let mut pytest = Command::new(&python);
        pytest
            .current_dir(workspace_root())
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", path])
            .args(extra.split_whitespace())
            .env("WASMRPC_KSERVE_TESTS", kserve)
            .env("WASMRPC_URL", &server.url)
            .env("WASMRPC_IDLE_URL", &idle.url)
            .env("WASMRPC_TEST_HEADER_TIMEOUT_S", IDLE_HEADER_TIMEOUT_S)
            .env("WASMRPC_ADD_WASM", guest_path("example-add"))
            .env("WASMRPC_KEYED_URL", &keyed.server.url)
            .env("WASMRPC_KEY_A", a["key"].as_str().expect("a key"))
            .env("WASMRPC_KEY_B", b["key"].as_str().expect("a key"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1");
        // pytest's report goes straight to the terminal, as it runs.
        let status = pytest.status().unwrap_or_else(|e| {
            panic!(
                "running {} (WASMRPC_PYTHON): {e}; `bash tests/python/setup.sh` creates it",
                python.to_string_lossy()
            )
        });
        // With `-k` (WASMRPC_PYTEST_ARGS) one run may select nothing: pytest's exit code 5.
        assert!(
            status.success() || (!extra.is_empty() && status.code() == Some(5)),
            "pytest {what} failed ({status}); its report is above"
        );
    }
}

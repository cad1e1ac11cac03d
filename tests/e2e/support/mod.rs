//! Shared pieces of the end-to-end suite: guests built from source, the real server, raw HTTP.

pub mod component;
pub mod compose;
pub mod guests;
pub mod handmade;
pub mod http;
pub mod nats;
pub mod otlp;
pub mod python;
pub mod server;
pub mod source_guests;

pub use guests::guest;
pub use http::Http;
pub use server::TestServer;

use serde_json::{Value, json};

/// A JSON tensor.
pub fn tensor(dtype: &str, shape: &[u64], data: Value) -> Value {
    json!({ "dtype": dtype, "shape": shape, "data": data })
}

/// A float32 scalar, the argument every hostile method takes.
pub fn scalar_f32(v: f32) -> Value {
    tensor("float32", &[], json!([v]))
}

/// Register `package`'s component as `name` (optionally one `export`); asserts success.
pub fn register(http: &Http, name: &str, package: &str, export: Option<&str>) -> Value {
    let path = match export {
        Some(e) => format!("/v1/methods/{name}?export={e}"),
        None => format!("/v1/methods/{name}"),
    };
    let r = http.put(&path, &guest(package));
    assert!(
        r.status == 200 || r.status == 201,
        "registering {name}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// The outputs of a successful call (panics with the error otherwise).
pub fn outputs(r: &http::Response) -> Vec<Value> {
    assert_eq!(
        r.status,
        200,
        "call failed: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()["outputs"].as_array().cloned().unwrap_or_default()
}

/// Run the `wasmrpc` binary with `args`, free of the caller's `WASMRPC_*` client settings;
/// returns (success, stdout, stderr).
pub fn run_wasmrpc(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(args)
        .env_remove("WASMRPC_CA_CERT")
        .env_remove("WASMRPC_SERVER")
        .env_remove("WASMRPC_KEY")
        .output()
        .expect("running wasmrpc");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `wasmrpc_compiles_total` from `/metrics` as `http` sees it: how many components the server
/// has compiled since it started.
pub fn compiles_total(http: &Http) -> u64 {
    metric(http, "wasmrpc_compiles_total")
}

/// The value of the unlabelled counter or gauge `name` in the server's `/metrics`.
pub fn metric(http: &Http, name: &str) -> u64 {
    let r = http.get("/metrics");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let prefix = format!("{name} ");
    String::from_utf8_lossy(&r.body)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{name} in /metrics"))
        .parse()
        .unwrap()
}

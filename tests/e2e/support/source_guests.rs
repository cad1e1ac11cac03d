//! Guests written in Python and JavaScript, built from source with `wasmrpc build` and the stock
//! toolchains it installs (componentize-py, componentize-js) into `target/toolchains`.
//!
//! A build takes 10 to 30 seconds, so each source is built once per test process, one at a time
//! (the toolchains install on the first build, and two builds at once would only share the two
//! cores), and kept under `target/guests/source/` named by a hash of everything it is made from:
//! the source, the SDK's files and the WIT package. A rerun with none of them changed builds
//! nothing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::guests::workspace_root;

/// Where every source-built test uses its toolchains (`wasmrpc build --toolchains`).
pub fn toolchains_dir() -> PathBuf {
    workspace_root().join("target/toolchains")
}

/// The component built from `source` (relative to the repository, e.g.
/// `examples/python/softmax/app.py`), built on first use.
pub fn source_guest(source: &str) -> Vec<u8> {
    let path = source_guest_path(source);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The path of the component built from `source` (see [`source_guest`]).
pub fn source_guest_path(source: &str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    // Held for the whole build: one build at a time, and each source built once.
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(path) = built.get(source) {
        return path.clone();
    }
    let path = build(source);
    built.insert(source.to_owned(), path.clone());
    path
}

fn build(source: &str) -> PathBuf {
    let root = workspace_root();
    let file = root.join(source);
    let sdk = match file.extension().and_then(|e| e.to_str()) {
        Some("py") => "guest-sdk/python/src",
        Some("js" | "mjs" | "ts") => "guest-sdk/js/src",
        other => panic!("{source}: no source guest of extension {other:?}"),
    };
    let mut hasher = DefaultHasher::new();
    hash_tree(&file, &mut hasher);
    hash_tree(&root.join(sdk), &mut hasher);
    hash_tree(&root.join("wit"), &mut hasher);
    let stem = source.trim_end_matches(|c| c != '.').trim_end_matches('.');
    let out = root.join("target/guests/source").join(format!(
        "{}-{:016x}.wasm",
        stem.replace(['/', '.'], "_"),
        hasher.finish()
    ));
    if out.exists() {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let partial = out.with_extension("partial.wasm");
    let output = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .arg("build")
        .arg(&file)
        .arg("-o")
        .arg(&partial)
        .arg("--toolchains")
        .arg(toolchains_dir())
        .output()
        .expect("running wasmrpc build");
    assert!(
        output.status.success(),
        "wasmrpc build {source} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::rename(&partial, &out).unwrap();
    out
}

/// Hash a file's bytes, or a directory's files (sorted, with their names) recursively.
fn hash_tree(path: &Path, hasher: &mut DefaultHasher) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with("__pycache__"))
            .collect();
        entries.sort();
        for entry in entries {
            entry.file_name().hash(hasher);
            hash_tree(&entry, hasher);
        }
    } else {
        std::fs::read(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .hash(hasher);
    }
}

/// Every dtype's edge values as JSON `data`: extremes, `-0.0`, infinities, NaN, the smallest
/// subnormal. A round trip through a guest must give back exactly these (floats compared by
/// their bits, so `-0.0` is not `0.0`). `(dtype, shape, data)`; `string` covers `bytes` too.
pub fn dtype_edges() -> Vec<(&'static str, Vec<u64>, serde_json::Value)> {
    use serde_json::json;
    vec![
        ("bool", vec![4], json!([true, false, true, false])),
        ("uint8", vec![4], json!([0, 1, 127, 255])),
        ("uint16", vec![4], json!([0, 1, 32768, 65535])),
        (
            "uint32",
            vec![4],
            json!([0, 1, 2147483648u32, 4294967295u32]),
        ),
        (
            "uint64",
            vec![4],
            json!([0, 1, 9223372036854775808u64, u64::MAX]),
        ),
        ("int8", vec![4], json!([-128, -1, 0, 127])),
        ("int16", vec![4], json!([-32768, -1, 0, 32767])),
        ("int32", vec![4], json!([i32::MIN, -1, 0, i32::MAX])),
        ("int64", vec![4], json!([i64::MIN, -1, 0, i64::MAX])),
        (
            "float16",
            vec![2, 4],
            json!([
                1.0,
                -0.0,
                "Infinity",
                "-Infinity",
                5.960464477539063e-8,
                65504.0,
                "NaN",
                0.5
            ]),
        ),
        (
            "bfloat16",
            vec![2, 4],
            json!([
                1.0,
                -0.0,
                "Infinity",
                "-Infinity",
                9.183549615799121e-41,
                3.3895313892515355e38,
                "NaN",
                0.5
            ]),
        ),
        (
            "float32",
            vec![2, 4],
            json!([
                1.0,
                -0.0,
                "Infinity",
                "-Infinity",
                1e-45,
                3.4028235e38,
                "NaN",
                0.1
            ]),
        ),
        (
            "float64",
            vec![2, 4],
            json!([
                1.0,
                -0.0,
                "Infinity",
                "-Infinity",
                5e-324,
                f64::MAX,
                "NaN",
                0.1
            ]),
        ),
        ("string", vec![2, 2], json!(["", "héllo", "日本", "x"])),
    ]
}

/// Whether two JSON elements of `dtype` are the same value: integers exactly, floats by their bits
/// (as `f32` for the dtypes the server writes in `f32`'s shortest form), anything else by equality.
pub fn same_element(dtype: &str, a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let narrow = matches!(dtype, "float16" | "bfloat16" | "float32");
    match (a, b) {
        (serde_json::Value::Number(x), serde_json::Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else if narrow {
                let bits = |v: &serde_json::Number| v.as_f64().map(|f| (f as f32).to_bits());
                bits(x) == bits(y)
            } else {
                x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits)
            }
        }
        _ => a == b,
    }
}

/// Asserts a call's one output is `data` of `dtype` and `shape` (elements as [`same_element`]).
pub fn assert_output(
    r: &super::http::Response,
    dtype: &str,
    shape: &[u64],
    data: &serde_json::Value,
    what: &str,
) {
    assert_eq!(
        r.status,
        200,
        "{what}: {}",
        String::from_utf8_lossy(&r.body)
    );
    let out = &r.json()["outputs"][0];
    assert_eq!(out["dtype"], dtype, "{what}: {out}");
    assert_eq!(out["shape"], serde_json::json!(shape), "{what}: {out}");
    let (got, want) = (out["data"].as_array().unwrap(), data.as_array().unwrap());
    assert!(
        got.len() == want.len() && got.iter().zip(want).all(|(g, w)| same_element(dtype, g, w)),
        "{what}: sent {want:?}, got back {got:?}"
    );
}

/// Registers every method of the component built from `source`, each under its own name (the
/// method's), with `PUT /v1/methods/NAME?export=NAME`; returns the names.
pub fn register_source(http: &super::Http, source: &str, methods: &[&str]) -> Vec<String> {
    let bytes = source_guest(source);
    methods
        .iter()
        .map(|m| {
            let r = http.put(&format!("/v1/methods/{m}?export={m}"), &bytes);
            assert!(
                r.status == 200 || r.status == 201,
                "registering {m} of {source}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            m.to_string()
        })
        .collect()
}

/// A `string` scalar: the argument of the hostile guests' probes.
pub fn string_scalar(text: &str) -> serde_json::Value {
    super::tensor("string", &[], serde_json::json!([text]))
}

/// The one string a call of `method` with `arg` answered (asserting that it answered).
pub fn said(http: &super::Http, method: &str, arg: serde_json::Value) -> String {
    let r = http.call(method, serde_json::json!([arg]), 30_000);
    super::outputs(&r)[0]["data"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Asserts that calling `method` with `arg` and a deadline of `deadline_ms` ends with
/// DEADLINE_EXCEEDED, not before the deadline and at most 3 s after it (generous: a debug build on
/// a shared machine).
pub fn assert_ends_at_its_deadline(
    http: &super::Http,
    method: &str,
    arg: serde_json::Value,
    deadline_ms: u64,
) {
    let started = std::time::Instant::now();
    let r = http.call(method, serde_json::json!([arg]), deadline_ms);
    let took = started.elapsed();
    assert_eq!(r.code(), "DEADLINE_EXCEEDED", "{method}: {}", r.message());
    let deadline = std::time::Duration::from_millis(deadline_ms);
    assert!(
        took >= deadline && took < deadline + std::time::Duration::from_secs(3),
        "{method} ended after {took:?}, its deadline {deadline:?}"
    );
}

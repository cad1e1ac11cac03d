//! Bad uploads get a clear INVALID_ARGUMENT (or 413) and store nothing.

use std::io::Write;

use serde_json::json;

use crate::support::compose::with_custom_section;
use crate::support::{TestServer, guest, http::read_response};

pub(crate) fn assert_nothing_stored(server: &TestServer) {
    assert_eq!(
        server.http().get("/v1/methods").json()["methods"],
        json!([])
    );
}

fn refused(server: &TestServer, bytes: &[u8], expect: &str) {
    let r = server.http().put("/v1/methods/bad", bytes);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert!(
        r.message().contains(expect),
        "expected `{expect}` in: {}",
        r.message()
    );
    assert_nothing_stored(server);
}

#[test]
fn non_components_are_refused_with_a_reason() {
    let server = TestServer::start(&[]);
    refused(&server, b"this is not wasm", "not WebAssembly");
    refused(&server, b"\0asm\x01\0\0\0", "core wasm module");
    refused(&server, b"\x7fELF\x02\x01\x01\0 precompiled", "precompiled");
    let component = guest("example-add");
    refused(&server, &component[..component.len() / 2], "invalid");
    let r = server.http().put("/v1/methods/bad", b"");
    assert_eq!(r.code(), "INVALID_ARGUMENT");
}

/// WASI 0.2 is allowed (an empty world: tests/e2e/wasi_world.rs); anything else a component
/// imports is refused from its declared imports, before compiling, each one named.
#[test]
fn forbidden_imports_are_refused_naming_the_import() {
    let server = TestServer::start(&[]);
    let bytes = wat::parse_str(
        r#"(component
            (import "wasi:io/streams@0.2.9" (instance))
            (import "wasi:foo/bar@0.2.0" (instance))
            (import "wasi:cli/environment@0.3.0" (instance))
            (import "evil:thing/steal" (instance))
            (instance $m)
            (export "wasmrpc:tensor/method@0.1.0" (instance $m)))"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    refused(&server, &bytes, "`wasi:foo/bar@0.2.0`");
    let took = started.elapsed();
    for name in ["`wasi:cli/environment@0.3.0`", "`evil:thing/steal`"] {
        refused(&server, &bytes, name);
    }
    let r = server.http().put("/v1/methods/bad", &bytes);
    assert!(!r.message().contains("wasi:io/streams"), "{}", r.message());
    // Nothing to compile here; a slow refusal would mean it came from the compiler
    // (tests/e2e/artifacts.rs times one against a component that takes seconds to compile).
    assert!(took < std::time::Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_component_of_another_world_is_refused() {
    let server = TestServer::start(&[]);
    refused(
        &server,
        &guest("guest-wrong-world"),
        "wasmrpc:tensor/method@0.1.0",
    );
}

#[test]
fn invalid_names_are_refused() {
    let server = TestServer::start(&[]);
    let r = server
        .http()
        .put("/v1/methods/_hidden", &guest("example-softmax"));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert_nothing_stored(&server);
}

#[test]
fn a_body_over_the_limit_is_refused_with_413_with_or_without_content_length() {
    let server = TestServer::start(&["--max-component-bytes", "100000"]);
    let http = server.http();

    // Declared too large: refused before the body is sent at all.
    let mut s = http.connect();
    write!(
        s,
        "PUT /v1/methods/big HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 10000000000\r\n\r\n"
    )
    .unwrap();
    let r = read_response(&mut s).unwrap();
    assert_eq!(r.status, 413);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");

    // Chunked, no length: cut off once past the limit.
    let mut s = http.connect();
    write!(
        s,
        "PUT /v1/methods/big HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let chunk = vec![0u8; 64 * 1024];
    for _ in 0..4 {
        if write!(s, "{:x}\r\n", chunk.len()).is_err()
            || s.write_all(&chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let r = read_response(&mut s).unwrap();
    assert_eq!(r.status, 413);
    assert_nothing_stored(&server);
}

#[test]
fn the_same_bytes_uploaded_twice_at_once_are_stored_once() {
    let server = TestServer::start(&[]);
    let bytes = std::sync::Arc::new(guest("example-softmax"));
    let handles: Vec<_> = ["s1", "s2"]
        .into_iter()
        .map(|name| {
            let (http, bytes) = (server.http(), bytes.clone());
            std::thread::spawn(move || http.put(&format!("/v1/methods/{name}"), &bytes).json())
        })
        .collect();
    let infos: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(infos[0]["digest"], infos[1]["digest"]);
    let blobs = std::fs::read_dir(server.data_dir().join("blobs/sha256"))
        .unwrap()
        .count();
    assert_eq!(blobs, 1);
}

#[test]
fn a_corrupted_blob_is_detected_on_load_and_never_run() {
    let mut server = TestServer::start(&[]);
    let info = server
        .http()
        .put("/v1/methods/softmax", &guest("example-softmax"))
        .json();
    let digest = info["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let path = server.data_dir().join("blobs/sha256").join(&digest);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    server.kill9_and_restart();
    let r = server.http().call(
        "softmax",
        json!([crate::support::tensor("float32", &[1], json!([1]))]),
        0,
    );
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "UNAVAILABLE");
    assert!(r.message().contains("corrupt"), "{}", r.message());

    // Registering the same bytes again repairs the stored blob, also across a restart.
    let again = server
        .http()
        .put("/v1/methods/softmax", &guest("example-softmax"));
    assert_eq!(
        again.status,
        200,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    server.kill9_and_restart();
    let r = server.http().call(
        "softmax",
        json!([crate::support::tensor("float32", &[1], json!([1]))]),
        0,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

/// Open descriptors of a process.
#[cfg(target_os = "linux")]
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("listing the server's descriptors")
        .count()
}

/// A registered component holds at most one file descriptor: its artifact file, which wasmtime
/// maps for its code and copy-on-write memory image once the registration commits
/// (`host/src/runtime/kept.rs`; without an artifact cache, the memfd of its image), never one per
/// method or per call. The server raises its soft open-file limit to
/// the hard one at start (`cli/open_files.rs`); docs/limits.md says what a deployment needs.
#[cfg(target_os = "linux")]
#[test]
fn a_distinct_component_holds_at_most_one_open_file() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let add = guest("example-add");
    // One upload first, so whatever the store opens once is open before counting.
    let r = http.put(
        "/v1/methods/first?export=add",
        &with_custom_section(&add, 0),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let before = open_files(server.pid());
    let mut digests = std::collections::HashSet::new();
    for n in 1..=50 {
        let r = http.put(
            &format!("/v1/methods/distinct-{n}?export=add"),
            &with_custom_section(&add, n),
        );
        assert_eq!(r.status, 201, "{n}: {}", String::from_utf8_lossy(&r.body));
        digests.insert(r.json()["digest"].as_str().unwrap().to_owned());
    }
    assert_eq!(digests.len(), 50, "the components are distinct");
    // The same bytes under more names share the compiled component and its image.
    for n in 1..=20 {
        let r = http.put(
            &format!("/v1/methods/again-{n}?export=add"),
            &with_custom_section(&add, 1),
        );
        assert_eq!(r.status, 201, "{n}: {}", String::from_utf8_lossy(&r.body));
    }
    let after = open_files(server.pid());
    assert!(
        // 50 artifact files, and a few memfds of replaced copies in memory that outlive the
        // swap (58 more in all measured; bounded, not one per component).
        after <= before + 50 + 10,
        "50 distinct components took {} more open files ({before} before, {after} after)",
        after.saturating_sub(before)
    );
    // And every one of them still runs.
    for n in [1, 25, 50] {
        let r = http.call(
            &format!("distinct-{n}"),
            json!([
                {"dtype": "int32", "shape": [1], "data": [n]},
                {"dtype": "int32", "shape": [1], "data": [1]}
            ]),
            0,
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["outputs"][0]["data"], json!([n + 1]));
    }
}

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped; `None` where this machine
/// refuses the mount (not root, or no tmpfs in this sandbox).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// The battery's disk-full row: an upload that does not fit is refused (RESOURCE_EXHAUSTED or
/// UNAVAILABLE, never acknowledged), leaves no partial file, and calls keep working.
#[test]
fn a_full_disk_refuses_the_upload_and_leaves_nothing_partial() {
    let Some(disk) = SmallDisk::mount("8m") else {
        eprintln!(
            "SKIPPED a_full_disk_refuses_the_upload_and_leaves_nothing_partial: this machine \
             refuses to mount a tmpfs (needs root)"
        );
        return;
    };
    let data_dir = disk.dir.path().join("data");
    let server = TestServer::start_in(&data_dir, &[]);
    let http = server.http();
    let component = guest("example-add");
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..200 {
        let name = format!("m{i}");
        let r = http.put(
            &format!("/v1/methods/{name}?export=add"),
            &with_custom_section(&component, i),
        );
        if r.status == 201 {
            acknowledged.push(name);
        } else {
            refusal = Some(r);
            break;
        }
    }
    let r = refusal.expect("an 8 MiB disk filled up");
    assert!(
        ["RESOURCE_EXHAUSTED", "UNAVAILABLE"].contains(&r.code().as_str()),
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    assert!(!acknowledged.is_empty());
    let tmp = data_dir.join("blobs/tmp");
    assert_eq!(
        std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0),
        0,
        "a partial file was left in {}",
        tmp.display()
    );
    let args = serde_json::json!([
        {"dtype": "int32", "shape": [1], "data": [2]},
        {"dtype": "int32", "shape": [1], "data": [3]}
    ]);
    for name in &acknowledged {
        assert_eq!(http.call(name, args.clone(), 0).status, 200, "{name}");
    }
    let listed = http.get("/v1/methods").json()["methods"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        listed,
        acknowledged.len(),
        "a refused upload was registered"
    );
}

//! Versions, deletion, and persistence across restarts and `kill -9`.

use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::support::{TestServer, guest, outputs, register, tensor};

fn add_args() -> serde_json::Value {
    json!([
        tensor("int32", &[1], json!([2])),
        tensor("int32", &[1], json!([3]))
    ])
}

#[test]
fn reregistering_creates_a_new_version_and_versions_can_be_pinned() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let bytes = guest("example-add");
    let first = http.put("/v1/methods/plus?export=add", &bytes);
    assert_eq!(first.status, 201);
    assert_eq!(first.json()["version"], 1);
    let second = http.put("/v1/methods/plus?export=add_int64", &bytes);
    assert_eq!(second.status, 200);
    assert_eq!(second.json()["version"], 2);
    assert_eq!(second.json()["versions"], json!([1, 2]));

    let info = http.get("/v1/methods/plus").json();
    assert_eq!(info["version"], 2);
    assert_eq!(info["export"], "add_int64");
    assert_eq!(info["size"], bytes.len());
    assert!(info["created_ms"].as_u64().unwrap() > 1_600_000_000_000);
    let v1 = http.get("/v1/methods/plus?version=1").json();
    assert_eq!(v1["export"], "add");

    // Version 1 takes int32, version 2 (the newest) int64.
    let r = http.post_json(
        "/v1/methods/plus/call?version=1",
        &json!({ "args": add_args() }),
    );
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([5])));
    let r = http.call("plus", add_args(), 0);
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());
    let r = http.get("/v1/methods/plus?version=7");
    assert_eq!(r.status, 404);
    assert!(r.message().contains("version 7"), "{}", r.message());
}

#[test]
fn deleting_removes_every_version() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    register(&http, "add", "example-add", Some("add"));
    let r = http.delete("/v1/methods/add");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["deleted_versions"], json!([1, 2]));
    assert_eq!(http.get("/v1/methods/add").code(), "NOT_FOUND");
    assert_eq!(http.call("add", add_args(), 0).code(), "NOT_FOUND");
    assert_eq!(http.delete("/v1/methods/add").status, 404);
    assert_eq!(http.get("/v1/methods").json()["methods"], json!([]));
    // The name starts again at version 1.
    assert_eq!(
        register(&http, "add", "example-add", Some("add"))["version"],
        1
    );
}

#[test]
fn deleting_one_version_keeps_the_others_callable_and_survives_a_restart() {
    let mut server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "plus", "example-add", Some("add"));
    register(&http, "plus", "example-add", Some("add_int64"));
    register(&http, "plus", "example-add", Some("add"));
    let r = http.delete("/v1/methods/plus?version=2");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["deleted_versions"], json!([2]));
    assert_eq!(
        http.get("/v1/methods/plus").json()["versions"],
        json!([1, 3])
    );
    let gone = http.post_json(
        "/v1/methods/plus/call?version=2",
        &json!({ "args": add_args() }),
    );
    assert_eq!(gone.code(), "NOT_FOUND");
    assert!(
        gone.message().contains("no version 2"),
        "{}",
        gone.message()
    );
    // A version that is not there: the same NOT_FOUND, and nothing else removed.
    let r = http.delete("/v1/methods/plus?version=2");
    assert_eq!(r.code(), "NOT_FOUND");
    assert!(r.message().contains("no version 2"), "{}", r.message());
    assert_eq!(
        http.delete("/v1/methods/plus?version=zero").code(),
        "INVALID_ARGUMENT"
    );
    assert_eq!(
        http.delete("/v1/methods/nothing?version=1").code(),
        "NOT_FOUND"
    );
    for pinned in [1, 3] {
        let r = http.post_json(
            &format!("/v1/methods/plus/call?version={pinned}"),
            &json!({ "args": add_args() }),
        );
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([5])));
    }

    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(
        http.get("/v1/methods/plus").json()["versions"],
        json!([1, 3])
    );
    // The last version left takes the name with it.
    assert_eq!(
        http.delete("/v1/methods/plus?version=1").json()["deleted_versions"],
        json!([1])
    );
    assert_eq!(
        http.delete("/v1/methods/plus?version=3").json()["deleted_versions"],
        json!([3])
    );
    assert_eq!(http.get("/v1/methods/plus").code(), "NOT_FOUND");
    assert_eq!(http.get("/v1/methods").json()["methods"], json!([]));
}

#[test]
fn methods_survive_a_restart_and_a_kill_9() {
    let mut server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    register(&http, "upper", "example-strings", Some("upper"));
    server.kill9_and_restart();
    let http = server.http();
    let names: Vec<String> = http.get("/v1/methods").json()["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["add", "upper"]);
    assert_eq!(
        outputs(&http.call("add", add_args(), 0))[0],
        tensor("int32", &[1], json!([5]))
    );
}

/// The compiled artifact of a component is kept on disk: a restart loads it instead of
/// compiling again (the file is not rewritten), a damaged one is replaced by a fresh compile,
/// and deleting the last method that uses a component deletes its artifact.
#[test]
fn a_restart_loads_compiled_artifacts_and_a_damaged_one_is_compiled_again() {
    use std::os::unix::fs::MetadataExt as _;
    let mut server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    register(&http, "add_again", "example-add", Some("add"));
    let artifacts = server.data_dir().join("artifacts");
    let files = || -> Vec<std::path::PathBuf> {
        // The artifacts (their MAC key, `mac.key`, lives beside them).
        let mut files: Vec<_> = std::fs::read_dir(&artifacts)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        files.sort();
        files
    };
    let [artifact] = &files()[..] else {
        panic!("one artifact for one component: {:?}", files())
    };
    let artifact = artifact.clone();
    let inode = std::fs::metadata(&artifact).unwrap().ino();

    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(
        outputs(&http.call("add", add_args(), 0))[0],
        tensor("int32", &[1], json!([5]))
    );
    assert_eq!(
        std::fs::metadata(&artifact).unwrap().ino(),
        inode,
        "loaded, not compiled and written again"
    );

    // A flipped byte: the artifact is refused, the component compiled again, the method works.
    let intact_length = std::fs::metadata(&artifact).unwrap().len() as usize;
    let mut damaged = std::fs::read(&artifact).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0xff;
    // Replaced, not written in place: the running server maps the file it serves add from, and
    // a file truncated under a mapping faults its reader.
    let replacement = artifact.with_extension("damaged");
    std::fs::write(&replacement, &damaged).unwrap();
    std::fs::rename(&replacement, &artifact).unwrap();
    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(
        outputs(&http.call("add", add_args(), 0))[0],
        tensor("int32", &[1], json!([5]))
    );
    // Compiled and written anew: a whole file again, whose MAC (its first 32 bytes) holds: the
    // next restart loads it rather than writing it again.
    let rewritten = std::fs::read(&artifact).unwrap();
    assert_ne!(rewritten, damaged, "the damaged file was replaced");
    assert_eq!(rewritten.len(), intact_length);
    let inode = std::fs::metadata(&artifact).unwrap().ino();
    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(std::fs::metadata(&artifact).unwrap().ino(), inode);
    assert_eq!(http.delete("/v1/methods/add").status, 200);
    assert_eq!(files().len(), 1, "still used by add_again");
    assert_eq!(http.delete("/v1/methods/add_again").status, 200);
    assert_eq!(
        files(),
        Vec::<std::path::PathBuf>::new(),
        "the last user is gone"
    );
}

/// The kill -9 durability loop of the battery: 100 uploads at once, killed as soon as the first is
/// acknowledged, restarted, checked; 20 cycles here, `WASMRPC_KILL9_CYCLES=100` for the long run
/// (docs/operations.md).
#[test]
fn every_acknowledged_upload_survives_kill_9_during_concurrent_uploads() {
    let cycles: usize = std::env::var("WASMRPC_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut server = TestServer::start(&[]);
    let bytes = Arc::new(guest("example-add"));
    let mut all_acknowledged = Vec::new();
    for round in 0..cycles {
        let acknowledged = Arc::new(Mutex::new(Vec::new()));
        let http = server.http();
        let threads: Vec<_> = (0..100)
            .map(|i| {
                let (http, bytes, acked) = (http.clone(), bytes.clone(), acknowledged.clone());
                std::thread::spawn(move || {
                    let name = format!("r{round}-m{i}");
                    if let Ok(r) = http.try_request(
                        "PUT",
                        &format!("/v1/methods/{name}?export=add"),
                        Some(&bytes),
                    ) && r.status == 201
                    {
                        acked.lock().unwrap().push(name);
                    }
                })
            })
            .collect();
        // Kill while uploads are in flight: as soon as the first is acknowledged.
        while acknowledged.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        server.kill9_and_restart();
        for t in threads {
            t.join().unwrap();
        }
        let http = server.http();
        all_acknowledged.extend(acknowledged.lock().unwrap().drain(..));
        for name in &all_acknowledged {
            let r = http.call(name, add_args(), 0);
            assert_eq!(
                outputs(&r)[0],
                tensor("int32", &[1], json!([5])),
                "acknowledged {name} lost after kill -9 (cycle {round})"
            );
        }
        // Whatever was registered, acknowledged or not, has its blob and runs.
        let listed = http.get("/v1/methods").json();
        for m in listed["methods"].as_array().expect("methods") {
            let name = m["name"].as_str().unwrap();
            assert_eq!(
                http.call(name, add_args(), 0).status,
                200,
                "{name} is registered without a working blob (cycle {round})"
            );
        }
        let blobs = server.data_dir().join("blobs/tmp");
        let leftovers = std::fs::read_dir(&blobs).map(|d| d.count()).unwrap_or(0);
        assert_eq!(leftovers, 0, "temp files left in {}", blobs.display());
    }
    println!(
        "kill -9 loop: {cycles} cycles, {} acknowledged uploads, all present",
        all_acknowledged.len()
    );
}

/// Copy a directory tree (the fixture is read-only input; the server takes a lock and writes).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create copy");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

/// `tests/fixtures/data-dir-format-0` was written by the server before stored registrations had
/// a format number of their own; an upgrade must read it as it was.
#[test]
fn a_data_dir_written_before_the_format_number_still_loads() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/data-dir-format-0");
    let dir = tempfile::tempdir().expect("temp dir");
    copy_tree(&fixture, dir.path());
    let server = TestServer::start_in(dir.path(), &[]);
    let http = server.http();

    let add = http.get("/v1/methods/add").json();
    assert_eq!(add["version"], 2);
    assert_eq!(add["versions"], json!([1, 2]));
    assert_eq!(add["export"], "add");
    assert_eq!(
        add["digest"],
        "sha256:8bc0714ca53aee76dcdc089bd6ef14586d8494f9055edd58d80561463d657dac"
    );
    assert_eq!(add["created_ms"], 1_795_432_739_079u64);
    assert_eq!(add["signature"]["inputs"][1]["name"], "b");
    assert_eq!(add["signature"]["inputs"][1]["shape"], json!(null));
    let v1 = http.get("/v1/methods/add?version=1").json();
    assert_eq!(v1["export"], "add_int32");

    let args = json!([
        tensor("int32", &[2], json!([1, 2])),
        tensor("int32", &[2], json!([10, 20]))
    ]);
    assert_eq!(
        outputs(&http.call("add", args, 0))[0],
        tensor("int32", &[2], json!([11, 22]))
    );
    let shout = http.call("shout", json!([tensor("string", &[1], json!(["hi"]))]), 0);
    assert_eq!(outputs(&shout)[0], tensor("string", &[1], json!(["HI"])));

    // New registrations go on from the old versions, and everything survives a restart.
    let third = register(&http, "add", "example-add", Some("add"));
    assert_eq!(third["version"], 3);
    drop(server);
    let server = TestServer::start_in(dir.path(), &[]);
    let list = server.http().get("/v1/methods").json();
    let names: Vec<(&str, u64)> = list["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["version"].as_u64().unwrap()))
        .collect();
    assert_eq!(names, [("add", 3), ("shout", 1)]);
}

/// The battery's restart with many methods: 1,000 here (`WASMRPC_MANY_METHODS=10000` for the
/// battery's count). Registering the same bytes again is a write, not a compile; after a restart
/// the server is ready only when it has loaded them, and then every method answers at once.
#[test]
fn a_restart_with_many_methods_is_ready_when_loaded_and_every_method_answers() {
    let n: usize = std::env::var("WASMRPC_MANY_METHODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut server = TestServer::start(&[]);
    let http = server.http();
    let bytes = guest("example-add");
    let started = std::time::Instant::now();
    for i in 0..n {
        let r = http.put(&format!("/v1/methods/m{i}?export=add"), &bytes);
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    let registering = started.elapsed();
    let started = std::time::Instant::now();
    // Returns once /readyz answers 200.
    server.kill9_and_restart();
    let ready = started.elapsed();
    let http = server.http();
    let started = std::time::Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..n {
        let call = std::time::Instant::now();
        let r = http.call(&format!("m{i}"), add_args(), 0);
        slowest = slowest.max(call.elapsed());
        assert_eq!(
            outputs(&r)[0],
            tensor("int32", &[1], json!([5])),
            "m{i} after the restart"
        );
    }
    println!(
        "{n} methods: registered in {registering:?}, ready {ready:?} after kill -9, all called \
         in {:?} (slowest first call {slowest:?})",
        started.elapsed()
    );
    assert_eq!(
        http.get("/v1/methods").json()["methods"]
            .as_array()
            .unwrap()
            .len(),
        n
    );
}

//! Compiled artifacts and the data directory: a refused upload compiles nothing and leaves
//! nothing on disk; artifacts belong to one tenant's registrations, are swept when none uses
//! them, are checked with a key before they are loaded as native code; the data directory is
//! owner-only; the compile child sees none of the server's environment.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::compiles::{add_call, hard_to_compile, hard_to_compile_declaring};
use crate::support::compose::with_custom_section;
use crate::support::{TestServer, compiles_total, guest, metric};
use crate::tenants::Keyed;

/// The compiled artifacts in a data directory.
fn artifacts(data_dir: &Path) -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("artifacts")) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect()
}

/// A component importing an interface no host provides is refused naming it, without compiling
/// (in milliseconds, not the seconds the same code takes to compile), and leaves nothing on
/// disk. Before, it was compiled first (an 18 MB one for 16 s) and left its artifact behind.
#[test]
fn an_import_no_host_provides_is_refused_before_compiling_and_leaves_nothing() {
    let server = TestServer::start(&["--compile-timeout-s", "120"]);
    let http = server.http();
    // The control: the same code, without the import, is compiled (then refused for its empty
    // method interface, after compiling).
    let code = hard_to_compile(1, 200, 20_000);
    let started = Instant::now();
    let r = http.put("/v1/methods/control", &code);
    let compile_time = started.elapsed();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.message().contains("wasmrpc:tensor/method"),
        "{}",
        r.message()
    );

    let importing =
        hard_to_compile_declaring(1, 200, 20_000, r#"(import "evil:thing/steal" (instance))"#);
    let started = Instant::now();
    let r = http.put("/v1/methods/importing", &importing);
    let refusal_time = started.elapsed();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert!(
        r.message().contains("`evil:thing/steal`"),
        "{}",
        r.message()
    );
    println!(
        "{} KiB component: compiled and refused in {compile_time:?}; with a forbidden import, \
         refused in {refusal_time:?}",
        importing.len() >> 10
    );
    assert!(
        refusal_time < Duration::from_secs(1) && refusal_time * 5 < compile_time,
        "refused in {refusal_time:?}, compiling takes {compile_time:?}"
    );
    assert_eq!(artifacts(server.data_dir()), BTreeSet::new());
}

/// Only a registration that succeeded keeps an artifact: one refused after compiling leaves
/// none (before, every compile stored its artifact, and nothing ever removed it).
#[test]
fn a_refused_upload_leaves_no_artifact() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put("/v1/methods/wrong", &hard_to_compile(1, 10, 100));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(artifacts(server.data_dir()), BTreeSet::new());
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(artifacts(server.data_dir()).len(), 1);
}

/// Artifacts no registration uses are swept: after a delete, and at start-up (a file left by
/// an older version, or by a registration deleted another way).
#[test]
fn artifacts_no_registration_uses_are_swept() {
    let mut server = TestServer::start(&[]);
    let http = server.http();
    for name in ["add", "plus"] {
        let r = http.put(
            &format!("/v1/methods/{name}?export=add"),
            &with_custom_section(&guest("example-add"), name.len()),
        );
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    }
    assert_eq!(artifacts(server.data_dir()).len(), 2);
    assert_eq!(http.delete("/v1/methods/plus").status, 200);
    let left = artifacts(server.data_dir());
    assert_eq!(left.len(), 1, "{left:?}");
    // A stray artifact (the naming of an older version) is gone after a restart; the one in
    // use stays, and is loaded rather than compiled.
    let stray = server
        .data_dir()
        .join("artifacts/0123456789abcdef-0123456789abcdef.cwasm");
    std::fs::write(&stray, b"stray").unwrap();
    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(artifacts(server.data_dir()), left);
    assert_eq!(
        compiles_total(&http),
        0,
        "the registered component loaded from its artifact"
    );
    assert_eq!(add_call(&http, "add"), json!([3]));
}

/// Tenant B uploading bytes tenant A registered compiles them again: nothing B can time tells
/// it that A has them. Before, B's upload loaded A's artifact and skipped the compile.
#[test]
fn another_tenants_identical_bytes_are_compiled_again() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    let bytes = guest("example-add");
    let r = a.put("/v1/methods/add?export=add", &bytes);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let before = compiles_total(&keyed.admin);
    let r = b.put("/v1/methods/add?export=add", &bytes);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        compiles_total(&keyed.admin),
        before + 1,
        "B's upload was compiled"
    );
    // Each tenant's registration has its own artifact; A registering its own bytes again needs
    // no compile.
    assert_eq!(artifacts(keyed.server.data_dir()).len(), 2);
    let r = a.put("/v1/methods/again?export=add", &bytes);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(compiles_total(&keyed.admin), before + 1);
    assert_eq!(add_call(&b, "add"), json!([3]));
}

/// An artifact replaced on disk by another intact artifact, with a correct sha256 in front of
/// it (what the check was before it was keyed), is not loaded: it is discarded and the
/// component compiled again from its stored bytes. Before, the server loaded the other
/// component's native code for this method.
#[test]
fn a_tampered_artifact_is_not_loaded_but_compiled_again() {
    use sha2::Digest as _;
    let mut server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let add_artifact = artifacts(server.data_dir());
    let r = http.put("/v1/methods/softmax", &guest("example-softmax"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let both = artifacts(server.data_dir());
    let softmax_artifact: Vec<_> = both.difference(&add_artifact).collect();
    let (add_file, softmax_file) = (
        add_artifact.first().unwrap().clone(),
        softmax_artifact[0].clone(),
    );
    // softmax's native code under add's name, behind the sha256 a hash-only check wanted.
    let stored = std::fs::read(&softmax_file).unwrap();
    let code = &stored[32..];
    let mut forged = sha2::Sha256::digest(code).to_vec();
    forged.extend_from_slice(code);
    assert_eq!(
        &forged[..32],
        sha2::Sha256::digest(&forged[32..]).as_slice(),
        "a hash-only check would accept it"
    );
    // Replaced, not written in place: the running server maps the file it serves add from
    // (`host/src/runtime/kept.rs`), and a file truncated under a mapping faults its reader.
    let replacement = add_file.with_extension("forged");
    std::fs::write(&replacement, &forged).unwrap();
    std::fs::rename(&replacement, &add_file).unwrap();
    server.kill9_and_restart();
    let http = server.http();
    assert_eq!(
        compiles_total(&http),
        1,
        "add was compiled again, softmax loaded"
    );
    assert_eq!(add_call(&http, "add"), json!([3]));
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// Every entry under `dir` with group or other permissions.
fn open_to_others(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    if mode(dir) & 0o077 != 0 {
        found.push((dir.to_path_buf(), mode(dir)));
    }
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            found.extend(open_to_others(&entry.path()));
        }
    }
    found
}

/// The data directory and everything in it are owner-only, and a directory made readable by
/// others (by an older version, or a lax umask) is fixed at start.
#[test]
fn the_data_directory_is_owner_only() {
    let mut server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let dir = server.data_dir().to_path_buf();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(open_to_others(&dir), vec![]);
    // Opened up while the server is down: closed again at start.
    for path in [
        dir.clone(),
        dir.join("artifacts"),
        dir.join("registry.redb"),
    ] {
        let m = if path.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).unwrap();
    }
    for file in artifacts(&dir) {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    server.kill9_and_restart();
    assert_eq!(open_to_others(&dir), vec![]);
    assert_eq!(add_call(&server.http(), "add"), json!([3]));
}

/// The compile child gets none of the server's environment (which may hold the cluster's
/// credentials), only its allocator's setting: read from /proc while it compiles.
#[test]
fn the_compile_child_sees_none_of_the_servers_environment() {
    use std::io::Write as _;
    let server = TestServer::start_with_env(
        &["--compile-timeout-s", "120"],
        &[("WASMRPC_TEST_SECRET", "nats://user:hunter2@example:4222")],
    );
    let http = server.http();
    let slow = hard_to_compile(6, 200, 20_000);
    let mut stream = http.connect();
    write!(
        stream,
        "PUT /v1/methods/slow HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n\r\n",
        slow.len()
    )
    .unwrap();
    stream.write_all(&slow).unwrap();
    // The child, once it runs the compiler (it names itself `wasmrpc-compile` then).
    let started = Instant::now();
    let child = loop {
        let found = crate::compiles::children(server.pid())
            .into_iter()
            .find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "wasmrpc-compile")
            });
        if let Some(pid) = found {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the compile did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap();
    let vars: Vec<String> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    // Its allocator's setting and the size of its compile pool (a thread per CPU and per 256 MiB
    // of the default 1 GiB budget), nothing else.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    assert_eq!(
        vars,
        [
            "MIMALLOC_ARENA_RESERVE=0".to_string(),
            format!("RAYON_NUM_THREADS={threads}")
        ]
    );
    drop(stream);
}

/// KiB of the server's memory resident in mappings of its artifact files that are not writable:
/// its components' compiled code and read-only data (`/proc/PID/smaps`).
#[cfg(target_os = "linux")]
fn resident_code_kib(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut code = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields
            .first()
            .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
        {
            code = fields.len() > 5 && fields[5].ends_with(".cwasm") && !fields[1].contains('w');
        } else if code && fields.first() == Some(&"Rss:") {
            kib += fields[1].parse::<u64>().unwrap();
        }
    }
    kib
}

/// A component nobody calls gives its code's pages back (`--release-idle-code-s`,
/// `runtime/idle_code.rs`), as soon as it is loaded and again once idle, and answers its next
/// call as before, its pages mapped again: the server's memory follows the components in use,
/// not every one ever registered.
#[cfg(target_os = "linux")]
#[test]
fn an_idle_components_code_pages_are_handed_back_and_its_next_call_answers() {
    let server = TestServer::start(&["--release-idle-code-s", "1"]);
    let http = server.http();
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let call = |n: i32| {
        let r = http.call(
            "add",
            json!([
                {"dtype": "int32", "shape": [1], "data": [n]},
                {"dtype": "int32", "shape": [1], "data": [1]}
            ]),
            0,
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["outputs"][0]["data"], json!([n + 1]));
    };
    assert_eq!(
        resident_code_kib(server.pid()),
        0,
        "what loading the component touched is handed back at once"
    );
    call(1);
    let touched = resident_code_kib(server.pid());
    assert!(touched > 0, "a called component's code is resident");
    let released = |at_least: u64| {
        let waited = Instant::now();
        while metric(&http, "wasmrpc_idle_code_releases_total") < at_least {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "no release within 30 s of idleness"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    released(1);
    assert_eq!(
        resident_code_kib(server.pid()),
        0,
        "an idle component's code is not resident ({touched} KiB was)"
    );
    call(41);
    assert!(
        resident_code_kib(server.pid()) > 0,
        "the call mapped its code again"
    );
    // Released again once idle again, and still answering after that.
    released(2);
    call(99);
}

/// With `--release-idle-code-s 0` code stays resident: nothing is released.
#[cfg(target_os = "linux")]
#[test]
fn release_idle_code_zero_keeps_code_resident() {
    let server = TestServer::start(&["--release-idle-code-s", "0"]);
    let http = server.http();
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(metric(&http, "wasmrpc_idle_code_releases_total"), 0);
    assert!(resident_code_kib(server.pid()) > 0);
}

//! Compiling uploads: each compile runs in a child process with a memory and CPU budget, is
//! killed the moment its upload stops waiting, and leaves nothing behind in the server.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::compose::with_custom_section;
use crate::support::{TestServer, guest};
use crate::uploads::assert_nothing_stored;

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("reading status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib << 10
}

/// Processes whose parent is `pid`: the server's compile children.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("listing /proc").flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // After the command name in parentheses: state, then the parent's pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

/// Waits (briefly) until the server has no compile child left; the children it still has.
fn children_after_settling(pid: u32) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let left = children(pid);
        // A killed child is reaped by the server soon after; until then it is a zombie, which
        // counts too.
        if left.is_empty() || started.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `functions` functions of `blocks` blocks each, every block adding two of `locals` i64 locals
/// and branching on the sum: work for Cranelift's register allocator, in time and memory. It
/// stays under the static limits checked before compiling (`MAX_FUNCTION_BODY_BYTES`,
/// `MAX_LOCALS_PER_FUNCTION`) so that the compiler does see it. It exports an empty method
/// interface, which passes the checks made before compiling but not the type check after: it is
/// refused after compiling anyway.
pub(crate) fn hard_to_compile(functions: usize, locals: usize, blocks: usize) -> Vec<u8> {
    hard_to_compile_declaring(functions, locals, blocks, "")
}

/// The method interface's name exported as an empty instance: enough for the checks made
/// before compiling (`runtime/declared.rs`), refused after.
pub(crate) const EMPTY_METHOD_EXPORT: &str =
    r#"(instance $method) (export "wasmrpc:tensor/method@0.1.0" (instance $method))"#;

/// [`hard_to_compile`] with `declarations` (imports, say) at the start of the component.
pub(crate) fn hard_to_compile_declaring(
    functions: usize,
    locals: usize,
    blocks: usize,
    declarations: &str,
) -> Vec<u8> {
    let mut text = format!("(component {declarations} (core module");
    for f in 0..functions {
        text.push_str("(func (result i64) (local");
        text.push_str(&" i64".repeat(locals));
        text.push(')');
        for i in 0..blocks {
            let (a, b, c) = (
                (i * 7 + f) % locals,
                (i * 13 + 1) % locals,
                (i * 31 + 2) % locals,
            );
            text.push_str(&format!(
                "(block (br_if 0 (i64.eqz (local.tee {c} (i64.add (local.get {a}) (local.get {b}))))))"
            ));
        }
        // Every local stays live to the end.
        text.push_str("(i64.const 0)");
        for l in 0..locals {
            text.push_str(&format!("(i64.add (local.get {l}))"));
        }
        text.push(')');
    }
    text.push_str(&format!(") {EMPTY_METHOD_EXPORT})"));
    wat::parse_str(&text).expect("the component is valid text")
}

/// Several seconds of compiling for each of its 6 functions.
fn slow_to_compile() -> Vec<u8> {
    hard_to_compile(6, 200, 20_000)
}

/// `name` (the add example) called on 1 and 2: the output's data.
pub(crate) fn add_call(http: &crate::support::Http, name: &str) -> serde_json::Value {
    let r = http.call(
        name,
        json!([
            {"dtype": "int32", "shape": [1], "data": [1]},
            {"dtype": "int32", "shape": [1], "data": [2]}
        ]),
        0,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["outputs"][0]["data"].clone()
}

/// A compile past its timeout is killed with its process: its slot, CPU and memory are free at
/// once. Before compiles ran in child processes, two such uploads left the next one waiting 24 s
/// and the abandoned compiles kept running for minutes.
#[test]
fn a_compile_past_its_timeout_is_killed_and_frees_its_slot_at_once() {
    let server = TestServer::start(&["--compile-timeout-s", "1"]);
    let http = server.http();
    let slow = slow_to_compile();
    // Distinct bytes, so that nothing could share one compile between the uploads.
    let slow: Vec<Vec<u8>> = (0..4).map(|n| with_custom_section(&slow, n)).collect();
    let upload_slow = |names: std::ops::Range<usize>| {
        let handles: Vec<_> = names
            .map(|n| {
                let (http, bytes) = (http.clone(), slow[n].clone());
                std::thread::spawn(move || http.put(&format!("/v1/methods/slow-{n}"), &bytes))
            })
            .collect();
        for h in handles {
            let r = h.join().unwrap();
            assert_eq!(r.status, 504, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.code(), "DEADLINE_EXCEEDED");
            assert!(r.message().contains("limit of 1 s"), "{}", r.message());
        }
    };
    for (round, uploads) in [0..2, 2..4].into_iter().enumerate() {
        // Two slow compiles take both slots and time out.
        upload_slow(uploads);
        let left = children_after_settling(server.pid());
        assert!(left.is_empty(), "compiles still running: {left:?}");
        // Nothing to wait for: the next upload compiles at once.
        let started = Instant::now();
        let fresh = with_custom_section(&guest("example-add"), 100 + round);
        let r = http.put(&format!("/v1/methods/add-{round}?export=add"), &fresh);
        let took = started.elapsed();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        assert!(
            took < Duration::from_secs(5),
            "a small upload waited {took:?} after compiles timed out"
        );
    }
    assert_eq!(add_call(&http, "add-1"), json!([3]));
}

/// A component that needs more memory to compile than the budget is refused with
/// RESOURCE_EXHAUSTED naming the budget, quickly, and the server's own memory does not move.
/// This one (one function of 10,000 locals and 30,000 branches, within the static limits) took
/// the server past 4.7 GB in 50 s when it compiled in-process.
#[test]
fn a_compile_over_its_memory_budget_is_refused_and_costs_the_server_nothing() {
    let server = TestServer::start(&["--compile-memory-mib", "256"]);
    let http = server.http();
    let hungry = hard_to_compile(1, 10_000, 30_000);
    let before = rss(server.pid());
    let started = Instant::now();
    let r = http.put("/v1/methods/hungry", &hungry);
    let took = started.elapsed();
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");
    assert!(
        r.message().contains("compile memory budget of 256 MiB"),
        "{}",
        r.message()
    );
    assert!(took < Duration::from_secs(30), "refused after {took:?}");
    let grew = rss(server.pid()).saturating_sub(before);
    println!(
        "memory-hungry compile refused after {took:?}; server RSS grew {} KiB",
        grew >> 10
    );
    assert!(grew < 32 << 20, "the server's RSS grew {} MiB", grew >> 20);
    assert!(children_after_settling(server.pid()).is_empty());
    assert_nothing_stored(&server);
    // Uploads that fit the budget still work.
    let r = http.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(add_call(&http, "add"), json!([3]));
}

/// Memory used to compile stays in the child: compiling 40,000 functions (refused afterwards,
/// as they export nothing) leaves the server's RSS where it was, and a registered component
/// costs the server little.
#[test]
fn compile_memory_is_given_back_and_a_registered_component_costs_little() {
    let server = TestServer::start(&[]);
    let http = server.http();
    // Whatever the first upload sets up once (the store, the pool) is set up before measuring.
    let add = guest("example-add");
    let r = http.put(
        "/v1/methods/first?export=add",
        &with_custom_section(&add, 0),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut text = String::from("(component (core module");
    for i in 0..40_000 {
        text.push_str(&format!(
            "(func (export \"f{i}\") (result i32) (i32.const {i}))"
        ));
    }
    text.push_str(&format!(") {EMPTY_METHOD_EXPORT})"));
    let many = wat::parse_str(&text).unwrap();
    let before = rss(server.pid());
    let r = http.put("/v1/methods/many", &many);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let after_many = rss(server.pid());
    let grew = after_many.saturating_sub(before);
    println!(
        "compiling 40,000 functions ({} KiB): server RSS grew {} KiB",
        many.len() >> 10,
        grew >> 10
    );
    assert!(grew < 64 << 20, "the server kept {} MiB", grew >> 20);
    // Fifty distinct registered components.
    let before = rss(server.pid());
    for n in 1..=50 {
        let r = http.put(
            &format!("/v1/methods/add-{n}?export=add"),
            &with_custom_section(&add, n),
        );
        assert_eq!(r.status, 201, "{n}: {}", String::from_utf8_lossy(&r.body));
    }
    let per_component = rss(server.pid()).saturating_sub(before) / 50;
    println!(
        "a registered {} KiB component costs the server {} KiB of RSS",
        add.len() >> 10,
        per_component >> 10
    );
    assert!(
        per_component < 4 << 20,
        "each component costs {} KiB",
        per_component >> 10
    );
    assert_eq!(add_call(&http, "add-50"), json!([3]));
}
/// A compile bomb (one function of 1 MiB, tens of thousands of locals) is refused before the
/// compiler runs, at once, and costs the server nothing.
#[test]
fn a_compile_bomb_is_refused_as_too_complex_before_compiling() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let mut text = String::from("(component (core module (func (local");
    text.push_str(&" i64".repeat(20_000));
    text.push(')');
    for i in 0..40_000 {
        text.push_str(&format!(
            "(block (br_if 0 (i64.eqz (local.tee {} (i64.add (local.get {}) (local.get {}))))))",
            i % 20_000,
            (i * 7) % 20_000,
            (i * 13) % 20_000
        ));
    }
    text.push_str(")))");
    let bomb = wat::parse_str(&text).unwrap();
    let started = Instant::now();
    let r = http.put("/v1/methods/bomb", &bomb);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.message().contains("too complex to compile"),
        "{}",
        r.message()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_nothing_stored(&server);
}

/// Bytes already compiled here register without compiling again: a second name for them is
/// answered at once even while every compile slot is taken.
#[test]
fn registering_known_bytes_again_needs_no_compile() {
    use std::io::Write as _;
    // A compile timeout long enough for any machine, however busy: the slow uploads below are
    // ended by their clients going away, not by the timeout.
    let server = TestServer::start(&["--compile-timeout-s", "120"]);
    let http = server.http();
    assert_eq!(
        http.put("/v1/methods/add?export=add", &guest("example-add"))
            .status,
        201
    );
    // Both compile slots busy with slow uploads, sent on connections held open.
    let slow: Vec<_> = (0..2)
        .map(|n| {
            let bytes = with_custom_section(&slow_to_compile(), 10 + n);
            let mut stream = http.connect();
            write!(
                stream,
                "PUT /v1/methods/slow-{n} HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n\r\n",
                bytes.len()
            )
            .unwrap();
            stream.write_all(&bytes).unwrap();
            stream
        })
        .collect();
    // The condition the test needs, seen rather than waited for: both compiles running.
    let waiting = Instant::now();
    while children(server.pid()).len() < 2 {
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "the slow compiles did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = http.put("/v1/methods/plus?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    // It did not wait for a compile slot: both slow compiles are still running.
    assert_eq!(
        children(server.pid()).len(),
        2,
        "the registration waited for the slow compiles"
    );
    drop(slow);
    assert!(children_after_settling(server.pid()).is_empty());
}

/// An upload whose client goes away mid-compile takes its compile with it: the child is killed,
/// not left running for nobody.
#[test]
fn a_compile_whose_client_went_away_is_killed() {
    use std::io::Write as _;
    let server = TestServer::start(&["--compile-timeout-s", "60"]);
    let slow = with_custom_section(&slow_to_compile(), 7);
    let mut stream = server.http().connect();
    write!(
        stream,
        "PUT /v1/methods/slow HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n\r\n",
        slow.len()
    )
    .unwrap();
    stream.write_all(&slow).unwrap();
    // The compile starts once the whole body is in.
    let started = Instant::now();
    while children(server.pid()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no compile started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(stream);
    let left = children_after_settling(server.pid());
    assert!(left.is_empty(), "compiles still running: {left:?}");
    assert_nothing_stored(&server);
}

//! Guests that misbehave while being instantiated: a core start function that loops, a memory
//! declared over the cap, and several memories that each fit under the cap but together do not.
//!
//! Registering a component instantiates it to ask for its signatures, in a fresh instance under
//! the registration deadline (fixed at 5 s) and the same memory cap as a call, so misbehaviour
//! during instantiation shows at upload: the upload is refused with the deadline's or the cap's
//! code, nothing is registered, and the server keeps serving. The components are a real guest
//! with core modules appended (`support::compose`), instantiated after the guest's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::sandbox::assert_still_serving;
use crate::support::compose::with_started_modules;
use crate::support::http::Response;
use crate::support::{Http, TestServer, guest, outputs, register, scalar_f32};

/// The memory cap the servers here run with (`--memory-per-call-mib`).
const CAP_MIB: u64 = 64;
/// Bytes in a wasm page.
const PAGE: u64 = 64 << 10;
/// Pages in the memory cap.
const CAP_PAGES: u64 = (CAP_MIB << 20) / PAGE;
/// The deadline of `signatures()` at registration, instantiation included (fixed; docs/limits.md).
const SIGNATURES_DEADLINE: Duration = Duration::from_secs(5);
/// What a debug build on a loaded 2-core machine may add to an answer's time.
const SLACK: Duration = Duration::from_millis(1000);

/// A server with a 64 MiB memory cap and a healthy method, `hostile` (the hostile guest's echo).
fn server(extra: &[&str]) -> TestServer {
    let mut args = vec!["--memory-per-call-mib", "64"];
    args.extend_from_slice(extra);
    let server = TestServer::start(&args);
    register(&server.http(), "hostile", "guest-hostile", Some("echo"));
    server
}

/// The hostile guest with `modules` appended and instantiated.
fn hostile_with(modules: &[&str]) -> Vec<u8> {
    with_started_modules(&guest("guest-hostile"), modules)
}

/// Register `bytes` as `name` (its `echo` export), and how long the answer took.
fn upload(http: &Http, name: &str, bytes: &[u8]) -> (Response, Duration) {
    let started = Instant::now();
    let r = http.put(&format!("/v1/methods/{name}?export=echo"), bytes);
    (r, started.elapsed())
}

fn body(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// A refused upload leaves nothing behind under its name.
fn assert_not_registered(http: &Http, name: &str) {
    let r = http.get(&format!("/v1/methods/{name}"));
    assert_eq!(r.status, 404, "{name} was registered: {}", body(&r));
    assert_eq!(r.code(), "NOT_FOUND");
}

/// `name` is registered and answers a call.
fn assert_runs(http: &Http, name: &str) {
    let r = http.call(name, json!([scalar_f32(4.0)]), 0);
    assert_eq!(outputs(&r)[0], scalar_f32(4.0), "{name}");
}

#[test]
fn a_start_function_that_loops_is_stopped_at_the_registration_deadline() {
    let server = server(&[]);
    let http = server.http();
    // The control: a start function that returns is instantiated like any other, and the
    // component registers and runs. Its upload time is what compiling this component and
    // instantiating it take here, which the looping upload spends as well as the deadline.
    let (r, control) = upload(
        &http,
        "starts",
        &hostile_with(&["(module (func $start) (start $start))"]),
    );
    assert_eq!(r.status, 201, "{}", body(&r));
    assert_runs(&http, "starts");

    let looping = hostile_with(&["(module (func $start (loop br 0)) (start $start))"]);
    // Another tenant's calls keep running while the start function spins: it yields its worker
    // thread at every epoch tick. Each completion is timed, to find those made during the spin.
    let done = Arc::new(AtomicBool::new(false));
    let healthy = {
        let (http, done) = (http.clone(), done.clone());
        std::thread::spawn(move || {
            let mut finished = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let r = http.call("hostile", json!([scalar_f32(2.0)]), 0);
                assert_eq!(r.status, 200, "{}", body(&r));
                finished.push(Instant::now());
            }
            finished
        })
    };
    let started = Instant::now();
    let (r, took) = upload(&http, "loops", &looping);
    let answered = Instant::now();
    done.store(true, Ordering::Relaxed);
    let finished = healthy.join().unwrap();

    // Refused as the component's own fault, naming the deadline that stopped it.
    assert_eq!(r.status, 400, "{}", body(&r));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert!(
        r.message().contains("ran past its deadline of 5000 ms"),
        "{}",
        r.message()
    );
    // It ran until the deadline, and no longer: the compile, the deadline and slack.
    assert!(took >= SIGNATURES_DEADLINE, "answered after {took:?}");
    assert!(
        took < control + SIGNATURES_DEADLINE + SLACK,
        "answered after {took:?} (the control upload took {control:?})"
    );
    // The start function spun through the last 4 s before the answer (its deadline is 5 s, and
    // the compile came before it): calls finished then were served during the spin.
    let spin = answered - Duration::from_secs(4)..answered;
    let during = finished.iter().filter(|t| spin.contains(*t)).count();
    assert!(
        during > 0,
        "no healthy call finished during the spin ({} in all, the upload took {took:?}, started \
         {:?} before the answer)",
        finished.len(),
        answered - started
    );
    assert_not_registered(&http, "loops");
    assert_still_serving(&http);
}

/// A field of `/proc/PID/status`, in bytes (`VmRSS`, `VmHWM`: the kernel counts them in KiB).
#[cfg(target_os = "linux")]
fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable {line:?}"));
    kib << 10
}

/// Reset the process's peak resident size (`VmHWM`) to its current one, so the next reading of
/// `VmHWM` is the peak since now (`5` to `clear_refs`, Linux 4.0 and later).
#[cfg(target_os = "linux")]
fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .unwrap_or_else(|e| panic!("resetting the peak RSS of {pid}: {e}"));
}

#[cfg(target_os = "linux")]
#[test]
fn a_memory_declared_over_the_cap_is_resource_exhausted_and_never_allocated() {
    // 96 MiB against the 64 MiB cap, with a byte in every page: were the memory ever allocated
    // and initialised, the server's resident size would grow by all of it.
    let pages = CAP_PAGES * 3 / 2;
    let data: String = (0..pages)
        .map(|p| format!("(data (i32.const {}) \"x\")", p * PAGE))
        .collect();
    let bytes = hostile_with(&[&format!("(module (memory {pages}) {data})")]);
    // The pooling allocator reserves each memory's slot up front, the on-demand one allocates at
    // instantiation: the refusal must not depend on which one serves.
    for pooling in ["true", "false"] {
        let server = server(&["--pooling", pooling]);
        let http = server.http();
        reset_peak_rss(server.pid());
        let before = proc_status_bytes(server.pid(), "VmRSS");
        let (r, took) = upload(&http, "big", &bytes);
        let peak = proc_status_bytes(server.pid(), "VmHWM");
        assert_eq!(r.status, 429, "pooling {pooling}: {}", body(&r));
        assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "pooling {pooling}");
        let message = r.message();
        assert!(
            message.contains("memory limit of 67108864 bytes")
                && message.contains(&format!("{} bytes", pages * PAGE)),
            "pooling {pooling}: {message}"
        );
        // Refused from the declaration, before compiling or instantiating anything.
        assert!(took < SLACK, "pooling {pooling}: answered after {took:?}");
        let grew = peak.saturating_sub(before);
        assert!(
            grew < CAP_MIB << 20,
            "pooling {pooling}: the server's RSS peaked {} MiB above its {} MiB before the upload",
            grew >> 20,
            before >> 20
        );
        assert_not_registered(&http, "big");
        assert_still_serving(&http);
    }
}

#[test]
fn the_memory_cap_is_on_the_sum_of_all_memories_of_an_instance() {
    let server = server(&[]);
    let http = server.http();
    // Each appended memory takes 40 % of the cap: two fit beside the guest's own memory, a
    // third does not, though no memory alone comes near the cap.
    let share = CAP_PAGES * 2 / 5;
    // Grown by a start function, which traps when the grow is refused; or declared.
    let grown = format!(
        "(module (memory 0) (func $start \
           (if (i32.eq (memory.grow (i32.const {share})) (i32.const -1)) (then unreachable))) \
         (start $start))"
    );
    let declared = format!("(module (memory {share}))");
    for (how, module) in [("grown", &grown), ("declared", &declared)] {
        let fits = format!("fits-{how}");
        let (r, control) = upload(&http, &fits, &hostile_with(&[module, module]));
        assert_eq!(r.status, 201, "{how}: {}", body(&r));
        assert_runs(&http, &fits);

        let over = format!("over-{how}");
        let (r, took) = upload(&http, &over, &hostile_with(&[module, module, module]));
        assert_eq!(r.status, 429, "{how}: {}", body(&r));
        assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "{how}");
        assert!(
            r.message().contains("memory limit of 67108864 bytes"),
            "{how}: {}",
            r.message()
        );
        // Refused at instantiation, which takes no longer than the control's did.
        assert!(
            took < control + SLACK,
            "{how}: answered after {took:?} (the control upload took {control:?})"
        );
        assert_not_registered(&http, &over);
    }
    assert_still_serving(&http);
}

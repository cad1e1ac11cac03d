//! Guests importing WASI 0.2 upload and get an empty world: every reach for files, the
//! environment, sockets or names fails inside the guest, which answers cleanly; a sleep does not
//! outlive the deadline; the clocks step by a millisecond (host/src/runtime/wasi_world.rs).

use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::sandbox::assert_still_serving;
use crate::support::{Http, TestServer, outputs, register, scalar_f32, tensor};

/// What a debug build on a loaded 2-core machine may add to an answer's time.
const SLACK: Duration = Duration::from_millis(1000);

/// Calls `name` with `args`, expecting the guest's own error `code` whose message has `says`.
fn fails_inside_the_guest(
    http: &Http,
    name: &str,
    args: serde_json::Value,
    code: &str,
    says: &str,
) {
    let r = http.call(name, args, 0);
    assert_eq!(
        r.code(),
        code,
        "{name}: {}",
        String::from_utf8_lossy(&r.body)
    );
    assert!(r.message().contains(says), "{name}: {}", r.message());
}

/// The hostile guest's `echo` as `hostile`, for [`assert_still_serving`].
fn register_echo(http: &Http) {
    register(http, "hostile", "guest-hostile", Some("echo"));
}

#[test]
fn files_and_the_environment_are_out_of_reach_and_the_call_answers() {
    let server = TestServer::start_with_env(&[], &[("WASMRPC_TEST_SECRET", "hunter2")]);
    let http = server.http();
    register_echo(&http);
    for method in ["read", "list_root", "write", "environment"] {
        register(&http, method, "guest-forbidden-fs", Some(method));
    }
    let marker = std::path::Path::new("/tmp/wasmrpc-guest-was-here");
    let _ = std::fs::remove_file(marker);
    fails_inside_the_guest(
        &http,
        "read",
        json!([]),
        "NOT_FOUND",
        "cannot read /etc/passwd",
    );
    fails_inside_the_guest(&http, "list_root", json!([]), "NOT_FOUND", "cannot list /");
    fails_inside_the_guest(&http, "write", json!([]), "NOT_FOUND", "cannot write");
    assert!(!marker.exists(), "the guest wrote {}", marker.display());
    // No variable (the server's own included), no argument, nothing on stdin.
    let r = http.call("environment", json!([]), 0);
    assert_eq!(outputs(&r)[0], tensor("int64", &[3], json!([0, 0, 0])));
    assert_still_serving(&http);
}

#[test]
fn sockets_and_name_lookups_are_denied_and_the_call_answers() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register_echo(&http);
    for method in ["connect", "listen", "udp", "resolve"] {
        register(&http, method, "guest-forbidden-net", Some(method));
    }
    // Listening for real: a connection or datagram that got out would arrive here.
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = |p: u16| json!([tensor("int32", &[], json!([p]))]);
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp_port = udp.local_addr().unwrap().port();
    let says = format!("cannot connect to 127.0.0.1:{tcp_port}");
    fails_inside_the_guest(
        &http,
        "connect",
        port(tcp_port),
        "FAILED_PRECONDITION",
        &says,
    );
    fails_inside_the_guest(
        &http,
        "listen",
        json!([]),
        "FAILED_PRECONDITION",
        "cannot listen",
    );
    fails_inside_the_guest(
        &http,
        "udp",
        port(udp_port),
        "FAILED_PRECONDITION",
        "cannot",
    );
    fails_inside_the_guest(
        &http,
        "resolve",
        json!([]),
        "FAILED_PRECONDITION",
        "cannot resolve",
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(tcp.accept().is_err(), "a guest's connection arrived");
    assert!(
        udp.recv(&mut [0; 64]).is_err(),
        "a guest's datagram arrived"
    );
    assert_still_serving(&http);
}

#[test]
fn a_guest_sleeping_in_a_host_call_gets_deadline_exceeded_at_its_deadline() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register_echo(&http);
    register(&http, "sleep", "guest-coarse-clock", Some("sleep"));
    // A short sleep is a sleep: the clock works.
    let started = Instant::now();
    let r = http.call("sleep", json!([scalar_f32(30.0)]), 0);
    assert_eq!(outputs(&r)[0], scalar_f32(30.0));
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "{:?}",
        started.elapsed()
    );

    // An hour's sleep waits in `poll`, where no epoch tick reaches: the call-level timeout ends it.
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let r = http.call("sleep", json!([scalar_f32(3_600_000.0)]), 500);
    let took = started.elapsed();
    assert_eq!(r.status, 504, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "DEADLINE_EXCEEDED");
    println!("an hour's sleep with a {deadline:?} deadline answered in {took:?}");
    assert!(took >= deadline && took < deadline + SLACK, "{took:?}");
    assert_still_serving(&http);
    // The next call of the same method is fine.
    let r = http.call("sleep", json!([scalar_f32(1.0)]), 0);
    assert_eq!(outputs(&r)[0], scalar_f32(1.0));
}

#[test]
fn a_guest_s_clocks_step_by_a_millisecond_at_least() {
    let server = TestServer::start(&[]);
    let http = server.http();
    for method in ["monotonic_step", "wall_step"] {
        register(&http, method, "guest-coarse-clock", Some(method));
        let r = http.call(method, json!([]), 0);
        let step = outputs(&r)[0]["data"][0].as_i64().unwrap();
        println!("{method}: the smallest step a guest saw is {step} ns");
        // Finer than 1 ms is refused; coarser than 50 ms would be a clock that barely moves.
        assert!(
            (1_000_000..50_000_000).contains(&step),
            "{method}: {step} ns"
        );
    }
}

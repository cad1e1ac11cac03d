//! The cluster on a real nats-server: workers are the real binary (`serve --cluster`), joined
//! through NATS started by `support::nats` on a free loopback port. Membership, the shared module
//! store, and calls between workers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::nats::{Nats, NatsCluster};
use crate::support::{TestServer, outputs, register, tensor};

/// A worker named `name` in the cluster of `nats`.
pub(crate) fn worker(nats: &Nats, name: &str, extra: &[&str]) -> TestServer {
    let url = nats.url();
    let mut args = vec!["--cluster", url.as_str(), "--name", name];
    args.extend_from_slice(extra);
    TestServer::start(&args)
}

/// Poll `check` every 20 ms until it holds; panics with `what` after `within`. Returns how long
/// it took. (Nothing signals these conditions over HTTP; the polls are the observation.)
pub(crate) fn eventually(
    within: Duration,
    what: &str,
    mut check: impl FnMut() -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        if check() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn names(server: &TestServer) -> Vec<String> {
    let r = server.http().get("/v1/cluster/workers");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn add_args(a: i32, b: i32) -> Value {
    json!([
        tensor("int32", &[1], json!([a])),
        tensor("int32", &[1], json!([b]))
    ])
}

pub(crate) fn call_on(
    server: &TestServer,
    method: &str,
    worker: &str,
    args: Value,
) -> crate::support::http::Response {
    server.http().post_json(
        &format!("/v1/methods/{method}/call?worker={worker}"),
        &json!({ "args": args }),
    )
}

#[test]
fn workers_list_every_member_with_its_name_rank_ip_and_port() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "alpha", &["--rank", "0"]);
    let b = worker(&nats, "beta", &["--rank", "1"]);
    eventually(
        Duration::from_secs(5),
        "both workers listed on both",
        || names(&a) == ["alpha", "beta"] && names(&b) == ["alpha", "beta"],
    );
    let list = a.http().get("/v1/cluster/workers").json();
    assert_eq!(list["this"], "alpha");
    let beta = &list["workers"][1];
    assert_eq!(beta["rank"], 1);
    assert_eq!(beta["ip"], "127.0.0.1");
    let port = beta["port"].as_u64().unwrap();
    assert_eq!(b.url, format!("http://127.0.0.1:{port}"));
}

/// `wasmrpc serve` joining the cluster at `url` as `name`, expected to refuse to start: its
/// stderr (it never says it is listening).
fn serve_refused(url: &str, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--cluster", url, "--name", name])
        .env("WASMRPC_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "it never said it was listening");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_taken_name_is_refused_at_start_saying_so() {
    let Some(nats) = Nats::start() else { return };
    let _first = worker(&nats, "same", &[]);
    let stderr = serve_refused(&nats.url(), "same");
    assert!(
        stderr.contains("the worker name `same` is taken by a live worker"),
        "{stderr}"
    );
}

#[test]
fn a_killed_worker_vanishes_from_the_list_within_a_few_seconds_and_may_rejoin() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "stays", &[]);
    let mut b = worker(&nats, "dies", &[]);
    eventually(Duration::from_secs(5), "both listed", || {
        names(&a).len() == 2
    });
    let killed = Instant::now();
    b.kill9_and_restart();
    // The restart joins again under its name (once the dead holder's entry expires).
    let rejoined = killed.elapsed();
    eprintln!("a killed worker rejoined under its name after {rejoined:?}");
    assert!(rejoined < Duration::from_secs(8), "{rejoined:?}");
    assert_eq!(names(&a), ["dies", "stays"]);
    drop(b);
    let gone = eventually(
        Duration::from_secs(6),
        "the dead worker leaves the list",
        || names(&a) == ["stays"],
    );
    eprintln!("a killed worker left the list after {gone:?}");
}

#[test]
fn a_server_outside_a_cluster_says_so_on_cluster_routes() {
    let server = TestServer::start(&[]);
    let r = server.http().get("/v1/cluster/workers");
    assert_eq!(r.code(), "FAILED_PRECONDITION", "{}", r.message());
    assert!(r.message().contains("--cluster"), "{}", r.message());
    register(&server.http(), "add", "example-add", Some("add"));
    let r = call_on(&server, "add", "any", add_args(1, 2));
    assert_eq!(r.code(), "FAILED_PRECONDITION");
    // Without ?worker the call runs here, as always.
    let r = server.http().call("add", add_args(1, 2), 0);
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([3])));
}

#[test]
fn a_method_registered_on_one_worker_is_callable_on_every_worker_within_a_second() {
    let Some(nats) = Nats::start() else { return };
    let ws: Vec<TestServer> = ["one", "two", "three"]
        .iter()
        .map(|n| worker(&nats, n, &[]))
        .collect();
    register(&ws[0].http(), "add", "example-add", Some("add"));
    for w in &ws[1..] {
        let took = eventually(Duration::from_secs(1), "registration visible", || {
            w.http().get("/v1/methods/add").status == 200
        });
        eprintln!("a registration was visible on another worker after {took:?}");
        let r = w.http().call("add", add_args(2, 3), 0);
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([5])));
    }
    // A new version through another worker, seen by the first.
    let r = ws[2].http().put(
        "/v1/methods/add?export=add_int64",
        &crate::support::guest("example-add"),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["version"], 2);
    eventually(Duration::from_secs(1), "version 2 visible", || {
        ws[0].http().get("/v1/methods/add").json()["version"] == 2
    });
    assert_eq!(
        ws[0].http().get("/v1/methods/add").json()["versions"],
        json!([1, 2])
    );
    // A delete through one worker, seen by all.
    assert_eq!(ws[1].http().delete("/v1/methods/add").status, 200);
    for w in &ws {
        eventually(Duration::from_secs(1), "delete visible", || {
            w.http().get("/v1/methods/add").status == 404
        });
        assert_eq!(w.http().call("add", add_args(2, 3), 0).code(), "NOT_FOUND");
    }
}

#[test]
fn a_worker_started_later_loads_every_registration() {
    let Some(nats) = Nats::start() else { return };
    let first = worker(&nats, "first", &[]);
    register(&first.http(), "add", "example-add", Some("add"));
    register(&first.http(), "upper", "example-strings", Some("upper"));
    let later = worker(&nats, "later", &[]);
    let listed = later.http().get("/v1/methods").json();
    assert_eq!(listed["methods"].as_array().unwrap().len(), 2, "{listed}");
    let r = later.http().call("add", add_args(20, 22), 0);
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([42])));
}

#[test]
fn workers_on_different_nodes_of_a_three_node_nats_cluster_share_the_store() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let on = |i: usize, name: &str| {
        let url = nats.nodes[i].url();
        TestServer::start(&["--cluster", &url, "--name", name, "--cluster-replicas", "3"])
    };
    // One worker knows every node (it fails over between them); the others one node each.
    let urls = nats.urls();
    let a = TestServer::start(&["--cluster", &urls, "--name", "a", "--cluster-replicas", "3"]);
    let b = on(1, "b");
    let c = on(2, "c");
    register(&a.http(), "add", "example-add", Some("add"));
    for w in [&b, &c] {
        eventually(Duration::from_secs(1), "registration visible", || {
            w.http().get("/v1/methods/add").status == 200
        });
        eventually(Duration::from_secs(5), "all three listed", || {
            names(w).len() == 3
        });
    }
    let r = call_on(&c, "add", "b", add_args(1, 1));
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([2])));
}

#[test]
fn workers_reconnect_after_nats_restarts_and_keep_every_registration() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let a = worker(&nats, "a", &[]);
    let b = worker(&nats, "b", &[]);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(1), "registration visible", || {
        b.http().get("/v1/methods/add").status == 200
    });
    nats.restart();
    // Registered after the restart, through the other worker: both watches picked up again.
    let took = eventually(
        Duration::from_secs(15),
        "a registration after the restart",
        || {
            let r = b.http().put(
                "/v1/methods/upper?export=upper",
                &crate::support::guest("example-strings"),
            );
            r.status == 201
        },
    );
    eprintln!("a registration succeeded {took:?} after NATS restarted");
    eventually(
        Duration::from_secs(2),
        "visible on the other worker",
        || a.http().get("/v1/methods/upper").status == 200,
    );
    eventually(Duration::from_secs(5), "both workers listed again", || {
        names(&a).len() == 2
    });
    let r = call_on(&a, "add", "b", add_args(4, 5));
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([9])));
}

/// How many calls of `method` finished with `code` on `server` (from its `/metrics`).
pub(crate) fn calls_counted(server: &TestServer, method: &str, code: &str) -> u64 {
    let text = String::from_utf8(server.http().get("/metrics").body).unwrap();
    let prefix =
        format!("wasmrpc_calls_total{{tenant=\"default\",method=\"{method}\",code=\"{code}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Three workers on one NATS with `add` (int32) registered; the second and third have seen it.
pub(crate) fn three_with_add(nats: &Nats) -> Vec<TestServer> {
    let ws: Vec<TestServer> = ["w1", "w2", "w3"]
        .iter()
        .map(|n| worker(nats, n, &[]))
        .collect();
    register(&ws[0].http(), "add", "example-add", Some("add"));
    for w in &ws {
        eventually(Duration::from_secs(1), "registration visible", || {
            w.http().get("/v1/methods/add").status == 200
        });
        eventually(Duration::from_secs(5), "all listed", || names(w).len() == 3);
    }
    ws
}

#[test]
fn named_calls_run_on_the_named_worker_through_any_worker() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_with_add(&nats);
    for (i, target) in ["w1", "w2", "w3"].iter().enumerate() {
        for via in &ws {
            let r = call_on(via, "add", target, add_args(i as i32, 10));
            assert_eq!(
                outputs(&r)[0],
                tensor("int32", &[1], json!([10 + i as i32]))
            );
        }
    }
    for w in &ws {
        assert_eq!(
            calls_counted(w, "add", "OK"),
            3,
            "each worker ran its own three"
        );
    }
    // Errors keep their code across the hop: a bad argument, an unknown method, an unknown worker.
    let bad = json!([
        tensor("int32", &[1], json!([1])),
        tensor("float32", &[1], json!([1.5]))
    ]);
    let r = call_on(&ws[0], "add", "w2", bad);
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());
    let r = call_on(&ws[0], "nope", "w2", add_args(1, 2));
    assert_eq!(r.code(), "NOT_FOUND");
    let r = call_on(&ws[0], "add", "w9", add_args(1, 2));
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    assert!(r.message().contains("w9"), "{}", r.message());
}

#[test]
fn any_worker_calls_are_spread_over_every_live_worker() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_with_add(&nats);
    for i in 0..30 {
        let r = call_on(&ws[i % 3], "add", "any", add_args(i as i32, 1));
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([i as i32 + 1])));
    }
    let counts: Vec<u64> = ws.iter().map(|w| calls_counted(w, "add", "OK")).collect();
    assert_eq!(counts.iter().sum::<u64>(), 30);
    assert!(counts.iter().all(|&n| n >= 5), "spread: {counts:?}");
}

#[test]
fn tensors_over_the_nats_max_payload_cross_between_workers() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_with_add(&nats);
    // Two 1.6 MB tensors each way: past NATS's 1 MiB max payload.
    let n = 400_000usize;
    let a: Vec<i32> = (0..n as i32).collect();
    let b: Vec<i32> = vec![7; n];
    let args = json!([
        tensor("int32", &[n as u64], json!(a)),
        tensor("int32", &[n as u64], json!(b))
    ]);
    let r = call_on(&ws[0], "add", "w2", args);
    let out = &outputs(&r)[0];
    assert_eq!(out["shape"], json!([n]));
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), n);
    assert_eq!(data[0], 7);
    assert_eq!(data[n - 1], n as i64 - 1 + 7);
    assert_eq!(calls_counted(&ws[1], "add", "OK"), 1);
}

#[test]
fn a_named_call_to_a_worker_that_dies_is_unavailable_within_its_timeout() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "a", &[]);
    let b = worker(&nats, "b", &[]);
    register(&a.http(), "spin", "guest-hostile", Some("spin"));
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(
        Duration::from_secs(5),
        "b sees spin and both are listed",
        || b.http().get("/v1/methods/spin").status == 200 && names(&a).len() == 2,
    );
    // Killed during the call: a learns it from b's missing heartbeats, long before the timeout.
    let pid = b.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
    });
    let started = Instant::now();
    let r = a.http().post_json(
        "/v1/methods/spin/call?worker=b",
        &json!({ "args": [crate::support::scalar_f32(1.0)], "timeout_ms": 20000 }),
    );
    let took = started.elapsed();
    killer.join().unwrap();
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    eprintln!("a named call whose worker was killed mid-call was UNAVAILABLE after {took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    // Gone before the call: UNAVAILABLE at once.
    let started = Instant::now();
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    assert!(started.elapsed() < Duration::from_secs(1));
    // Back under its name, callable again.
    drop(b);
    let b = worker(&nats, "b", &[]);
    eventually(Duration::from_secs(5), "b listed again", || {
        names(&a).len() == 2
    });
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([3])));
    drop(b);
}

#[test]
fn any_worker_calls_survive_a_worker_killed_among_them() {
    let Some(nats) = Nats::start() else { return };
    let mut ws = three_with_add(&nats);
    let victim = ws.pop().unwrap();
    let (w1, w2) = (ws[0].http(), ws[1].http());
    let pid = victim.pid();
    const THREADS: usize = 8;
    const PER_THREAD: usize = 125;
    let results: Vec<(usize, Result<i64, String>, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let http = if t % 2 == 0 { w1.clone() } else { w2.clone() };
                s.spawn(move || {
                    (0..PER_THREAD)
                        .map(|i| {
                            let n = t * PER_THREAD + i;
                            if n == THREADS * PER_THREAD / 4 {
                                Command::new("kill")
                                    .args(["-9", &pid.to_string()])
                                    .status()
                                    .unwrap();
                            }
                            let started = Instant::now();
                            let r = http.post_json(
                                "/v1/methods/add/call?worker=any",
                                &json!({ "args": add_args(n as i32, 1), "timeout_ms": 10000 }),
                            );
                            let got = if r.status == 200 {
                                Ok(r.json()["outputs"][0]["data"][0].as_i64().unwrap())
                            } else {
                                Err(r.code())
                            };
                            (n, got, started.elapsed())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    drop(victim);
    let delivered = results
        .iter()
        .filter(|(n, got, _)| got.as_ref().is_ok_and(|v| *v == *n as i64 + 1))
        .count();
    let failed: Vec<_> = results.iter().filter(|(_, got, _)| got.is_err()).collect();
    let slowest = results.iter().map(|r| r.2).max().unwrap();
    eprintln!(
        "any-worker calls with a worker killed among them: {delivered} delivered, {} failed, \
         slowest {slowest:?}",
        failed.len()
    );
    assert_eq!(results.len(), THREADS * PER_THREAD, "none lost");
    assert_eq!(delivered, THREADS * PER_THREAD, "failed: {failed:?}");
    assert!(slowest < Duration::from_secs(10), "none hung: {slowest:?}");
}

#[test]
fn a_worker_that_is_stopped_finishes_its_calls_and_leaves() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "a", &[]);
    let mut b = worker(&nats, "b", &[]);
    register(&a.http(), "matmul", "example-matmul", None);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(5), "b sees matmul, both listed", || {
        b.http().get("/v1/methods/matmul").status == 200 && names(&a).len() == 2
    });
    let n = 500u64;
    let m = tensor("float32", &[n, n], json!(vec![0.5f32; (n * n) as usize]));
    let body = json!({ "args": [m.clone(), m], "timeout_ms": 60000 });
    let http = a.http();
    // The first call compiles matmul on b; the second says how long a call takes.
    assert_eq!(
        http.post_json("/v1/methods/matmul/call?worker=b", &body)
            .status,
        200
    );
    let started = Instant::now();
    assert_eq!(
        http.post_json("/v1/methods/matmul/call?worker=b", &body)
            .status,
        200
    );
    let one = started.elapsed();
    let (results, running) = std::thread::scope(|s| {
        let calls: Vec<_> = (0..4)
            .map(|_| s.spawn(|| http.post_json("/v1/methods/matmul/call?worker=b", &body)))
            .collect();
        // Stopped while b runs some of those calls.
        let mut running = 0;
        eventually(Duration::from_secs(30), "b runs a call", || {
            running = b.http().get("/v1/cluster/workers").json()["serving"]
                .as_u64()
                .unwrap();
            running > 0
        });
        b.terminate();
        let results: Vec<_> = calls.into_iter().map(|c| c.join().unwrap()).collect();
        (results, running)
    });
    let ok = results.iter().filter(|r| r.status == 200).count();
    eprintln!(
        "stopping a worker running {running} calls of {one:?} each (of four sent): {ok} finished"
    );
    assert!(ok as u64 >= running, "every call b was running finished");
    for r in results.iter().filter(|r| r.status != 200) {
        // Sent after b began to leave: refused at once.
        assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    }
    // It left the list at once (its entry deleted), not after the TTL; new calls to it are
    // UNAVAILABLE, and calls to any worker go to the one left.
    eventually(Duration::from_secs(1), "b left the list", || {
        names(&a) == ["a"]
    });
    assert_eq!(
        call_on(&a, "add", "b", add_args(1, 1)).code(),
        "UNAVAILABLE"
    );
    let r = call_on(&a, "add", "any", add_args(1, 1));
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([2])));
}

#[test]
fn tenants_stay_apart_across_workers() {
    let Some(nats) = Nats::start() else { return };
    let url = nats.url();
    let a = crate::tenants::Keyed::start(&["--cluster", &url, "--name", "a"]);
    let b = worker(&nats, "b", &[]);
    let (alice, _) = a.tenant("alice");
    let (bob, _) = a.tenant("bob");
    let r = alice.put(
        "/v1/methods/secret?export=add",
        &crate::support::guest("example-add"),
    );
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    eventually(Duration::from_secs(5), "both listed", || {
        names(&b).len() == 2
    });
    let call = |http: &crate::support::Http, worker: &str| {
        http.post_json(
            &format!("/v1/methods/secret/call?worker={worker}"),
            &json!({ "args": add_args(1, 2) }),
        )
    };
    // Alice's method runs on b as alice; bob gets what a missing method gets, on every worker.
    assert_eq!(
        outputs(&call(&alice, "b"))[0],
        tensor("int32", &[1], json!([3]))
    );
    for worker in ["a", "b", "any"] {
        let r = call(&bob, worker);
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.message(), "no method named `secret` is registered");
    }
    // b's own tenant (no keys there) sees none of alice's methods either.
    assert_eq!(b.http().get("/v1/methods/secret").status, 404);
}

#[test]
fn a_worker_stops_promptly_when_nats_is_gone() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let mut a = worker(&nats, "a", &[]);
    nats.kill();
    let took = a.terminate();
    eprintln!("a worker whose NATS was gone stopped in {took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
}

#[test]
fn a_worker_waits_for_nats_to_come_up() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    nats.kill();
    // Started while NATS is down; it joins once NATS listens again.
    let url = nats.url();
    let started =
        std::thread::spawn(move || TestServer::start(&["--cluster", &url, "--name", "patient"]));
    nats.restart();
    let a = started.join().unwrap();
    eventually(Duration::from_secs(1), "it lists itself", || {
        names(&a) == ["patient"]
    });
}

/// Sets its flag when dropped, unwinding included.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Registrations go on while NATS restarts: each is acknowledged (201, as version 1: a write
/// NATS stored as it restarted, and the client sent again, is the same registration, not a
/// version 1 it never asked for and a version 2) or refused as UNAVAILABLE, and every
/// acknowledged one is there afterwards.
#[test]
fn nats_restarted_under_load_loses_nothing_acknowledged() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let a = worker(&nats, "a", &[]);
    let b = worker(&nats, "b", &[]);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(5), "b sees add, both listed", || {
        b.http().get("/v1/methods/add").status == 200 && names(&a).len() == 2
    });
    let component = crate::support::guest("example-add");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (acknowledged, calls) = std::thread::scope(|s| {
        let registrations = s.spawn(|| {
            // The calls stop when the registrations end, even by a failed assertion (the scope
            // would otherwise wait for the calls forever, and the test hang instead of fail).
            let _stop_the_calls = StopOnDrop(&stop);
            let mut acknowledged = Vec::new();
            for i in 0..60 {
                let name = format!("m{i}");
                let r = a
                    .http()
                    .put(&format!("/v1/methods/{name}?export=add"), &component);
                match r.status {
                    201 => {
                        assert_eq!(r.json()["version"], 1, "{name}: {}", r.json());
                        acknowledged.push(name);
                    }
                    _ => assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message()),
                }
            }
            acknowledged
        });
        let calls = s.spawn(|| {
            let mut codes = std::collections::BTreeMap::<String, usize>::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let r = b.http().post_json(
                    "/v1/methods/add/call?worker=a",
                    &json!({ "args": add_args(1, 2), "timeout_ms": 5000 }),
                );
                assert!(started.elapsed() < Duration::from_secs(10), "a call hung");
                let code = if r.status == 200 {
                    "OK".to_owned()
                } else {
                    r.code()
                };
                *codes.entry(code).or_default() += 1;
            }
            codes
        });
        std::thread::sleep(Duration::from_millis(300));
        nats.restart();
        let acknowledged = registrations.join().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (acknowledged, calls.join().unwrap())
    });
    eprintln!(
        "NATS restarted under load: {} of 60 registrations acknowledged; calls by code {calls:?}",
        acknowledged.len()
    );
    for code in calls.keys() {
        assert!(code == "OK" || code == "UNAVAILABLE", "{calls:?}");
    }
    // Every acknowledged registration is on both workers, and callable there.
    for w in [&a, &b] {
        eventually(
            Duration::from_secs(5),
            "every acknowledged registration",
            || {
                acknowledged
                    .iter()
                    .all(|n| w.http().get(&format!("/v1/methods/{n}")).status == 200)
            },
        );
    }
    let last = acknowledged
        .last()
        .expect("some registrations were acknowledged");
    let r = b.http().call(last, add_args(2, 2), 0);
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([4])));
}

#[test]
fn tenants_keys_and_quotas_are_shared_by_every_worker() {
    let Some(nats) = Nats::start() else { return };
    let url = nats.url();
    // Each worker has its own admin key; the tenants are the cluster's.
    let a = crate::tenants::Keyed::start(&["--cluster", &url, "--name", "a"]);
    let b = crate::tenants::Keyed::start(&["--cluster", &url, "--name", "b"]);
    let (_, answer) = a.tenant("alice");
    let key = answer["key"].as_str().unwrap().to_owned();
    let key_id = answer["key_id"].as_str().unwrap().to_owned();
    let on_a = a.server.http().with_key(&key);
    let on_b = b.server.http().with_key(&key);
    let took = eventually(Duration::from_secs(1), "alice's key works on b", || {
        on_b.get("/v1/methods").status == 200
    });
    eprintln!("a tenant created on one worker was usable on another after {took:?}");
    // A quota set through b holds on a.
    let r = b.admin.request(
        "PUT",
        "/v1/tenants/alice/quota",
        Some(json!({ "max_methods": 1 }).to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    eventually(Duration::from_secs(1), "the quota on a", || {
        a.admin.get("/v1/tenants/alice").json()["quota"]["max_methods"] == 1
    });
    let add = crate::support::guest("example-add");
    assert_eq!(on_a.put("/v1/methods/one?export=add", &add).status, 201);
    eventually(Duration::from_secs(1), "b sees alice's method", || {
        on_b.get("/v1/methods/one").status == 200
    });
    let r = on_b.put("/v1/methods/two?export=add", &add);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "{}", r.message());
    // A key revoked through one worker stops working on the other.
    let r = b.admin.delete(&format!("/v1/tenants/alice/keys/{key_id}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    eventually(
        Duration::from_secs(1),
        "the revoked key refused on a",
        || on_a.get("/v1/methods").status == 401,
    );
    // Both admins list the same tenants.
    assert_eq!(
        a.admin.get("/v1/tenants").json(),
        b.admin.get("/v1/tenants").json()
    );
}

/// Workers with keys named `names` on `nats`, and tenant alice (made on the first) with `quota`,
/// once every worker sees that quota: the workers, and alice's key.
fn keyed_with_alice(
    nats: &Nats,
    names: &[&str],
    quota: Value,
) -> (Vec<crate::tenants::Keyed>, String) {
    let url = nats.url();
    let workers: Vec<_> = names
        .iter()
        .map(|name| crate::tenants::Keyed::start(&["--cluster", &url, "--name", name]))
        .collect();
    let (_, answer) = workers[0].tenant("alice");
    let key = answer["key"].as_str().unwrap().to_owned();
    let r = workers[0].admin.request(
        "PUT",
        "/v1/tenants/alice/quota",
        Some(quota.to_string().as_bytes()),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    for w in &workers {
        eventually(
            Duration::from_secs(5),
            "alice's quota on every worker",
            || {
                let seen = &w.admin.get("/v1/tenants/alice").json()["quota"];
                quota
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| seen[k] == *v)
            },
        );
    }
    (workers, key)
}

#[test]
fn a_tenants_call_rate_holds_across_workers() {
    let Some(nats) = Nats::start() else { return };
    let (workers, key) =
        keyed_with_alice(&nats, &["a", "b", "c"], json!({ "calls_per_second": 10 }));
    let on: Vec<_> = workers
        .iter()
        .map(|w| w.server.http().with_key(&key))
        .collect();
    let add = crate::support::guest("example-add");
    assert_eq!(on[0].put("/v1/methods/add?export=add", &add).status, 201);
    for http in &on {
        eventually(Duration::from_secs(5), "the method on every worker", || {
            http.get("/v1/methods/add").status == 200
        });
    }
    // A burst of one second's worth, then 10 a second, across all three workers together: each
    // worker calls its own guest (no `?worker`), so only the shared bucket can hold them to it.
    let started = Instant::now();
    let (mut ok, mut limited) = (0u32, 0u32);
    while started.elapsed() < Duration::from_millis(1500) {
        for http in &on {
            let r = http.post_json("/v1/methods/add/call", &json!({ "args": add_args(1, 2) }));
            match r.status {
                200 => ok += 1,
                429 => {
                    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");
                    assert!(
                        r.message().contains("calls_per_second (10)"),
                        "{}",
                        r.message()
                    );
                    limited += 1;
                }
                other => panic!("{other}: {}", String::from_utf8_lossy(&r.body)),
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!("3 workers, calls_per_second 10: {ok} allowed, {limited} limited in {elapsed:.2} s");
    // Alone, each worker would allow 10 + 10 a second: three times what the tenant may do.
    let most = 10.0 + 10.0 * elapsed + 2.0;
    assert!(
        f64::from(ok) <= most,
        "{ok} calls allowed in {elapsed:.2} s, at most {most:.0}"
    );
    assert!(ok >= 10, "the burst of 10 was allowed ({ok})");
    assert!(limited > 0);
}

/// A worker's module store, opened directly on `nats` (as `wasmrpc serve --cluster` opens it).
pub(crate) async fn open_store(nats: &Nats) -> wasmrpc_host::internals::NatsRegistry {
    let client = async_nats::connect(nats.url()).await.unwrap();
    wasmrpc_host::internals::NatsRegistry::open(
        &async_nats::jetstream::new(client),
        1,
        wasmrpc_host::internals::Trust::new(None),
    )
    .await
    .unwrap()
}

/// A registration of `name` for `tenant` (a method with no inputs or outputs) within `limits`.
pub(crate) fn registration(
    tenant: &wasmrpc_host::internals::TenantId,
    name: &str,
    limits: wasmrpc_host::internals::RegistrationLimits,
) -> wasmrpc_host::internals::NewRegistration {
    wasmrpc_host::internals::NewRegistration {
        tenant: tenant.clone(),
        name: name.to_owned(),
        export: "f".to_owned(),
        signature: wasmrpc_proto::MethodSignature {
            name: "f".to_owned(),
            inputs: vec![],
            outputs: vec![],
            doc: String::new(),
        },
        limits,
    }
}

/// Two workers' stores registering for one tenant at the same instant, past the point where
/// each has checked the quota against its own index: through HTTP the compiles before the check
/// rarely end within the moment that takes, so the stores are driven directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_at_the_same_moment_on_two_workers_cannot_both_pass_a_quota() {
    use wasmrpc_host::internals::{RegistrationLimits, Registry, TenantId};
    let Some(nats) = Nats::start() else { return };
    let (a, b) = (open_store(&nats).await, open_store(&nats).await);
    let tenant = TenantId::new("alice");
    let one_method = RegistrationLimits {
        max_methods: 1,
        max_stored_bytes: 0,
    };
    let new = |name: &str| registration(&tenant, name, one_method);
    for round in 0..20u8 {
        let bytes = std::sync::Arc::new(vec![round; 64]);
        let (one, two) = tokio::join!(
            a.register(new(&format!("a{round}")), bytes.clone()),
            b.register(new(&format!("b{round}")), bytes.clone())
        );
        let (passed, refused) = match (one, two) {
            (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won.name.clone(), lost),
            other => panic!("round {round}: one of the two must pass: {other:?}"),
        };
        assert!(refused.to_string().contains("max_methods (1)"), "{refused}");
        // The winner is all either store lists; it goes before the next round.
        for store in [&a, &b] {
            let started = Instant::now();
            while store.index().list(&tenant).len() != 1 {
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "round {round}: one method in each store"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        a.delete(&tenant, &passed, None).await.unwrap();
        let started = Instant::now();
        while !b.index().list(&tenant).is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "round {round}: the delete reached b"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Blobs no registration uses are swept away (past a grace period, here none); one another
/// tenant still uses stays, and a registration of swept bytes stores them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blobs_no_registration_uses_are_swept_and_used_ones_stay() {
    use wasmrpc_host::internals::{NatsRegistry, RegistrationLimits, Registry, TenantId};
    let Some(nats) = Nats::start() else { return };
    let (a, b) = (open_store(&nats).await, open_store(&nats).await);
    let (alice, bob) = (TenantId::new("alice"), TenantId::new("bob"));
    let new =
        |tenant: &TenantId, name: &str| registration(tenant, name, RegistrationLimits::default());
    let shared = std::sync::Arc::new(vec![1u8; 3000]);
    let own = std::sync::Arc::new(vec![2u8; 3000]);
    let x = a
        .register(new(&alice, "x"), shared.clone())
        .await
        .unwrap()
        .digest;
    a.register(new(&bob, "y"), shared.clone()).await.unwrap();
    let z = a
        .register(new(&alice, "z"), own.clone())
        .await
        .unwrap()
        .digest;
    let caught_up = |store: &NatsRegistry, count: usize| {
        let store = store.clone();
        async move {
            let started = Instant::now();
            while store.index().all().len() != count {
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "the index never held {count}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    caught_up(&b, 3).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        b.sweep_blobs(Duration::ZERO).await.unwrap(),
        0,
        "every blob is used"
    );

    // Alice's `x` goes: bob's `y` still uses the same bytes.
    a.delete(&alice, "x", None).await.unwrap();
    caught_up(&b, 2).await;
    assert_eq!(b.sweep_blobs(Duration::ZERO).await.unwrap(), 0);
    assert_eq!(*a.blob(x).await.unwrap(), *shared);

    // Bob's `y` goes too: the blob is swept, through the other worker.
    a.delete(&bob, "y", None).await.unwrap();
    caught_up(&b, 1).await;
    assert_eq!(b.sweep_blobs(Duration::ZERO).await.unwrap(), 1);
    let gone = a.blob(x).await.unwrap_err();
    assert!(
        gone.to_string().contains("missing") || gone.to_string().contains(&x.to_hex()),
        "{gone}"
    );
    assert_eq!(
        *a.blob(z).await.unwrap(),
        *own,
        "alice's `z` keeps its blob"
    );

    // Within the grace period an unused blob stays; registering swept bytes stores them again.
    a.delete(&alice, "z", None).await.unwrap();
    caught_up(&b, 0).await;
    assert_eq!(b.sweep_blobs(Duration::from_secs(600)).await.unwrap(), 0);
    assert_eq!(*a.blob(z).await.unwrap(), *own);
    b.register(new(&alice, "x"), shared.clone()).await.unwrap();
    assert_eq!(*a.blob(x).await.unwrap(), *shared);

    // One version of a name goes; the other stays, on both workers.
    b.register(new(&alice, "x"), own.clone()).await.unwrap();
    caught_up(&a, 2).await;
    let removed = a.delete(&alice, "x", Some(1)).await.unwrap();
    assert_eq!(removed.iter().map(|r| r.version).collect::<Vec<_>>(), [1]);
    caught_up(&b, 1).await;
    assert_eq!(b.versions(&alice, "x"), [2]);
    assert_eq!(*b.blob(z).await.unwrap(), *own, "version 2 keeps its bytes");
}

#[test]
fn workers_join_a_nats_that_requires_a_password_and_wrong_ones_are_refused_at_once() {
    let Some(nats) = Nats::start_with(&["--user", "wasmrpc", "--pass", "s3cret-pass"]) else {
        return;
    };
    let url = |userinfo: &str| format!("nats://{userinfo}@127.0.0.1:{}", nats.port);
    // The password goes in the URL (WASMRPC_CLUSTER keeps it off the command line).
    let worker = TestServer::start(&["--cluster", &url("wasmrpc:s3cret-pass"), "--name", "w0"]);
    assert_eq!(names(&worker), ["w0"]);

    let started = Instant::now();
    let stderr = serve_refused(&url("wasmrpc:wrong-pass"), "w1");
    assert!(
        stderr.contains("NATS refused this worker's credentials"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wrong-pass"),
        "the password is never shown: {stderr}"
    );
    assert!(stderr.contains("nats://***@127.0.0.1"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused at once, not after the wait for NATS: {:?}",
        started.elapsed()
    );
}

/// A tenant limited to one running call runs one on all workers together: a call on a second
/// worker waits for the first worker's to end; a killed worker's slot comes back.
#[test]
fn a_tenants_concurrency_quota_holds_across_workers() {
    let Some(nats) = Nats::start() else { return };
    let (workers, key) = keyed_with_alice(&nats, &["a", "b"], json!({ "max_concurrent_calls": 1 }));
    let (a, b) = (&workers[0], &workers[1]);
    let (on_a, on_b) = (
        a.server.http().with_key(&key),
        b.server.http().with_key(&key),
    );
    let hostile = crate::support::guest("guest-hostile");
    assert_eq!(
        on_a.put("/v1/methods/spin?export=spin", &hostile).status,
        201
    );
    assert_eq!(
        on_a.put(
            "/v1/methods/add?export=add",
            &crate::support::guest("example-add")
        )
        .status,
        201
    );
    eventually(Duration::from_secs(5), "the methods on b", || {
        on_b.get("/v1/methods/add").status == 200
    });
    let spin = json!([crate::support::scalar_f32(0.0)]);
    std::thread::scope(|s| {
        // a runs alice's one call (a guest that spins until its 1.5 s deadline)...
        let spinning = s.spawn(|| {
            let started = Instant::now();
            let r = on_a.call("spin", spin.clone(), 1500);
            (r.code(), started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        // ...so b's call waits for that slot, then runs.
        let started = Instant::now();
        let r = on_b.call("add", add_args(2, 3), 10_000);
        let waited = started.elapsed();
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([5])));
        let (code, spun) = spinning.join().unwrap();
        assert_eq!(code, "DEADLINE_EXCEEDED");
        eprintln!("the call on b waited {waited:?} for a's call, which ran {spun:?}");
        assert!(
            waited >= Duration::from_millis(900),
            "b ran alice's second call after {waited:?}, while a ran her first"
        );
    });
    // A call that cannot wait that long is refused when its deadline passes.
    std::thread::scope(|s| {
        s.spawn(|| on_a.call("spin", spin.clone(), 1500));
        std::thread::sleep(Duration::from_millis(300));
        let r = on_b.call("add", add_args(2, 3), 200);
        assert_eq!(r.code(), "DEADLINE_EXCEEDED", "{}", r.message());
    });
    // A worker killed while it holds the slot: the slot comes back once it leaves the list.
    let spinner = std::thread::spawn({
        // Sent by hand: the answer never comes (the worker dies), which the helper treats as a
        // failure.
        let (address, key) = (
            a.server.url.trim_start_matches("http://").to_owned(),
            key.clone(),
        );
        move || {
            use std::io::{Read as _, Write as _};
            let body = json!({ "args": [crate::support::scalar_f32(0.0)], "timeout_ms": 60_000 })
                .to_string();
            let mut stream = std::net::TcpStream::connect(&address).unwrap();
            let _ = write!(
                stream,
                "POST /v1/methods/spin/call HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.read_to_end(&mut Vec::new());
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    std::process::Command::new("kill")
        .args(["-9", &a.server.pid().to_string()])
        .status()
        .unwrap();
    let r = on_b.call("add", add_args(1, 1), 20_000);
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([2])));
    eprintln!(
        "a dead worker's slot came back after {:?}",
        started.elapsed()
    );
    let _ = spinner.join();
}

/// The v2 infer route takes `?worker=` too (the SDKs' binary tensors go that way): a named call
/// runs on that worker, an unknown worker is UNAVAILABLE in the protocol's error shape.
#[test]
fn v2_infer_runs_on_the_named_worker_through_any_worker() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_with_add(&nats);
    let infer = |via: &TestServer, worker: &str, a: i32| {
        via.http().post_json(
            &format!("/v2/models/add/infer?worker={worker}"),
            &json!({ "inputs": [
                { "name": "a", "datatype": "INT32", "shape": [1], "data": [a] },
                { "name": "b", "datatype": "INT32", "shape": [1], "data": [10] }
            ] }),
        )
    };
    for (i, target) in ["w1", "w2", "w3"].iter().enumerate() {
        let r = infer(&ws[0], target, i as i32);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["outputs"][0]["data"], json!([10 + i as i32]));
    }
    for w in &ws {
        assert_eq!(calls_counted(w, "add", "OK"), 1, "each worker ran its own");
    }
    let r = infer(&ws[1], "w9", 1);
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.json()["error"].as_str().unwrap().contains("w9"),
        "{:?}",
        r.json()
    );
    // Outside a cluster the parameter is refused, saying so.
    let lone = TestServer::start(&[]);
    register(&lone.http(), "add", "example-add", Some("add"));
    let r = infer(&lone, "any", 1);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
}

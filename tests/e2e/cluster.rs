//! The cluster on a real nats-server: workers are the real binary (`serve --cluster`), joined
//! through NATS started by `support::nats` on a free loopback port. Membership, the shared module
//! store, and calls between workers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::nats::{Nats, NatsCluster};
use crate::support::{TestServer, outputs, register, tensor};

/// A worker named `name` in the cluster of `nats`.
fn worker(nats: &Nats, name: &str, extra: &[&str]) -> TestServer {
    let url = nats.url();
    let mut args = vec!["--cluster", url.as_str(), "--name", name];
    args.extend_from_slice(extra);
    TestServer::start(&args)
}

/// Poll `check` every 20 ms until it holds; panics with `what` after `within`. Returns how long
/// it took. (Nothing signals these conditions over HTTP; the polls are the observation.)
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    loop {
        if check() {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn names(server: &TestServer) -> Vec<String> {
    let r = server.http().get("/v1/cluster/workers");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect()
}

fn add_args(a: i32, b: i32) -> Value {
    json!([
        tensor("int32", &[1], json!([a])),
        tensor("int32", &[1], json!([b]))
    ])
}

fn call_on(
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

#[test]
fn a_taken_name_is_refused_at_start_saying_so() {
    let Some(nats) = Nats::start() else { return };
    let _first = worker(&nats, "same", &[]);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--cluster", &nats.url(), "--name", "same"])
        .env("WASMRPC_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the worker name `same` is taken by a live worker"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "it never said it was listening");
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

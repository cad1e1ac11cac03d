//! The cluster under chaos: a worker killed with `kill -9` and replaced under its name while calls
//! are in flight to it, NATS killed, restarted and frozen under writes. Each test holds a promise
//! of docs/cluster.md ("Failure handling") that a chaos run against a release build once found
//! broken.

use std::process::Command;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{add_args, call_on, calls_counted, eventually, names, worker};
use crate::support::http::{Http, Response};
use crate::support::nats::Nats;
use crate::support::{TestServer, outputs, register, scalar_f32, tensor};

/// The deadline of the calls caught by a worker's death. A call left hanging answers only after
/// this plus the 30 s grace for a first compile.
const TIMEOUT_MS: u64 = 20_000;

/// How long after the kill every call caught by it must have its answer: the dead worker's
/// heartbeats are missed within about 3 s, and a call waits 1 s more for an answer on its way.
/// Generous for a busy machine, and well under both the calls' timeout and the hang.
const ANSWERED_WITHIN: Duration = Duration::from_secs(14);

/// How the calls caught by the kill were addressed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sent {
    /// `?worker=w2`: the spinning call holding w2's only slot, or an `add` queued behind it.
    Named,
    /// `?worker=any`: an `add` that w1 or w3 sent on to w2, queued there.
    Any,
}

/// The calls running or queued on worker `w2` for other workers (`serving`).
fn serving(server: &TestServer) -> u64 {
    server.http().get("/v1/cluster/workers").json()["serving"]
        .as_u64()
        .unwrap()
}

/// `w2` taking one call at a time (`--max-concurrent-calls 1`): a spinning call holds its slot,
/// and calls sent to it after wait in its queue, in flight for as long as it lives.
fn slow_w2(nats: &Nats) -> TestServer {
    worker(nats, "w2", &["--max-concurrent-calls", "1"])
}

/// Send `body` to `path` through `via` on a thread of its own; its answer comes on `answers`,
/// tagged with how it was sent and the value it should have (for `add`). A call still waiting
/// when the test ends (failed) loses its connection and sends nothing.
fn send(
    via: &Http,
    path: String,
    body: serde_json::Value,
    tag: (Sent, i64),
    answers: &mpsc::Sender<((Sent, i64), Response)>,
) {
    let (via, answers) = (via.clone(), answers.clone());
    std::thread::spawn(move || {
        if let Ok(r) = via.try_request("POST", &path, Some(body.to_string().as_bytes())) {
            let _ = answers.send((tag, r));
        }
    });
}

/// The test's own view of worker `w2`'s entry in the workers bucket (a NATS client of its own):
/// when each of its heartbeats arrived, and which process wrote it.
struct Entry {
    runtime: tokio::runtime::Runtime,
    js: async_nats::jetstream::Context,
    /// (instance, when it arrived), in order.
    puts: Arc<Mutex<Vec<(String, Instant)>>>,
}

impl Entry {
    fn watch(nats: &Nats) -> Entry {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let puts = Arc::new(Mutex::new(Vec::new()));
        let js = runtime.block_on(async {
            let client = async_nats::connect(nats.url()).await.unwrap();
            async_nats::jetstream::new(client)
        });
        let kv = runtime
            .block_on(js.get_key_value("wasmrpc_workers"))
            .unwrap();
        let mut watch = runtime.block_on(kv.watch("w2")).unwrap();
        let seen = puts.clone();
        runtime.spawn(async move {
            use futures_util::StreamExt as _;
            while let Some(Ok(entry)) = watch.next().await {
                if entry.operation == async_nats::jetstream::kv::Operation::Put {
                    // Past its seal when the workers have a cluster secret.
                    let value = match entry.value.strip_prefix(b"wasmrpc-sig1 ") {
                        Some(rest) => &rest[rest.iter().position(|&b| b == b'\n').unwrap() + 1..],
                        None => &entry.value[..],
                    };
                    let info: Value = serde_json::from_slice(value).unwrap();
                    let instance = info["instance"].as_str().unwrap().to_owned();
                    seen.lock().unwrap().push((instance, Instant::now()));
                }
            }
        });
        Entry { runtime, js, puts }
    }

    /// Wait for the next heartbeat of `instance`; when it arrived.
    fn next_beat(&self, instance: &str) -> Instant {
        let after = Instant::now();
        let mut at = None;
        eventually(Duration::from_secs(5), "a heartbeat of w2", || {
            at = self.first_after(after, |i| i == instance);
            at.is_some()
        });
        at.unwrap()
    }

    /// When an entry of another process than `instance` first arrived after `after`.
    fn taken(&self, after: Instant, instance: &str) -> Option<Instant> {
        self.first_after(after, |i| i != instance)
    }

    fn first_after(&self, after: Instant, which: impl Fn(&str) -> bool) -> Option<Instant> {
        let puts = self.puts.lock().unwrap();
        puts.iter()
            .find(|(i, at)| *at > after && which(i))
            .map(|(_, at)| *at)
    }

    /// Free the name in NATS at once, as the bucket's max age does when it drops the entry, and
    /// without a word to the workers' watches (dropping an expired entry sends none either): to
    /// them `w2` stays alive until its last heartbeat is 3 s old.
    fn free_the_name(&self) {
        self.runtime.block_on(async {
            let stream = self.js.get_stream("KV_wasmrpc_workers").await.unwrap();
            stream
                .purge()
                .filter("$KV.wasmrpc_workers.w2")
                .await
                .unwrap();
        });
    }
}

/// Calls in flight to a worker that is killed with `kill -9` and replaced by a new process
/// under its name that takes the name while the dead one still looks alive: each is answered
/// in a few seconds, the named ones UNAVAILABLE, the any-worker ones run on a live worker.
///
/// NATS frees the name when it drops the dead worker's entry, and the workers' views drop it
/// when its last heartbeat is 3 s old by their own count, a moment apart (more under load): a
/// successor waiting for the name (as a restarted worker does) can take it in between. Here
/// the test frees the name the moment the worker dies, so that the successor, started at the
/// same moment, takes it within a second or two, before any view has dropped the dead worker.
/// Before issue 31's fix, every call in flight to it then took the successor for the worker it
/// was sent to and waited for its timeout plus 30 s, then was DEADLINE_EXCEEDED, any-worker
/// calls included. Two rounds (the successor is the second round's victim).
#[test]
fn a_call_in_flight_to_a_killed_worker_is_answered_when_a_successor_takes_its_name() {
    let Some(nats) = Nats::start() else { return };
    let w1 = worker(&nats, "w1", &[]);
    let mut w2 = slow_w2(&nats);
    let w3 = worker(&nats, "w3", &[]);
    register(&w1.http(), "add", "example-add", Some("add"));
    register(&w1.http(), "spin", "guest-hostile", Some("spin"));
    let entry = Entry::watch(&nats);
    let (via1, via3) = (w1.http(), w3.http());
    for round in 0..2 {
        for w in [&w1, &w2, &w3] {
            eventually(
                Duration::from_secs(10),
                "all three listed, spin on w2",
                || names(w) == ["w1", "w2", "w3"] && w.http().get("/v1/methods/spin").status == 200,
            );
        }
        // Compiled on w2 before the calls that count (a first compile has 30 s more).
        let r = call_on(&w1, "add", "w2", add_args(1, 1));
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([2])));
        let r = via1.post_json(
            "/v1/methods/spin/call?worker=w2",
            &json!({ "args": [scalar_f32(1.0)], "timeout_ms": 10 }),
        );
        assert_eq!(r.code(), "DEADLINE_EXCEEDED", "{}", r.message());

        let (answers, answered) = mpsc::channel();
        let spin = json!({ "args": [scalar_f32(1.0)], "timeout_ms": TIMEOUT_MS });
        send(
            &via1,
            "/v1/methods/spin/call?worker=w2".into(),
            spin,
            (Sent::Named, 0),
            &answers,
        );
        eventually(Duration::from_secs(10), "w2 spins", || serving(&w2) == 1);
        let mut sent = vec![Sent::Named];
        for i in 0..20i32 {
            let (kind, target) = if i % 5 < 2 {
                (Sent::Named, "w2")
            } else {
                (Sent::Any, "any")
            };
            let via = if i % 2 == 0 { &via1 } else { &via3 };
            let body = json!({ "args": add_args(i, 1000), "timeout_ms": TIMEOUT_MS });
            let path = format!("/v1/methods/add/call?worker={target}");
            send(via, path, body, (kind, i64::from(i) + 1000), &answers);
            sent.push(kind);
            // Apart, so that the calls' liveness checks do not all fall at the same moments.
            std::thread::sleep(Duration::from_millis(23));
        }
        // Every call either answered (an any-worker call run on w1 or w3) or held by w2.
        let mut results = Vec::new();
        eventually(
            Duration::from_secs(20),
            "each call answered or on w2",
            || {
                results.extend(answered.try_iter());
                serving(&w2) as usize + results.len() == sent.len()
            },
        );
        for ((kind, want), r) in &results {
            assert_eq!(*kind, Sent::Any, "only any-worker calls ran elsewhere");
            assert_eq!(outputs(r)[0]["data"], json!([want]));
        }
        let any_on_w2 = sent.iter().filter(|k| **k == Sent::Any).count() - results.len();
        assert!(any_on_w2 > 0, "some any-worker calls went to w2");
        let caught = sent.len() - results.len();

        // Killed just after a heartbeat (it looks alive 3 s more), its name freed, and a new w2
        // started at once.
        let instance = w2.http().get("/v1/cluster/workers").json()["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "w2")
            .unwrap()["instance"]
            .as_str()
            .unwrap()
            .to_owned();
        let beat = entry.next_beat(&instance);
        let pid = w2.pid().to_string();
        assert!(
            Command::new("kill")
                .args(["-9", &pid])
                .status()
                .unwrap()
                .success()
        );
        let killed = Instant::now();
        entry.free_the_name();
        let url = nats.url();
        let successor = std::thread::spawn(move || {
            let args = [
                "--cluster",
                &url,
                "--name",
                "w2",
                "--max-concurrent-calls",
                "1",
            ];
            TestServer::start(&args)
        });
        let mut late = Vec::new();
        while late.len() < caught {
            let left = ANSWERED_WITHIN.saturating_sub(killed.elapsed());
            match answered.recv_timeout(left) {
                Ok(((kind, want), r)) => late.push((kind, want, r, killed.elapsed())),
                Err(_) => panic!(
                    "round {round}: {} of the {caught} calls in flight to the killed worker had \
                     no answer {ANSWERED_WITHIN:?} after its kill",
                    caught - late.len()
                ),
            }
        }
        drop(std::mem::replace(&mut w2, successor.join().unwrap()));
        let taken = entry
            .taken(beat, &instance)
            .expect("the successor's heartbeat was seen");
        let slowest = late.iter().map(|l| l.3).max().unwrap();
        eprintln!(
            "round {round}: {caught} calls in flight to w2 when it was killed ({any_on_w2} \
             any-worker), all answered within {slowest:?}; its successor took the name {:?} \
             after the dead one's last heartbeat",
            taken - beat
        );
        // Otherwise the round tried nothing: the views had dropped the dead worker first.
        assert!(
            taken - beat < Duration::from_millis(2500),
            "round {round}: the successor took {:?} to take the name",
            taken - beat
        );
        for (kind, want, r, after) in &late {
            match kind {
                Sent::Named => assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message()),
                Sent::Any => {
                    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                    assert_eq!(outputs(r)[0]["data"], json!([want]), "after {after:?}");
                }
            }
        }
    }
    // The any-worker calls caught by the kills ran on the live workers, once each at least.
    assert!(calls_counted(&w1, "add", "OK") + calls_counted(&w3, "add", "OK") >= 24);
}

/// Workers `a` and `b` on `nats`, `add` registered on `a` and seen by `b`, each listing both.
fn two_workers_with_add(nats: &Nats) -> (TestServer, TestServer) {
    let a = worker(nats, "a", &[]);
    let b = worker(nats, "b", &[]);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(5), "b sees add, both listed", || {
        b.http().get("/v1/methods/add").status == 200 && names(&a).len() == 2
    });
    (a, b)
}

/// NATS killed: a worker counts itself whatever NATS says, so after the other workers' entries
/// have aged out it still lists itself and runs `?worker=any` calls (here, at once), while a
/// named call to another worker is UNAVAILABLE. Before issue 31's fix, once the outage passed 3 s
/// every worker's list was empty, itself included, and any-worker calls were UNAVAILABLE ("no
/// live worker is left").
#[test]
fn a_worker_cut_off_from_nats_still_lists_itself_and_runs_any_worker_calls() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let (a, b) = two_workers_with_add(&nats);
    // Each has loaded the component (without NATS it could not).
    for w in [&a, &b] {
        let r = w.http().call("add", add_args(1, 1), 0);
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([2])));
    }
    nats.kill();
    // Past the TTL each has only itself left.
    let took = eventually(Duration::from_secs(10), "each lists itself alone", || {
        names(&a) == ["a"] && names(&b) == ["b"]
    });
    eprintln!("cut off from NATS, each worker listed itself alone after {took:?}");
    assert_eq!(a.http().get("/v1/cluster/workers").json()["this"], "a");
    for (i, w) in [&a, &b].into_iter().enumerate() {
        let before = calls_counted(w, "add", "OK");
        let started = Instant::now();
        let r = call_on(w, "add", "any", add_args(i as i32, 40));
        assert_eq!(
            outputs(&r)[0],
            tensor("int32", &[1], json!([40 + i as i32]))
        );
        // At once, not after trying another worker through a NATS that is gone (a bound that
        // holds on a busy machine; the old road answered UNAVAILABLE, not late).
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            calls_counted(w, "add", "OK"),
            before + 1,
            "run where it arrived"
        );
    }
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    // NATS back: both see each other again, and calls cross between them.
    nats.restart();
    for w in [&a, &b] {
        eventually(Duration::from_secs(15), "both listed again", || {
            names(w) == ["a", "b"]
        });
    }
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([3])));
}

/// Writes while NATS is down are refused at once, saying nothing was changed, and stay undone
/// when NATS returns. Before issue 31's fix, a DELETE answered 503 "try again" after 5 s, and the
/// NATS client, which had kept the write, sent it when it reconnected: the method vanished from
/// every worker afterwards.
#[test]
fn a_write_refused_while_nats_is_down_is_never_applied_later() {
    let Some(mut nats) = Nats::start() else {
        return;
    };
    let (a, b) = two_workers_with_add(&nats);
    nats.kill();
    // The workers' connections see the socket close at once; this is ample on a busy machine.
    std::thread::sleep(Duration::from_secs(1));
    let refused = |r: &Response, started: Instant| {
        assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.code(), "UNAVAILABLE");
        assert!(
            r.message().contains("nothing was changed"),
            "{}",
            r.message()
        );
        // At once: NATS's own timeout is 5 s (a PUT compiles the component first).
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "refused at once, not after NATS's timeout: {:?}",
            started.elapsed()
        );
    };
    let started = Instant::now();
    refused(&a.http().delete("/v1/methods/add"), started);
    let started = Instant::now();
    let component = crate::support::guest("example-add");
    refused(
        &b.http().put("/v1/methods/later?export=add", &component),
        started,
    );
    // Still there and callable where it was refused.
    let r = a.http().call("add", add_args(2, 3), 0);
    assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([5])));

    nats.restart();
    // A registration through each worker, once seen by the other, went out after anything the
    // worker's NATS client had kept from the outage (one connection keeps its order).
    let registered = |via: &TestServer, other: &TestServer, name: &str| {
        let path = format!("/v1/methods/{name}?export=add");
        // 200 too: a try NATS did not confirm as it came back may have been applied after all.
        eventually(
            Duration::from_secs(15),
            "a registration after the outage",
            || matches!(via.http().put(&path, &component).status, 200 | 201),
        );
        eventually(Duration::from_secs(5), "seen by the other worker", || {
            other.http().get(&format!("/v1/methods/{name}")).status == 200
        });
    };
    registered(&a, &b, "after_a");
    registered(&b, &a, "after_b");
    for w in [&a, &b] {
        assert_eq!(
            w.http().get("/v1/methods/add").status,
            200,
            "the refused delete"
        );
        assert_eq!(
            w.http().get("/v1/methods/later").status,
            404,
            "the refused put"
        );
        let r = w.http().call("add", add_args(2, 2), 0);
        assert_eq!(outputs(&r)[0], tensor("int32", &[1], json!([4])));
    }
}

/// A write NATS receives but does not confirm in time (here NATS is frozen with SIGSTOP) is
/// answered UNAVAILABLE saying it may or may not have been applied, and it may indeed be
/// applied once NATS goes on: the client must look before trying again. Before issue 31's fix, the
/// answer said only "try again".
#[test]
fn a_write_nats_did_not_confirm_is_said_to_be_maybe_applied() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "a", &[]);
    register(&a.http(), "add", "example-add", Some("add"));
    nats.pause();
    let r = a.http().delete("/v1/methods/add");
    nats.resume();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "UNAVAILABLE");
    assert!(
        r.message().contains("may or may not have been applied"),
        "{}",
        r.message()
    );
    assert!(
        r.message().contains("look before trying again"),
        "{}",
        r.message()
    );
    // NATS had the write: it is applied once NATS goes on.
    eventually(
        Duration::from_secs(10),
        "the delete applied after all",
        || a.http().get("/v1/methods/add").status == 404,
    );
}

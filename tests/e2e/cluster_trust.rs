//! Trust between workers (docs/cluster.md, "Trust"): a client that reaches NATS without the
//! cluster's secret forges a call, a reply, a worker and a registration; each is refused or
//! ignored, nothing runs, and the workers keep serving. A worker with another secret neither
//! sees nor is seen by the others.

use std::time::Duration;

use async_nats::HeaderMap;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::cluster::{add_args, call_on, calls_counted, eventually, names};
use crate::support::nats::Nats;
use crate::support::{TestServer, outputs, register, tensor};

const SECRET: &str = "a-test-cluster-secret-of-32-bytes";

/// A file holding `secret`, for `--cluster-secret-file`.
fn secret_file(secret: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{secret}\n")).unwrap();
    file
}

/// A worker named `name` with the secret in `file`.
fn keyed_worker(nats: &Nats, name: &str, file: &tempfile::NamedTempFile) -> TestServer {
    let url = nats.url();
    let path = file.path().to_str().unwrap();
    TestServer::start(&[
        "--cluster",
        &url,
        "--name",
        name,
        "--cluster-secret-file",
        path,
    ])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The key of `name` version `version` of `tenant` in the registrations bucket.
fn registration_key(tenant: &str, name: &str, version: u32) -> String {
    format!("{}.{}.{version}", hex::encode(tenant), hex::encode(name))
}

/// An entry's value without its seal (`wasmrpc-sig1 ... \n`), if it has one.
fn unsealed(value: &[u8]) -> &[u8] {
    match value.strip_prefix(b"wasmrpc-sig1 ") {
        Some(rest) => &rest[rest.iter().position(|&b| b == b'\n').unwrap() + 1..],
        None => value,
    }
}

#[test]
fn messages_and_entries_forged_on_nats_without_the_secret_are_refused_and_nothing_runs() {
    let Some(nats) = Nats::start() else { return };
    let secret = secret_file(SECRET);
    let a = keyed_worker(&nats, "a", &secret);
    let b = keyed_worker(&nats, "b", &secret);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(5), "both listed, add on b", || {
        names(&a).len() == 2 && b.http().get("/v1/methods/add").status == 200
    });
    let rt = runtime();
    let intruder = rt.block_on(async_nats::connect(nats.url())).unwrap();

    // A forged reply: the intruder listens on b's subject and answers every call at once with
    // the call's own arguments as "outputs". The caller waits for b's signed answer instead.
    let (captured_tx, captured_rx) = std::sync::mpsc::channel::<async_nats::Message>();
    let mut listening = rt.block_on(intruder.subscribe("wasmrpc.call.b")).unwrap();
    // Once NATS answers a ping, it has the subscription.
    rt.block_on(intruder.flush()).unwrap();
    let answering = {
        let intruder = intruder.clone();
        rt.spawn(async move {
            while let Some(msg) = listening.next().await {
                if let Some(reply) = msg.reply.clone() {
                    let mut h = HeaderMap::new();
                    h.insert("Wasmrpc-Code", "OK");
                    h.insert("Wasmrpc-Worker", "b");
                    let _ = intruder
                        .publish_with_headers(reply, h, msg.payload.clone())
                        .await;
                    let _ = intruder.flush().await;
                }
                let _ = captured_tx.send(msg);
            }
        })
    };
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(r.status, 200, "{}", r.message());
    assert_eq!(
        outputs(&r),
        [tensor("int32", &[1], json!([3]))],
        "b's answer, not the intruder's"
    );
    let genuine = captured_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the intruder saw the call");
    answering.abort();

    // Forged calls on b's subject: the genuine call's headers without its signature (a client
    // without the secret), with its signature but another tenant, and the genuine call itself
    // sent again. All are refused, and b runs nothing (its count of add's calls stays).
    let ran_before = calls_counted(&b, "add", "OK");
    let headers = genuine.headers.clone().unwrap();
    let mut unsigned = HeaderMap::new();
    for name in [
        "Wasmrpc-Tenant",
        "Wasmrpc-Method",
        "Wasmrpc-Version",
        "Wasmrpc-Timeout-Ms",
        "Wasmrpc-Limits",
    ] {
        let value = headers.get(name).expect(name).as_str().to_owned();
        unsigned.insert(name, value.as_str());
    }
    let mut other_tenant = headers.clone();
    other_tenant.insert("Wasmrpc-Tenant", "mallory");
    for (what, forged) in [
        ("unsigned", unsigned),
        ("another tenant", other_tenant),
        ("replayed", headers.clone()),
    ] {
        let reply = rt
            .block_on(intruder.request_with_headers(
                "wasmrpc.call.b",
                forged,
                genuine.payload.clone(),
            ))
            .unwrap_or_else(|e| panic!("{what}: no refusal: {e}"));
        let code = reply
            .headers
            .as_ref()
            .and_then(|h| h.get("Wasmrpc-Code"))
            .map(|v| v.as_str().to_owned());
        assert_eq!(code.as_deref(), Some("UNAUTHENTICATED"), "{what}");
        assert!(reply.payload.is_empty(), "{what}: no outputs");
    }
    assert_eq!(
        calls_counted(&b, "add", "OK"),
        ran_before,
        "no forged call ran on b"
    );

    // A fake worker and a fake registration, written straight into the buckets.
    rt.block_on(async {
        let js = async_nats::jetstream::new(intruder.clone());
        let workers = js.get_key_value("wasmrpc_workers").await.unwrap();
        let ghost = json!({"name": "ghost", "rank": 9, "ip": "127.0.0.1", "port": 1,
                           "joined_ms": 0, "instance": "00", "draining": false});
        workers
            .put("ghost", serde_json::to_vec(&ghost).unwrap().into())
            .await
            .unwrap();
        let registrations = js.get_key_value("wasmrpc_registrations").await.unwrap();
        let add = registrations
            .get(registration_key("default", "add", 1))
            .await
            .unwrap()
            .expect("add's record");
        let mut record: Value = serde_json::from_slice(unsealed(&add)).unwrap();
        record["name"] = json!("evil");
        registrations
            .put(
                registration_key("default", "evil", 1),
                serde_json::to_vec(&record).unwrap().into(),
            )
            .await
            .unwrap();
    });
    // What the workers write after the forgeries reaches them after the forgeries (one stream
    // per bucket): a third worker joining, and a registration made through a.
    let c = keyed_worker(&nats, "c", &secret);
    register(&a.http(), "later", "example-add", Some("add"));
    for w in [&a, &b] {
        eventually(Duration::from_secs(5), "c listed, later registered", || {
            names(w).contains(&"c".to_owned()) && w.http().get("/v1/methods/later").status == 200
        });
        assert_eq!(names(w), ["a", "b", "c"], "no ghost worker");
        assert_eq!(
            w.http().get("/v1/methods/evil").status,
            404,
            "no evil method"
        );
    }
    assert_eq!(
        call_on(&a, "add", "ghost", add_args(1, 1)).code(),
        "UNAVAILABLE"
    );
    assert_eq!(call_on(&b, "evil", "a", add_args(1, 1)).code(), "NOT_FOUND");

    // The workers keep serving, each other included.
    for (from, to) in [(&a, "b"), (&b, "a"), (&c, "a")] {
        let r = call_on(from, "add", to, add_args(2, 3));
        assert_eq!(outputs(&r), [tensor("int32", &[1], json!([5]))], "to {to}");
    }
}

#[test]
fn a_worker_with_another_secret_can_neither_call_nor_be_called() {
    let Some(nats) = Nats::start() else { return };
    let secret = secret_file(SECRET);
    let a = keyed_worker(&nats, "a", &secret);
    let b = keyed_worker(&nats, "b", &secret);
    // The other secret given through the variable, as the Python SDK's workers may.
    let url = nats.url();
    let stranger = TestServer::start_with_env(
        &["--cluster", &url, "--name", "stranger"],
        &[("WASMRPC_CLUSTER_SECRET", "another-secret-of-at-least-16")],
    );
    register(&a.http(), "add", "example-add", Some("add"));
    register(&stranger.http(), "sub", "example-add", Some("add"));
    eventually(
        Duration::from_secs(5),
        "a and b see each other and add",
        || names(&a) == ["a", "b"] && b.http().get("/v1/methods/add").status == 200,
    );
    // Each side's heartbeats (every second) and registrations are refused by the other side.
    assert_eq!(names(&stranger), ["stranger"]);
    assert_eq!(names(&b), ["a", "b"]);
    assert_eq!(stranger.http().get("/v1/methods/add").status, 404);
    assert_eq!(a.http().get("/v1/methods/sub").status, 404);
    let r = call_on(&a, "add", "stranger", add_args(1, 1));
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    let r = call_on(&stranger, "sub", "a", add_args(1, 1));
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    let r = call_on(&a, "add", "b", add_args(1, 1));
    assert_eq!(outputs(&r), [tensor("int32", &[1], json!([2]))]);
}

/// `wasmrpc serve` in a cluster, expected to refuse to start: its stderr.
fn refused(args: &[&str], vars: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        // The suite may run every worker with a secret; these say which they have.
        .env_remove("WASMRPC_CLUSTER_SECRET")
        .env_remove("WASMRPC_CLUSTER_SECRET_FILE")
        .envs(vars.iter().copied())
        .env("WASMRPC_LOG", "off")
        .output()
        .unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn without_a_secret_a_worker_joins_only_a_nats_on_this_machine_and_the_secret_never_shows() {
    // NATS elsewhere (a TEST-NET address: nothing is connected to) without a secret: refused at
    // once, saying what to give.
    let stderr = refused(&["--cluster", "nats://192.0.2.1:4222", "--name", "w"], &[]);
    assert!(stderr.contains("--cluster-secret-file"), "{stderr}");
    assert!(stderr.contains("not on this machine"), "{stderr}");
    // A secret too short is refused, without showing it.
    let stderr = refused(
        &["--cluster", "nats://127.0.0.1:1", "--name", "w"],
        &[("WASMRPC_CLUSTER_SECRET", "shortsecret")],
    );
    assert!(
        stderr.contains("WASMRPC_CLUSTER_SECRET is too short"),
        "{stderr}"
    );
    assert!(!stderr.contains("shortsecret"), "{stderr}");
    // `--help` shows neither the variable's value nor the file's.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--help"])
        .env("WASMRPC_CLUSTER_SECRET", SECRET)
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--cluster-secret-file"), "{help}");
    assert!(!help.contains(SECRET), "{help}");
}

#[test]
fn a_forged_or_replayed_tenant_directory_is_not_adopted() {
    let Some(nats) = Nats::start() else { return };
    let secret = secret_file(SECRET);
    let (url, path) = (nats.url(), secret.path().to_str().unwrap().to_owned());
    let keyed = |name: &str| {
        crate::tenants::Keyed::start(&[
            "--cluster",
            &url,
            "--name",
            name,
            "--cluster-secret-file",
            &path,
        ])
    };
    let (a, b) = (keyed("a"), keyed("b"));
    let (_, alice) = a.tenant("alice");
    let alice_on_b = b.server.http().with_key(key_of(&alice));
    eventually(Duration::from_secs(5), "alice's key works on b", || {
        alice_on_b.get("/v1/methods").status == 200
    });
    let rt = runtime();
    let intruder = rt.block_on(async_nats::connect(nats.url())).unwrap();
    let directory = || {
        rt.block_on(async {
            let js = async_nats::jetstream::new(intruder.clone());
            let kv = js.get_key_value("wasmrpc_tenants").await.unwrap();
            kv.get("directory").await.unwrap().expect("the directory")
        })
    };
    // The directory with alice only, as the workers sealed it.
    let with_alice = directory();
    let (carol, answer) = a.tenant("carol");
    let carol_on_b = b.server.http().with_key(key_of(&answer));
    eventually(Duration::from_secs(5), "carol's key works on b", || {
        carol_on_b.get("/v1/methods").status == 200
    });
    // The older copy put back as it was (a replay), then its value without a seal (a client
    // without the secret): either, adopted, would drop carol.
    rt.block_on(async {
        let js = async_nats::jetstream::new(intruder.clone());
        let kv = js.get_key_value("wasmrpc_tenants").await.unwrap();
        kv.put("directory", with_alice.clone()).await.unwrap();
        kv.put(
            "directory",
            bytes::Bytes::copy_from_slice(unsealed(&with_alice)),
        )
        .await
        .unwrap();
    });
    // A change through b after the forgeries is made (over them) and reaches a after them. Made
    // at once when b's watch has brought the forgeries already, else ABORTED until it has (a
    // change crossing another's is, and its client is told to try again): tried again here
    // as a client would, so it fails only if b never writes over them.
    let mut dave = None;
    eventually(
        Duration::from_secs(5),
        "b creates dave over the forgeries",
        || {
            let r = b.admin.post_json("/v1/tenants", &json!({ "name": "dave" }));
            let body = String::from_utf8_lossy(&r.body);
            assert!(r.status == 201 || r.status == 409, "{}: {body}", r.status);
            dave = (r.status == 201).then(|| r.json());
            dave.is_some()
        },
    );
    let dave = dave.expect("created");
    let dave_on_a = a.server.http().with_key(key_of(&dave));
    eventually(Duration::from_secs(5), "dave's key works on a", || {
        dave_on_a.get("/v1/methods").status == 200
    });
    for http in [&carol, &carol_on_b] {
        assert_eq!(
            http.get("/v1/methods").status,
            200,
            "carol is still a tenant"
        );
    }
    assert_eq!(
        a.admin.get("/v1/tenants").json(),
        b.admin.get("/v1/tenants").json()
    );
}

/// The key in `Keyed::tenant`'s answer.
fn key_of(answer: &Value) -> &str {
    answer["key"].as_str().expect("a key")
}

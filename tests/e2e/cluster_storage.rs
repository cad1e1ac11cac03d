//! What the cluster stores in NATS, bounded (docs/cluster.md, docs/limits.md): a registration
//! refused for its quota stores no blob, the payload store has a byte cap that refuses a large
//! call clearly, and a large reply whose client went away does not stay in the payload store.

use std::io::Write as _;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::json;
use sha2::Digest as _;

use crate::cluster::{add_args, call_on, eventually, names, open_store, registration, worker};
use crate::support::nats::Nats;
use crate::support::{outputs, register, tensor};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_over_its_quota_stores_no_blob() {
    use wasmrpc_host::internals::{RegistrationLimits, Registry, TenantId};
    let Some(nats) = Nats::start() else { return };
    let store = open_store(&nats).await;
    let limits = RegistrationLimits {
        max_methods: 0,
        max_stored_bytes: 100,
    };
    let bytes = std::sync::Arc::new(vec![7u8; 1000]);
    let refused = store
        .register(
            registration(&TenantId::new("alice"), "big", limits),
            bytes.clone(),
        )
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("max_stored_bytes"),
        "{refused}"
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let blobs = async_nats::jetstream::new(client)
        .get_object_store("wasmrpc_blobs")
        .await
        .unwrap();
    let digest = hex::encode(sha2::Sha256::digest(bytes.as_slice()));
    assert!(
        blobs.info(&digest).await.is_err(),
        "the refused registration's bytes were stored"
    );
}

/// The objects of the payload store not deleted.
async fn payload_objects(nats: &Nats) -> Vec<String> {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let store = async_nats::jetstream::new(client)
        .get_object_store("wasmrpc_payloads")
        .await
        .unwrap();
    let mut listed = store.list().await.unwrap();
    let mut names = Vec::new();
    while let Some(info) = listed.next().await {
        let info = info.unwrap();
        if !info.deleted {
            names.push(info.name);
        }
    }
    names
}

#[test]
fn a_full_payload_store_refuses_a_large_call_saying_so_and_small_ones_still_run() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "a", &["--cluster-payload-store-mib", "1"]);
    let b = worker(&nats, "b", &["--cluster-payload-store-mib", "1"]);
    register(&a.http(), "add", "example-add", Some("add"));
    eventually(Duration::from_secs(5), "b sees add, both listed", || {
        b.http().get("/v1/methods/add").status == 200 && names(&a).len() == 2
    });
    // 3.2 MB of arguments: past NATS's max payload (1 MiB) and past the store's cap.
    let n = 400_000usize;
    let args = json!([
        tensor("int32", &[n as u64], json!(vec![1; n])),
        tensor("int32", &[n as u64], json!(vec![2; n]))
    ]);
    let r = call_on(&a, "add", "b", args);
    assert_eq!(r.code(), "UNAVAILABLE", "{}", r.message());
    assert!(
        r.message().contains("--cluster-payload-store-mib"),
        "{}",
        r.message()
    );
    let r = call_on(&a, "add", "b", add_args(1, 2));
    assert_eq!(outputs(&r), [tensor("int32", &[1], json!([3]))]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let max_bytes = rt.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream("OBJ_wasmrpc_payloads").await.unwrap();
        stream.info().await.unwrap().config.max_bytes
    });
    assert_eq!(max_bytes, 1 << 20);
    assert!(rt.block_on(payload_objects(&nats)).is_empty());
}

#[test]
fn a_large_reply_whose_caller_died_is_deleted_from_the_payload_store() {
    let Some(nats) = Nats::start() else { return };
    let a = worker(&nats, "a", &[]);
    let b = worker(&nats, "b", &[]);
    register(&a.http(), "huge", "guest-hostile", Some("huge_output"));
    eventually(Duration::from_secs(5), "b sees huge, both listed", || {
        b.http().get("/v1/methods/huge").status == 200 && names(&a).len() == 2
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The signal that a has sent the call: the call itself, seen on b's subject.
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let watcher = rt.block_on(async_nats::connect(nats.url())).unwrap();
    let mut calls = rt.block_on(watcher.subscribe("wasmrpc.call.b")).unwrap();
    // Once NATS answers a ping, it has the subscription.
    rt.block_on(watcher.flush()).unwrap();
    rt.spawn(async move {
        if calls.next().await.is_some() {
            let _ = seen_tx.send(());
        }
    });
    // A 2 MiB reply (over NATS's max payload: through the payload store), b compiling the
    // guest first; the worker that sent the call is killed as soon as the call is on its way.
    let body = serde_json::to_vec(&json!({
        "args": [tensor("float32", &[1], json!([2.0]))],
        "timeout_ms": 20000
    }))
    .unwrap();
    let mut s = a.http().connect();
    write!(
        s,
        "POST /v1/methods/huge/call?worker=b HTTP/1.1\r\nHost: localhost\r\nContent-Type: \
         application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body).unwrap();
    seen_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the call reached b's subject");
    let killed = std::process::Command::new("kill")
        .args(["-9", &a.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // b answers (its reply's object written), and the object goes with nobody left to read it.
    eventually(Duration::from_secs(30), "b ran the call", || {
        crate::cluster::calls_counted(&b, "huge", "OK") == 1
    });
    let left = rt.block_on(payload_objects(&nats));
    eprintln!("the payload store once the call ran: {left:?}");
    let gone = eventually(
        Duration::from_secs(20),
        "the payload store holds no object",
        || rt.block_on(payload_objects(&nats)).is_empty(),
    );
    eprintln!("an unread reply's object went {gone:?} after its call ended");
}

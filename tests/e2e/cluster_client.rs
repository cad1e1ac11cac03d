//! The Rust client's cluster APIs against real workers on a real nats-server: Paddle's
//! `init_rpc` / `rpc_sync` / `rpc_async` / `get_*worker_info*` / `shutdown`, and TensorFlow's
//! `ClusterCoordinator::schedule` → `RemoteValue`, with a worker killed among 1,000 scheduled calls.

use std::time::{Duration, Instant};

use wasmrpc_client::cluster::coordinator::ClusterCoordinator;
use wasmrpc_client::cluster::paddle::{NO_TIMEOUT, init_rpc};
use wasmrpc_client::{Client, Code, Tensor};

use crate::support::nats::Nats;
use crate::support::{TestServer, register};

/// Three workers (ranks 0, 1, 2) with `add` registered.
fn three_workers(nats: &Nats) -> Vec<TestServer> {
    let url = nats.url();
    let ws: Vec<TestServer> = (0..3)
        .map(|i| {
            let (name, rank) = (format!("w{i}"), i.to_string());
            TestServer::start(&["--cluster", &url, "--name", &name, "--rank", &rank])
        })
        .collect();
    register(&ws[0].http(), "add", "example-add", Some("add"));
    // Each worker has seen the registration and every member (both arrive within milliseconds).
    let started = Instant::now();
    for w in &ws {
        while w.http().get("/v1/methods/add").status != 200
            || w.http().get("/v1/cluster/workers").json()["workers"]
                .as_array()
                .unwrap()
                .len()
                < 3
        {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the cluster did not form"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    ws
}

fn address(server: &TestServer) -> &str {
    server.url.trim_start_matches("http://")
}

fn scalars(a: i32, b: i32) -> Vec<Tensor> {
    vec![Tensor::scalar(a), Tensor::scalar(b)]
}

fn value(outputs: &[Tensor]) -> i32 {
    outputs[0].to_vec::<i32>().unwrap()[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paddle_rpc_reaches_every_worker_by_name() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_workers(&nats);
    // Blocks until the three workers are members.
    let rpc = init_rpc("trainer", Some(0), Some(3), address(&ws[1]))
        .await
        .unwrap();
    let infos = rpc.get_all_worker_infos().await.unwrap();
    let summary: Vec<(String, u32)> = infos.iter().map(|w| (w.name.clone(), w.rank)).collect();
    assert_eq!(
        summary,
        [("w0".into(), 0), ("w1".into(), 1), ("w2".into(), 2)]
    );
    let w2 = rpc.get_worker_info("w2").await.unwrap();
    assert_eq!(format!("http://{}:{}", w2.ip, w2.port), ws[2].url);
    assert_eq!(
        rpc.get_worker_info("w7").await.unwrap_err().code(),
        Code::NotFound
    );
    // Not a worker itself: the current worker is the one it is connected to, and so is its own
    // name (Paddle's snippet, where `worker0` calls `worker0`).
    assert_eq!(rpc.get_current_worker_info().await.unwrap().name, "w1");
    assert_eq!(rpc.get_worker_info("trainer").await.unwrap().name, "w1");
    let own = rpc
        .rpc_sync("trainer", "add", scalars(2, 3), NO_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(value(&own), 5);
    assert_eq!(
        value(
            &rpc.rpc_async("trainer", "add", scalars(4, 3), 5.0)
                .wait()
                .await
                .unwrap()
        ),
        7
    );
    for (i, to) in ["w0", "w1", "w2"].iter().enumerate() {
        let out = rpc
            .rpc_sync(to, "add", scalars(i as i32, 100), NO_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(value(&out), 100 + i as i32);
    }
    let futures: Vec<_> = (0..30)
        .map(|i| rpc.rpc_async(["w0", "w1", "w2"][i % 3], "add", scalars(i as i32, 1), 5.0))
        .collect();
    for (i, f) in futures.iter().enumerate() {
        assert_eq!(value(&f.wait().await.unwrap()), i as i32 + 1);
    }
    let err = rpc
        .rpc_sync("gone", "add", scalars(1, 1), 2.0)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_calls_resolve_to_their_value_or_cancelled_when_a_worker_is_killed() {
    let Some(nats) = Nats::start() else { return };
    let mut ws = three_workers(&nats);
    let client = Client::create(
        "http",
        address(&ws[0]),
        "coordinator",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    while client.workers().await.unwrap().workers.len() < 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let coordinator = ClusterCoordinator::new(client);
    let victim = ws.pop().unwrap();
    let started = Instant::now();
    let mut values = Vec::new();
    for i in 0..1000 {
        if i == 250 {
            std::process::Command::new("kill")
                .args(["-9", &victim.pid().to_string()])
                .status()
                .unwrap();
        }
        values.push(coordinator.schedule("add", scalars(i, 1)));
        if i % 100 == 99 {
            // Keep a bounded number in flight, as a training loop would.
            coordinator.join().await.unwrap();
        }
    }
    coordinator.join().await.unwrap();
    assert!(coordinator.done());
    let (mut delivered, mut cancelled, mut hung, mut wrong) = (0, 0, 0, 0);
    for (i, v) in values.iter().enumerate() {
        match tokio::time::timeout(Duration::from_secs(30), v.fetch()).await {
            Err(_) => hung += 1,
            Ok(Ok(out)) if value(&out) == i as i32 + 1 => delivered += 1,
            Ok(Ok(_)) => wrong += 1,
            Ok(Err(e)) if e.code() == Code::Cancelled => cancelled += 1,
            Ok(Err(e)) => panic!("scheduled call {i}: {e}"),
        }
    }
    eprintln!(
        "1000 scheduled calls, a worker killed after 250: {delivered} delivered, {cancelled} \
         cancelled, {hung} hung, {wrong} wrong, lost {}, in {:?}",
        1000 - delivered - cancelled - hung - wrong,
        started.elapsed()
    );
    assert_eq!((hung, wrong), (0, 0));
    assert_eq!(delivered + cancelled, 1000, "none lost");
    drop(victim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_server_joins_as_a_worker_and_serves_its_functions() {
    let Some(nats) = Nats::start() else { return };
    let store = tempfile::tempdir().unwrap();
    let server = wasmrpc_host::Server::with_settings(wasmrpc_host::ServeSettings {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        data_dir: Some(store.path().to_path_buf()),
        cluster: Some(nats.url()),
        name: Some("embedded".into()),
        rank: Some(7),
        ..Default::default()
    })
    .await
    .unwrap();
    server
        .register_export("add", crate::support::guest("example-add"), Some("add"))
        .await
        .unwrap();
    server.start().unwrap();
    let other = TestServer::start(&["--cluster", &nats.url(), "--name", "other"]);
    let rpc = init_rpc("embedded", Some(7), Some(2), &server.address().to_string())
        .await
        .unwrap();
    let me = rpc.get_current_worker_info().await.unwrap();
    assert_eq!((me.name.as_str(), me.rank), ("embedded", 7));
    // Registered in the embedded worker, called by name through the other worker's address.
    let through_other = init_rpc("caller", None, None, address(&other))
        .await
        .unwrap();
    let out = through_other
        .rpc_sync("embedded", "add", scalars(20, 22), 10.0)
        .await
        .unwrap();
    assert_eq!(value(&out), 42);
    server.shutdown().await;
    // It left the cluster at once (the others hear of it as soon as NATS tells them).
    let started = Instant::now();
    while through_other.get_all_worker_infos().await.unwrap().len() != 1 {
        assert!(started.elapsed() < Duration::from_secs(1), "still listed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paddle_shutdown_is_a_barrier_across_processes() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_workers(&nats);
    // Three trainers, each through its own worker, as three processes would be.
    let mut trainers = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        let rpc = init_rpc(&format!("trainer{i}"), Some(i as u32), Some(3), address(w))
            .await
            .unwrap();
        trainers.push(rpc);
    }
    let last = trainers.pop().unwrap();
    let early: Vec<_> = trainers
        .into_iter()
        .map(|rpc| {
            tokio::spawn(async move {
                let pending = rpc.rpc_async("w2", "add", scalars(1, 2), NO_TIMEOUT);
                rpc.shutdown().await.unwrap();
                // Its own outstanding call finished before the barrier.
                value(&pending.wait().await.unwrap())
            })
        })
        .collect();
    // Nothing signals that a barrier is still closed: give the early ones time to (wrongly) pass.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        early.iter().all(|t| !t.is_finished()),
        "passed before the third arrived"
    );
    let started = Instant::now();
    last.shutdown().await.unwrap();
    for t in early {
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .unwrap()
                .unwrap(),
            3
        );
    }
    eprintln!(
        "the last of three processes passed the shutdown barrier in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tensorflow_servers_from_a_cluster_spec_join_as_job_and_task() {
    let Some(nats) = Nats::start() else { return };
    let port = || crate::support::nats::free_port();
    let spec = std::collections::BTreeMap::from([
        ("chief".to_owned(), vec![format!("127.0.0.1:{}", port())]),
        (
            "worker".to_owned(),
            vec![
                format!("127.0.0.1:{}", port()),
                format!("127.0.0.1:{}", port()),
            ],
        ),
    ]);
    let mut servers = Vec::new();
    for (job, task) in [("chief", 0), ("worker", 0), ("worker", 1)] {
        let server = wasmrpc_host::Server::from_cluster_spec(&spec, job, task, &nats.url())
            .await
            .unwrap();
        assert_eq!(server.address().to_string(), spec[job][task]);
        server.start().unwrap();
        servers.push(server);
    }
    servers[1]
        .register_export("add", crate::support::guest("example-add"), Some("add"))
        .await
        .unwrap();
    let rpc = init_rpc("chief/0", Some(0), Some(3), &spec["chief"][0])
        .await
        .unwrap();
    let infos = rpc.get_all_worker_infos().await.unwrap();
    let summary: Vec<(&str, u32)> = infos.iter().map(|w| (w.name.as_str(), w.rank)).collect();
    assert_eq!(summary, [("chief/0", 0), ("worker/0", 1), ("worker/1", 2)]);
    let out = rpc
        .rpc_sync("worker/1", "add", scalars(40, 2), 10.0)
        .await
        .unwrap();
    assert_eq!(value(&out), 42);
    let err = wasmrpc_host::Server::from_cluster_spec(&spec, "ps", 0, &nats.url())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    for server in &servers {
        server.shutdown().await;
    }
}

#[test]
fn the_blocking_client_lists_workers_and_calls_any_of_them() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_workers(&nats);
    let client = wasmrpc_client::blocking::Client::create(
        "http",
        address(&ws[2]),
        "blocking",
        Duration::from_secs(10),
    )
    .unwrap();
    let mut listed = client.workers().unwrap();
    while listed.workers.len() < 3 {
        std::thread::sleep(Duration::from_millis(20));
        listed = client.workers().unwrap();
    }
    assert_eq!(listed.this, "w2");
    use wasmrpc_client::cluster::Target;
    let out = client
        .call_worker(
            Target::Worker("w0"),
            "add",
            scalars(1, 2),
            Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(value(&out), 3);
    let out = client
        .call_worker(Target::Any, "add", scalars(3, 4), Duration::from_secs(5))
        .unwrap();
    assert_eq!(value(&out), 7);
    assert_eq!(
        client
            .barrier("alone", "me", 1, Duration::from_secs(5))
            .unwrap(),
        ["me"]
    );
}

/// Run an example binary of `examples/cluster` (built by cargo on the way) with `args`; its stdout.
fn run_example(bin: &str, args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(crate::support::guests::workspace_root())
        .args([
            "run",
            "--quiet",
            "-p",
            "example-cluster",
            "--bin",
            bin,
            "--",
        ])
        .args(args)
        .output()
        .expect("running cargo");
    assert!(
        out.status.success(),
        "{bin}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_paddle_and_tensorflow_examples_run_against_a_three_worker_cluster() {
    let Some(nats) = Nats::start() else { return };
    let ws = three_workers(&nats);
    let master = address(&ws[0]).to_owned();
    let paddle = run_example("paddle-rpc", &["--master", &master, "--world-size", "3"]);
    assert!(paddle.contains("rpc_sync on w0: [5]"), "{paddle}");
    for w in ["w0", "w1", "w2"] {
        assert!(paddle.contains(&format!("rpc_async on {w} ")), "{paddle}");
    }
    let tf = run_example("tf-coordinator", &["--server", &master, "--steps", "100"]);
    assert!(
        tf.contains("100 steps scheduled on any worker; sum of results 5050"),
        "{tf}"
    );
}

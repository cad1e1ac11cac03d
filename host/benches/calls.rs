//! Side-by-side benchmark: wasmrpc's sandboxed calls against native baselines, in one run.
//!
//! `cargo bench -p wasmrpc-host --bench calls` prints, for each pair, the median of several
//! rounds and the ratio. Two pairs:
//!
//! 1. **call in a fresh instance** (`Runtime::call`: new store, instantiate, call `add` on two
//!    1,000-element int32 tensors, check outputs) against the same addition in native Rust;
//! 2. **HTTP end to end** (the real server and the async client over one HTTP/2 connection, 64
//!    calls in flight, JSON on the v1 call route) against a native axum handler doing the same
//!    JSON parsing, addition and serialisation on the same HTTP stack.

#[path = "../../tests/e2e/support/guests.rs"]
#[allow(dead_code)]
mod guests;

#[path = "support/baseline.rs"]
mod baseline;

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmrpc_client::{Client, Encoding, Tensor};
use wasmrpc_host::Server;
use wasmrpc_host::internals::{Runtime, RuntimeConfig, serve_connections};

const ROUNDS: usize = 7;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(name: &str, unit: &str, wasm: f64, native: f64, lower_is_better: bool) {
    let ratio = if lower_is_better {
        wasm / native
    } else {
        native / wasm
    };
    println!(
        "{name:<42} wasmrpc {wasm:>10.2} {unit:<7} native {native:>10.2} {unit:<7} wasmrpc/native cost {ratio:>6.2}x"
    );
}

fn inputs(n: usize) -> (Vec<i32>, Vec<i32>) {
    (
        (0..n as i32).collect(),
        (0..n as i32).map(|x| x * 3).collect(),
    )
}

async fn bench_instance_per_call(
    component: &[u8],
    label: &str,
    config: RuntimeConfig,
    elements: Option<usize>,
) {
    let runtime = Runtime::new(config).expect("engine");
    // The bench is the only caller, so it needs no call slot to ask for the signatures.
    let compiled = runtime
        .compile(Arc::new(component.to_vec()), "bench")
        .await
        .expect("component compiles");
    let module = runtime.describe(compiled).await.expect("component loads");
    // `None` is the scalar case: two 0-d tensors, as TensorFlow's RPC example sends.
    let (a, b) = inputs(elements.unwrap_or(1));
    let args = || match elements {
        Some(_) => vec![Tensor::vector(a.clone()), Tensor::vector(b.clone())],
        None => vec![Tensor::scalar(a[0]), Tensor::scalar(b[0])],
    };
    let calls = 2000;
    let mut wasm_rounds = Vec::new();
    let mut native_rounds = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..calls {
            let out = runtime
                .call(
                    &module,
                    "add",
                    args(),
                    Duration::from_secs(10),
                    Instant::now(),
                    usize::MAX, // the server's own memory limit
                )
                .await
                .expect("call");
            std::hint::black_box(out);
        }
        wasm_rounds.push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);

        let started = Instant::now();
        for _ in 0..calls {
            // The baseline does what the host does around the guest: build tensors, add, wrap.
            let [x, y]: [Tensor; 2] = args().try_into().expect("two args");
            let (x, y) = (x.to_vec::<i32>().unwrap(), y.to_vec::<i32>().unwrap());
            let sum: Vec<i32> = x.iter().zip(&y).map(|(p, q)| p.wrapping_add(*q)).collect();
            std::hint::black_box(Tensor::vector(sum));
        }
        native_rounds.push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    report(
        &format!("call, fresh instance, {label}"),
        "us/call",
        median(wasm_rounds),
        median(native_rounds),
        true,
    );
}

/// Calls per second with `in_flight` concurrent callers, `total` calls.
async fn throughput(client: &Client, total: usize, in_flight: usize) -> f64 {
    let (a, b) = inputs(16);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..in_flight {
        let client = client.clone();
        let (a, b) = (a.clone(), b.clone());
        tasks.push(tokio::spawn(async move {
            for _ in (w..total).step_by(in_flight) {
                let out = client
                    .call_async(
                        "add",
                        vec![Tensor::vector(a.clone()), Tensor::vector(b.clone())],
                        None,
                        None,
                    )
                    .await
                    .expect("call");
                std::hint::black_box(out);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

async fn bench_http(component: &[u8]) {
    let server = Server::create_local_server().await.expect("server");
    server
        .register_export("add", component.to_vec(), Some("add"))
        .await
        .expect("register");
    server.start().expect("start");
    let wasm_url = format!("http://{}", server.address());

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let native_url = format!("http://{}", listener.local_addr().unwrap());
    let app = baseline::router();
    tokio::spawn(serve_connections(
        listener,
        app,
        std::future::pending(),
        Default::default(),
    ));

    // Both sides in JSON over the v1 call route: the native handler speaks only that.
    let json_client = |url: String| async move {
        Client::builder("http", &url)
            .name("bench")
            .timeout(Duration::from_secs(30))
            .encoding(Encoding::Json)
            .connect()
            .await
            .unwrap()
    };
    let wasm = json_client(wasm_url).await;
    let native = json_client(native_url).await;
    let total = 5000;
    let (mut w, mut n) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        w.push(throughput(&wasm, total, 64).await);
        n.push(throughput(&native, total, 64).await);
    }
    report(
        "HTTP/2 end to end (add 16 i32)",
        "calls/s",
        median(w),
        median(n),
        false,
    );
    server.shutdown().await;
}

fn main() {
    // `-- scalar`: only the scalar fresh-instance pair, for a profiler.
    let scalar_only = std::env::args().any(|a| a == "scalar");
    let component = guests::guest("example-add");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "median of {ROUNDS} rounds; cost ratio = how many times slower wasmrpc is than native"
    );
    rt.block_on(async {
        // The default, then the pooling allocator's reset strategies side by side.
        if scalar_only {
            // A small pool: valgrind cannot reserve the default pool's address space.
            let small = RuntimeConfig {
                max_concurrent_calls: 2,
                max_memories: 1,
                ..RuntimeConfig::default()
            };
            bench_instance_per_call(&component, "scalar", small, None).await;
            return;
        }
        // Before PAGEMAP_SCAN: the first 64 KiB of a slot reset in place, the rest handed back to
        // the kernel and faulted in again by the next call.
        let first_bytes = RuntimeConfig {
            pool_pagemap_scan: false,
            pool_keep_resident_bytes: 64 << 10,
            ..RuntimeConfig::default()
        };
        for elements in [None, Some(1000)] {
            let size = elements.map_or("scalar".to_string(), |n| format!("{n} i32"));
            let default = RuntimeConfig::default();
            bench_instance_per_call(&component, &format!("{size}, default"), default, elements)
                .await;
            let label = format!("{size}, no pagemap, first 64 KiB");
            bench_instance_per_call(&component, &label, first_bytes.clone(), elements).await;
        }
        if std::env::args().any(|a| a == "pagemap") {
            return;
        }
        let thousand = Some(1000);
        for keep in [0, 64 << 10, 4 << 20] {
            let config = RuntimeConfig {
                pool_keep_resident_bytes: keep,
                ..RuntimeConfig::default()
            };
            let label = format!("keep resident {} KiB", keep >> 10);
            bench_instance_per_call(&component, &label, config, thousand).await;
        }
        let unbatched = RuntimeConfig {
            pool_decommit_batch: 1,
            ..RuntimeConfig::default()
        };
        bench_instance_per_call(&component, "decommit batch 1", unbatched, thousand).await;
        let on_demand = RuntimeConfig {
            pooling: false,
            ..RuntimeConfig::default()
        };
        bench_instance_per_call(&component, "no pooling", on_demand, thousand).await;
        bench_http(&component).await;
    });
}

//! Large tensors, binary against JSON, side by side in one run: `add_float32` of two 16 MiB
//! float32 tensors (4 Mi elements each) through the real embedded server, the time of a whole
//! call as its caller sees it (encoding, HTTP, decoding, the guest, the answer back).
//!
//! `cargo bench -p wasmrpc-host --bench tensors` prints the median of each side and the ratio
//! "JSON time / binary time". Two pairs:
//!
//! 1. **KServe v2 infer**: the same route, a JSON body against a binary one (the binary tensor
//!    data extension, outputs asked for in binary), over one HTTP/2 connection;
//! 2. **Rust client**: `Encoding::Binary` (the default: v2 infer, binary both ways) against
//!    `Encoding::Json` (the v1 call route).
//!
//! `cargo bench -p wasmrpc-host --bench tensors -- binary` runs only the binary sides, 20 rounds
//! of each, for a profiler.

#[path = "../../tests/e2e/support/guests.rs"]
#[allow(dead_code)]
mod guests;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method};
use wasmrpc_client::body::Chunks;
use wasmrpc_client::transport::Transport;
use wasmrpc_client::{Client, Encoding, Tensor};
use wasmrpc_host::Server;
use wasmrpc_host::internals::{Runtime, RuntimeConfig};
use wasmrpc_proto::{headers, kserve};

const ROUNDS: usize = 5;
const ELEMENTS: usize = 4 << 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(name: &str, json: &[f64], binary: &[f64]) {
    let (json, binary) = (median(json.to_vec()), median(binary.to_vec()));
    println!(
        "{name:<34} JSON {json:>9.1} ms   binary {binary:>7.1} ms   JSON/binary {:>6.1}x",
        json / binary
    );
}

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, f64) {
    let started = Instant::now();
    let out = f.await;
    (out, started.elapsed().as_secs_f64() * 1e3)
}

#[derive(serde::Deserialize)]
struct JsonAnswer {
    outputs: Vec<JsonOutput>,
}

#[derive(serde::Deserialize)]
struct JsonOutput {
    data: Vec<f32>,
}

/// One v2 infer in JSON: the request written with serde_json, the answer read back into f32s.
async fn v2_json(t: &Transport, a: &[f32], b: &[f32]) -> Vec<f32> {
    let body = serde_json::to_vec(&serde_json::json!({
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [a.len()], "data": a},
            {"name": "b", "datatype": "FP32", "shape": [b.len()], "data": b},
        ]
    }))
    .unwrap();
    let answer = t
        .send(
            Method::POST,
            "/v2/models/add_float32/infer",
            Some((Bytes::from(body), headers::JSON)),
        )
        .await
        .unwrap();
    let mut answer: JsonAnswer = serde_json::from_slice(&answer).unwrap();
    answer.outputs.remove(0).data
}

/// One v2 infer in binary both ways.
async fn v2_binary(t: &Transport, a: &Tensor, b: &Tensor) -> Vec<f32> {
    let encoded = kserve::encode_infer_request(&[("a", a), ("b", b)], None);
    let (answer_headers, answer) = t
        .exchange(
            Method::POST,
            "/v2/models/add_float32/infer",
            Some((Chunks::new(encoded.chunks), headers::OCTET_STREAM)),
            &[(
                headers::INFERENCE_HEADER_CONTENT_LENGTH,
                HeaderValue::from(encoded.header_length),
            )],
        )
        .await
        .unwrap();
    let header_length = answer_headers
        .get(headers::INFERENCE_HEADER_CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let outputs = kserve::decode_infer_response(&answer, header_length).unwrap();
    outputs[0].tensor.to_vec::<f32>().unwrap()
}

async fn client(url: &str, encoding: Encoding) -> Client {
    Client::builder("http", url)
        .name("bench")
        .timeout(Duration::from_secs(120))
        .encoding(encoding)
        .connect()
        .await
        .unwrap()
}

fn main() {
    let component = guests::guest("example-add");
    let binary_only = std::env::args().any(|a| a == "binary");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "add_float32 of two {ELEMENTS}-element float32 tensors (16 MiB each); median of {ROUNDS} rounds"
    );
    rt.block_on(async {
        let server = Server::create_local_server().await.expect("server");
        server
            .register_export("add_float32", component.to_vec(), Some("add_float32"))
            .await
            .expect("register");
        server.start().expect("start");
        let url = format!("http://{}", server.address());
        let a: Vec<f32> = (0..ELEMENTS).map(|i| i as f32 * 0.37).collect();
        let b: Vec<f32> = (0..ELEMENTS).map(|i| 1.0 / (i as f32 + 1.0)).collect();
        let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let (ta, tb) = (Tensor::vector(a.clone()), Tensor::vector(b.clone()));

        let transport = Transport::new(&url, "bench", None).unwrap();
        if binary_only {
            // The floor: the same call in process, no HTTP.
            let runtime = Runtime::new(RuntimeConfig::default()).expect("engine");
            let compiled = runtime
                .compile(std::sync::Arc::new(component.to_vec()), "bench")
                .await
                .expect("compiles");
            let module = runtime.describe(compiled).await.expect("loads");
            for _ in 0..5 {
                let (out, ms) = timed(runtime.call(
                    &module,
                    "add_float32",
                    vec![ta.clone(), tb.clone()],
                    Duration::from_secs(60),
                    Instant::now(),
                    usize::MAX,
                ))
                .await;
                std::hint::black_box(out.expect("call"));
                println!("in process: {ms:.1} ms");
            }
            let by_binary = client(&url, Encoding::Binary).await;
            let args = vec![ta.clone(), tb.clone()];
            for _ in 0..20 {
                let (sum, v2) = timed(v2_binary(&transport, &ta, &tb)).await;
                assert_eq!(sum, expected);
                let (sum, sdk) =
                    timed(by_binary.call_async("add_float32", args.clone(), None, None)).await;
                assert_eq!(sum.unwrap()[0].to_vec::<f32>().unwrap(), expected);
                println!("binary: v2 {v2:.1} ms, client {sdk:.1} ms");
            }
            server.shutdown().await;
            return;
        }
        let (mut json, mut binary) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (sum, ms) = timed(v2_json(&transport, &a, &b)).await;
            assert_eq!(sum, expected);
            json.push(ms);
            let (sum, ms) = timed(v2_binary(&transport, &ta, &tb)).await;
            assert_eq!(sum, expected);
            binary.push(ms);
        }
        report("KServe v2 infer, JSON vs binary", &json, &binary);

        let by_json = client(&url, Encoding::Json).await;
        let by_binary = client(&url, Encoding::Binary).await;
        let args = vec![ta.clone(), tb.clone()];
        let (mut json, mut binary) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (sum, ms) =
                timed(by_json.call_async("add_float32", args.clone(), None, None)).await;
            assert_eq!(sum.unwrap()[0].to_vec::<f32>().unwrap(), expected);
            json.push(ms);
            let (sum, ms) =
                timed(by_binary.call_async("add_float32", args.clone(), None, None)).await;
            assert_eq!(sum.unwrap()[0].to_vec::<f32>().unwrap(), expected);
            binary.push(ms);
        }
        report("Rust client, Json vs Binary", &json, &binary);
        server.shutdown().await;
    });
}

//! Micro-benchmarks of the wire codecs, each beside a baseline in the same run: the v1 JSON
//! tensor decoder and encoder against serde_json on plain vectors of the same numbers, and the
//! KServe v2 binary framing against a memcpy of the same bytes.
//!
//! `cargo bench -p wasmrpc-proto --bench codecs` prints, for each pair, the median of 11 rounds,
//! the time per element (or per MiB) and the ratio "baseline time / ours" (above 1: ours is
//! faster). Row P9 of docs/benchmarks.md is the float32 decode at 1M elements.

use std::time::Instant;

use bytes::Bytes;
use wasmrpc_proto::json::decode_call_request;
use wasmrpc_proto::kserve::{decode_infer_request, encode_infer_request};
use wasmrpc_proto::{CallResponse, Tensor};

const ROUNDS: usize = 11;

/// Median milliseconds of `f` over `ROUNDS` runs.
fn time(mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[ROUNDS / 2]
}

fn pair(name: &str, per: (f64, &str), ours: f64, baseline_name: &str, baseline: f64) {
    let (count, unit) = per;
    println!(
        "{name:<38} ours {:>9.2} ns/{unit:<4} {baseline_name:<22} {:>9.2} ns/{unit:<4} baseline/ours {:>5.2}",
        ours * 1e6 / count,
        baseline * 1e6 / count,
        baseline / ours
    );
}

fn json_floats(n: usize) {
    let values: Vec<f32> = (0..n).map(|i| (i as f32).sin() * 1e3).collect();
    let data = serde_json::to_string(&values).unwrap();
    let body = format!(r#"{{"args":[{{"dtype":"float32","shape":[{n}],"data":{data}}}]}}"#);
    let ours = time(|| {
        std::hint::black_box(decode_call_request(body.as_bytes()).unwrap());
    });
    let serde = time(|| {
        std::hint::black_box(serde_json::from_slice::<Vec<f32>>(data.as_bytes()).unwrap());
    });
    pair(
        &format!("JSON decode float32 x{n}"),
        (n as f64, "elem"),
        ours,
        "serde Vec<f32>",
        serde,
    );

    let response = CallResponse {
        outputs: vec![Tensor::vector(values.clone())],
    };
    let ours = time(|| {
        std::hint::black_box(serde_json::to_vec(&response).unwrap());
    });
    let serde = time(|| {
        std::hint::black_box(serde_json::to_vec(&values).unwrap());
    });
    pair(
        &format!("JSON encode float32 x{n}"),
        (n as f64, "elem"),
        ours,
        "serde Vec<f32>",
        serde,
    );
}

fn json_ints(n: usize) {
    let values: Vec<i32> = (0..n as i32).map(|i| i.wrapping_mul(7919)).collect();
    let data = serde_json::to_string(&values).unwrap();
    let body = format!(r#"{{"args":[{{"dtype":"int32","shape":[{n}],"data":{data}}}]}}"#);
    let ours = time(|| {
        std::hint::black_box(decode_call_request(body.as_bytes()).unwrap());
    });
    let serde = time(|| {
        std::hint::black_box(serde_json::from_slice::<Vec<i32>>(data.as_bytes()).unwrap());
    });
    pair(
        &format!("JSON decode int32 x{n}"),
        (n as f64, "elem"),
        ours,
        "serde Vec<i32>",
        serde,
    );
}

fn binary(mib: usize) {
    let n = mib << 18; // float32 elements in `mib` MiB
    let x = Tensor::vector((0..n).map(|i| i as f32).collect::<Vec<_>>());
    let encoded = encode_infer_request(&[("x", &x)], None);
    let body = Bytes::from(encoded.chunks.concat());
    let ours = time(|| {
        let request = decode_infer_request(&body, Some(encoded.header_length)).unwrap();
        std::hint::black_box(request);
    });
    let mut copy = vec![0u8; x.raw_bytes().len()];
    let memcpy = time(|| {
        copy.copy_from_slice(std::hint::black_box(x.raw_bytes()));
        std::hint::black_box(&copy);
    });
    pair(
        &format!("v2 binary decode {mib} MiB"),
        (mib as f64, "MiB"),
        ours,
        "memcpy",
        memcpy,
    );
    let ours = time(|| {
        std::hint::black_box(encode_infer_request(&[("x", &x)], None));
    });
    pair(
        &format!("v2 binary encode {mib} MiB"),
        (mib as f64, "MiB"),
        ours,
        "memcpy",
        memcpy,
    );
}

fn main() {
    // `-- profile`: only the float32 decode, over and over (for perf).
    if std::env::args().any(|a| a == "profile") {
        let values: Vec<f32> = (0..1_000_000).map(|i| (i as f32).sin() * 1e3).collect();
        let data = serde_json::to_string(&values).unwrap();
        let body = format!(r#"{{"args":[{{"dtype":"float32","shape":[1000000],"data":{data}}}]}}"#);
        for _ in 0..100 {
            std::hint::black_box(decode_call_request(body.as_bytes()).unwrap());
        }
        return;
    }
    println!("median of {ROUNDS} rounds; baseline/ours above 1 means ours is faster");
    for n in [1_000, 1_000_000] {
        json_floats(n);
    }
    json_ints(1_000_000);
    binary(16);
}

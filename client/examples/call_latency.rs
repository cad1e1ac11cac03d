//! How long a small call takes from the Rust client, one call at a time: scalar `add` against a
//! running server, the median and the 10th and 90th percentiles printed.
//!
//! With `bash examples/serve.sh` running (it registers `add`):
//!
//! ```sh
//! cargo run --release -p wasmrpc-client --example call_latency            # 127.0.0.1:8080, 3,000 calls
//! cargo run --release -p wasmrpc-client --example call_latency -- 127.0.0.1:8080 10000 json
//! ```
//!
//! The figures in docs/benchmarks.md ("Small calls from the Rust client") were taken this way.

use std::time::{Duration, Instant};

use wasmrpc_client::{Client, Encoding, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let address = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let calls: usize = args.next().map_or(Ok(3000), |n| n.parse())?;
    let encoding = match args.next().as_deref() {
        None | Some("binary") => Encoding::Binary,
        Some("json") => Encoding::Json,
        Some(other) => return Err(format!("encoding is binary or json, not {other}").into()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = Client::builder("http", &address)
            .name("call_latency")
            .timeout(Duration::from_secs(5))
            .encoding(encoding)
            .connect()
            .await?;
        let mut times = Vec::with_capacity(calls);
        for _ in 0..calls.max(1) {
            let started = Instant::now();
            let args = vec![Tensor::scalar(2i32), Tensor::scalar(3i32)];
            std::hint::black_box(client.call_async("add", args, None, None).await?);
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        println!(
            "{} calls of add ({encoding:?}): p10 {:.0} µs, p50 {:.0} µs, p90 {:.0} µs",
            times.len(),
            at(0.1),
            at(0.5),
            at(0.9)
        );
        Ok(())
    })
}

//! The native baseline of `host/benches/wrk.sh` as a server of its own: `POST
//! /v1/methods/add/call` answered by a bare axum handler (no sandbox) on wasmrpc's accept loop.
//!
//! ```sh
//! cargo run --release -p wasmrpc-host --example baseline_server -- 127.0.0.1:0
//! ```
//!
//! Prints `baseline listening on http://ADDRESS` once it accepts connections, and `otlp sink
//! listening on http://ADDRESS` for the OTLP/HTTP sink of `wrk.sh WRK_TRACING=1` on a port of
//! its own (`benches/support/otlp_sink.rs`).

#[path = "../benches/support/baseline.rs"]
mod baseline;
#[path = "../benches/support/otlp_sink.rs"]
mod otlp_sink;

use wasmrpc_host::internals::{ServeOptions, serve_connections};

fn main() {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .expect("binding the baseline's address");
        let sink = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the sink's address");
        println!(
            "otlp sink listening on http://{}",
            sink.local_addr().expect("bound")
        );
        tokio::spawn(otlp_sink::serve(sink));
        println!(
            "baseline listening on http://{}",
            listener.local_addr().expect("bound")
        );
        serve_connections(
            listener,
            baseline::router(),
            std::future::pending(),
            ServeOptions::default(),
        )
        .await
        .expect("serving");
    });
}

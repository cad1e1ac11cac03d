//! TensorFlow's `tf.distribute.experimental.rpc.Client` example, against a wasmrpc server.
//!
//! TF's documentation registers `addition` (adds two int32 tensors) on a server, creates a
//! client, then calls the method three ways. The same here, with the blocking client:
//!
//! ```text
//! bash examples/serve.sh &                      # builds the guests, serves on 127.0.0.1:8080
//! cargo run -p example-tf-client -- [--server http://127.0.0.1:8080] [--component PATH]
//! ```
//!
//! `--component` defaults to `target/guests/wasm32-wasip2/guest/example_add.wasm`, which
//! `examples/serve.sh` builds.

use std::net::TcpListener;
use std::time::Duration;

use wasmrpc_client::blocking::Client;
use wasmrpc_client::{DType, Tensor, TensorSpec};

const USAGE: &str = "usage: tf-client [--server URL] [--component PATH]";

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = "http://127.0.0.1:8080".to_owned();
    let mut component = "target/guests/wasm32-wasip2/guest/example_add.wasm".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--server", Some(v)) => server = v,
            ("--component", Some(v)) => component = v,
            _ => {
                eprintln!("{USAGE}");
                std::process::exit(2);
            }
        }
    }

    // TF: client = tf.distribute.experimental.rpc.Client.create("grpc", address=..., name=...)
    let client = Client::create("http", &server, "tf-client", Duration::from_secs(10))?;

    // TF: server.register("addition", addition)
    let bytes = std::fs::read(&component)
        .map_err(|e| format!("reading {component}: {e} (bash examples/serve.sh builds it)"))?;
    client.register("addition", bytes, Some("add"))?;

    // TF: a = tf.constant(2, dtype=tf.int32); b = tf.constant(3, dtype=tf.int32)
    let (a, b) = (Tensor::scalar(2i32), Tensor::scalar(3i32));

    // TF: result = client.call(args=[a, b], method_name="addition",
    //                           output_specs=tf.TensorSpec((), tf.int32))
    let scalar_int32 = TensorSpec {
        name: "sum".into(),
        dtype: DType::Int32,
        shape: Some(vec![]),
    };
    let result = client.call(
        "addition",
        vec![a.clone(), b.clone()],
        Some(vec![scalar_int32]),
        None,
    );
    if result.is_ok() {
        println!("client.call        -> {:?}", ints(&result.get_value()?));
    }

    // TF: result = client.addition(a, b)   (returns a StatusOrResult at once)
    let addition = client.method("addition")?;
    let result = addition.call(vec![a.clone(), b.clone()]);
    println!("addition.call      -> {:?}", ints(&result.get_value()?));

    // TF: result = client.addition_blocking(a, b)   (returns the value)
    println!(
        "call_blocking      -> {:?}",
        ints(&addition.call_blocking(vec![a.clone(), b.clone()])?)
    );

    // An unknown method is NOT_FOUND, and says which methods exist.
    if let Err(e) = client.method("subtraction") {
        println!("method(subtraction) -> {e}");
    }
    if let Some((code, message)) = client
        .call("subtraction", vec![a, b], None, None)
        .get_error()
    {
        println!("call(subtraction)  -> {code}: {message}");
    }

    // A server that does not answer within the timeout gives DEADLINE_EXCEEDED; this one
    // accepts the connection and never replies.
    let silent = TcpListener::bind("127.0.0.1:0")?;
    let address = silent.local_addr()?;
    match Client::create(
        "http",
        &address.to_string(),
        "tf-client",
        Duration::from_millis(300),
    ) {
        Err(e) if e.is_deadline_exceeded() => println!("silent server      -> {e}"),
        other => println!("silent server      -> unexpected: {other:?}"),
    }
    Ok(())
}

/// The int32 values of each output.
fn ints(outputs: &[Tensor]) -> Vec<Vec<i32>> {
    outputs
        .iter()
        .map(|t| t.to_vec::<i32>().unwrap_or_default())
        .collect()
}

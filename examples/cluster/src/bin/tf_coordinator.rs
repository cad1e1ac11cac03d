//! TensorFlow's `ClusterCoordinator` example, against a wasmrpc cluster: schedule a function on
//! any available worker many times, `join`, then `fetch` the `RemoteValue`s.
//!
//! ```text
//! bash examples/cluster.sh &    # NATS and three workers w0, w1, w2 on 127.0.0.1:8081..8083
//! cargo run -p example-cluster --bin tf-coordinator -- [--server 127.0.0.1:8081] [--steps 100]
//! ```

use std::time::Duration;

use wasmrpc_client::cluster::coordinator::ClusterCoordinator;
use wasmrpc_client::{Client, Code, Tensor};

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut server = "127.0.0.1:8081".to_owned();
    let mut total_steps = 100i32;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--server", Some(v)) => server = v,
            ("--steps", Some(v)) => total_steps = v.parse()?,
            _ => return Err("usage: tf-coordinator [--server HOST:PORT] [--steps N]".into()),
        }
    }
    let client = Client::create("http", &server, "tf-coordinator", Duration::from_secs(10)).await?;

    // TF: coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    let coordinator = ClusterCoordinator::new(client);

    // TF: for step in range(total_steps): result = coordinator.schedule(worker_fn, args=(...,))
    let results: Vec<_> = (0..total_steps)
        .map(|step| coordinator.schedule("add", vec![Tensor::scalar(step), Tensor::scalar(1i32)]))
        .collect();

    // TF: coordinator.join()
    coordinator.join().await?;
    assert!(coordinator.done());

    // TF: result.fetch()  (tf.errors.CancelledError when it could not run)
    let mut total = 0i64;
    for result in &results {
        match result.fetch().await {
            Ok(value) => total += i64::from(value[0].to_vec::<i32>()?[0]),
            Err(e) if e.code() == Code::Cancelled => println!("cancelled: {e}"),
            Err(e) => return Err(e.into()),
        }
    }
    println!("{total_steps} steps scheduled on any worker; sum of results {total}");
    Ok(())
}

//! Paddle's `paddle.distributed.rpc` example, line for line, against a wasmrpc cluster.
//!
//! Paddle's documentation defines `add(a, b)`, starts RPC as `worker0`, calls `add` on a worker
//! synchronously and asynchronously, lists the workers and shuts down. Here `add` is the add
//! example component, registered in the cluster first (any worker's `PUT /v1/methods/add`):
//!
//! ```text
//! bash examples/cluster.sh &    # NATS and three workers w0, w1, w2 on 127.0.0.1:8081..8083
//! cargo run -p example-cluster --bin paddle-rpc -- [--master 127.0.0.1:8081] [--world-size 3]
//! ```

use wasmrpc_client::Tensor;
use wasmrpc_client::cluster::paddle::{NO_TIMEOUT, init_rpc};

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut master = "127.0.0.1:8081".to_owned();
    let mut world_size = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--master", Some(v)) => master = v,
            ("--world-size", Some(v)) => world_size = v.parse()?,
            _ => return Err("usage: paddle-rpc [--master HOST:PORT] [--world-size N]".into()),
        }
    }

    // Paddle: rpc.init_rpc("worker0", rank=0, world_size=1, master_endpoint="127.0.0.1:8001")
    // (here the cluster's workers are separate servers; this process waits for all of them)
    let rpc = init_rpc("worker0", Some(0), Some(1), &master).await?;
    while rpc.get_all_worker_infos().await?.len() < world_size {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // Paddle: ret = rpc.rpc_sync("worker0", add, args=(2, 3))
    let first = rpc.get_all_worker_infos().await?[0].name.clone();
    let ret = rpc
        .rpc_sync(
            &first,
            "add",
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
            NO_TIMEOUT,
        )
        .await?;
    println!("rpc_sync on {first}: {:?}", ret[0].to_vec::<i32>()?);

    // Paddle: fut = rpc.rpc_async("worker0", add, args=(2, 3)); print(fut.wait())
    for info in rpc.get_all_worker_infos().await? {
        let fut = rpc.rpc_async(
            &info.name,
            "add",
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
            NO_TIMEOUT,
        );
        println!(
            "rpc_async on {} (rank {}, {}:{}): {:?}",
            info.name,
            info.rank,
            info.ip,
            info.port,
            fut.wait().await?[0].to_vec::<i32>()?
        );
    }

    // Paddle: rpc.get_current_worker_info(); rpc.get_worker_info("worker0")
    println!("current worker: {:?}", rpc.get_current_worker_info().await?);
    println!("{first}: {:?}", rpc.get_worker_info(&first).await?);

    // Paddle: rpc.shutdown()
    rpc.shutdown().await?;
    Ok(())
}

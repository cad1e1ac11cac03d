//! The embeddable server (TF's `rpc.Server`): create, register, start, call, shutdown.

use std::time::{Duration, Instant};

use wasmrpc_client::{Client, Code, Tensor};
use wasmrpc_host::Server;

use crate::support::guest;

fn ints(v: &[i32]) -> Tensor {
    Tensor::vector(v.to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_server_serves_what_is_registered_before_and_after_start() {
    let server = Server::create_local_server().await.unwrap();
    assert!(server.address().ip().is_loopback());
    server
        .register_export("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    server.start().unwrap();
    assert_eq!(server.start().unwrap_err().code(), Code::FailedPrecondition);

    let url = format!("http://{}", server.address());
    let client = Client::create("http", &url, "embedded-test", Duration::from_secs(10))
        .await
        .unwrap();
    let out = client
        .method("addition")
        .unwrap()
        .call_blocking(vec![ints(&[1, 2]), ints(&[10, 20])])
        .await
        .unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![11, 22]);

    // Hot registration from a path, and a new version of an existing name.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("softmax.wasm");
    std::fs::write(&path, guest("example-softmax")).unwrap();
    let info = server.register("softmax", path.as_path()).await.unwrap();
    assert_eq!(info.version, 1);
    let again = server
        .register_export("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    assert_eq!(again.version, 2);
    client.refresh().await.unwrap();
    let x = Tensor::vector(vec![0f32, 0.0]);
    let out = client
        .call_async("softmax", vec![x], None, None)
        .await
        .unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.5, 0.5]);

    let started = Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let gone = client.call_async("softmax", vec![Tensor::vector(vec![1f32])], None, None);
    assert!(gone.await.is_err(), "no calls after shutdown");
}

#[tokio::test]
async fn an_unsupported_rpc_layer_or_address_is_refused() {
    let err = Server::create("grpc", "127.0.0.1:0").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("http"), "{}", err.message());
    let err = Server::create("http", "0.0.0.0:0").await.unwrap_err();
    assert!(err.message().contains("refusing"), "{}", err.message());
    let err = Server::create("http", "not an address").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn a_bad_component_is_refused_at_register() {
    let server = Server::create_local_server().await.unwrap();
    let err = server
        .register("bad", b"not wasm".to_vec())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = server
        .register("missing", std::path::Path::new("/nonexistent.wasm"))
        .await
        .unwrap_err();
    assert!(err.message().contains("/nonexistent.wasm"));
}

/// An embedding program compiles in children too when it names a `wasmrpc` binary: the memory
/// budget holds there as in `wasmrpc serve`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_server_compiles_in_a_child_when_given_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let settings = wasmrpc_host::ServeSettings {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        data_dir: Some(dir.path().to_path_buf()),
        compiler: Some(env!("CARGO_BIN_EXE_wasmrpc").into()),
        compile_memory_mib: Some(256),
        ..Default::default()
    };
    let server = Server::with_settings(settings).await.unwrap();
    let hungry = crate::compiles::hard_to_compile(1, 10_000, 30_000);
    let refused = server.register_export("hungry", hungry, None).await;
    let error = refused.expect_err("over the compile memory budget");
    assert_eq!(error.code(), Code::ResourceExhausted, "{error}");
    assert!(error.message().contains("256 MiB"), "{error}");
    let info = server
        .register_export("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    assert_eq!(info.version, 1);
    server.shutdown().await;
}

//! The Rust client's `grpc` rpc layer against the real server: every call a gRPC `ModelInfer` on
//! the main port, with the same values and the same errors as the `http` layer; keys as
//! `authorization` metadata and the tenant matrix; deadlines as `grpc-timeout`.

use std::time::{Duration, Instant};

use wasmrpc_client::grpc::{GrpcChannel, ModelInferRequest, status_to_error};
use wasmrpc_client::transport::Transport;
use wasmrpc_client::{Client, Code, Error, Tensor};

use crate::support::{TestServer, register};
use crate::tenants::Keyed;

/// A server with `add` (int32), `add_float32`, `upper` and the hostile `spin`.
fn server() -> TestServer {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    register(&http, "add_float32", "example-add", Some("add_float32"));
    register(&http, "upper", "example-strings", Some("upper"));
    register(&http, "spin", "guest-hostile", Some("spin"));
    server
}

fn authority(server: &TestServer) -> &str {
    server.url.split_once("://").unwrap().1
}

async fn both(server: &TestServer) -> (Client, Client) {
    let timeout = Duration::from_secs(30);
    let over_grpc = Client::create("grpc", authority(server), "e2e-grpc", timeout)
        .await
        .unwrap();
    let over_http = Client::create("http", authority(server), "e2e-http", timeout)
        .await
        .unwrap();
    (over_grpc, over_http)
}

#[tokio::test]
async fn calls_over_grpc_give_the_same_values_as_over_http() {
    let server = server();
    let (over_grpc, over_http) = both(&server).await;
    assert_eq!(
        over_grpc.address(),
        format!("grpc://{}", authority(&server))
    );
    let cases = [
        (
            "add",
            vec![
                Tensor::from_vec([2, 2], vec![1i32, 2, 3, i32::MAX]).unwrap(),
                Tensor::from_vec([2, 2], vec![10i32, 20, 30, 1]).unwrap(),
            ],
        ),
        (
            "add",
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], // scalars stay scalars
        ),
        (
            "upper",
            vec![Tensor::from_strings([3], ["abc", "straße", ""]).unwrap()],
        ),
    ];
    for (method, args) in cases {
        let got = over_grpc
            .call_async(method, args.clone(), None, None)
            .await
            .unwrap();
        let want = over_http
            .call_async(method, args, None, None)
            .await
            .unwrap();
        assert_eq!(got, want, "{method}");
    }
    // 16 MiB each way.
    let x = Tensor::from_vec([4 << 20], (0..4 << 20).map(|i| i as f32).collect()).unwrap();
    let out = over_grpc
        .method("add_float32")
        .unwrap()
        .call_blocking(vec![x.clone(), x.clone()])
        .await
        .unwrap();
    let doubled: Vec<f32> = x.to_vec::<f32>().unwrap().iter().map(|v| v * 2.0).collect();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), doubled);
}

#[tokio::test]
async fn errors_over_grpc_are_the_errors_over_http() {
    let server = server();
    let (over_grpc, over_http) = both(&server).await;
    let add = |a: Vec<i32>, b: Vec<i32>| vec![Tensor::vector(a), Tensor::vector(b)];
    let calls: Vec<(&str, Vec<Tensor>)> = vec![
        ("no_such_method", add(vec![1], vec![2])),
        ("add", add(vec![1, 2], vec![1, 2, 3])), // the guest's own INVALID_ARGUMENT
        ("add", vec![Tensor::vector(vec![1i32])]), // the client's: one argument of two
    ];
    for (method, args) in calls {
        let e1 = over_grpc
            .call_async(method, args.clone(), None, None)
            .await
            .unwrap_err();
        let e2 = over_http
            .call_async(method, args, None, None)
            .await
            .unwrap_err();
        assert_eq!(
            (e1.code(), e1.message()),
            (e2.code(), e2.message()),
            "{method}"
        );
    }
}

#[tokio::test]
async fn a_grpc_call_past_its_timeout_is_deadline_exceeded_and_the_server_goes_on() {
    let server = server();
    let (over_grpc, _) = both(&server).await;
    let started = Instant::now();
    let err = over_grpc
        .call_async(
            "spin",
            vec![Tensor::vector(vec![0f32; 4])],
            None,
            Some(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let sum = over_grpc
        .call_async(
            "add",
            vec![Tensor::scalar(1i32), Tensor::scalar(1i32)],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(sum[0].to_vec::<i32>().unwrap(), vec![2]);
}

/// One raw `ModelInfer` of `add` on a fresh connection with `key`: what the service answers.
async fn raw_add(url: &str, name: &str, key: Option<&str>) -> Result<Vec<Tensor>, Error> {
    let transport = Transport::new(url, "e2e-raw", key).unwrap();
    let names = ["a".to_owned(), "b".to_owned()];
    let args = [Tensor::scalar(2i32), Tensor::scalar(3i32)];
    let request: ModelInferRequest =
        wasmrpc_client::grpc::infer_request(name, None, &names, &args)?;
    let answer = GrpcChannel::new(&transport)
        .client()
        .model_infer(request)
        .await
        .map_err(status_to_error)?;
    wasmrpc_client::grpc::response_outputs(answer.into_inner())
}

#[tokio::test]
async fn keys_go_as_metadata_and_another_tenants_model_is_exactly_a_missing_one() {
    let keyed = Keyed::start(&[]);
    let (team_a, a) = keyed.tenant("team-a");
    let (_, b) = keyed.tenant("team-b");
    register(&team_a, "only_in_a", "example-add", Some("add"));
    let url = &keyed.server.url;
    let (key_a, key_b) = (a["key"].as_str().unwrap(), b["key"].as_str().unwrap());

    let client = Client::builder("grpc", url.split_once("://").unwrap().1)
        .key(key_a)
        .connect()
        .await
        .unwrap();
    let sum = client
        .call_async(
            "only_in_a",
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(sum[0].to_vec::<i32>().unwrap(), vec![5]);

    for key in [None, Some("wrpc_0000000000000000_not-a-key")] {
        let err = raw_add(url, "only_in_a", key).await.unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{key:?}: {err}");
    }
    let while_in_a = raw_add(url, "only_in_a", Some(key_b)).await.unwrap_err();
    client.delete("only_in_a").await.unwrap();
    let missing = raw_add(url, "only_in_a", Some(key_b)).await.unwrap_err();
    assert_eq!(while_in_a.code(), Code::NotFound, "{while_in_a}");
    assert_eq!(
        (while_in_a.code(), while_in_a.message()),
        (missing.code(), missing.message())
    );
}

#[tokio::test]
async fn grpcs_calls_over_tls_trusting_a_private_ca() {
    let pki = crate::tls::Pki::new();
    let chain = pki.path("chain.pem").display().to_string();
    let key = pki.path("key.pem").display().to_string();
    let server = TestServer::start(&["--tls-cert", &chain, "--tls-key", &key]);
    let client = Client::builder("grpcs", authority(&server))
        .ca_cert_pem(std::fs::read(pki.path("ca.pem")).unwrap())
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    assert!(
        client.address().starts_with("grpcs://"),
        "{}",
        client.address()
    );
    client
        .register("add", crate::support::guest("example-add"), Some("add"))
        .await
        .unwrap();
    let sum = client
        .call_async(
            "add",
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(sum[0].to_vec::<i32>().unwrap(), vec![5]);
}

#[test]
fn the_blocking_client_calls_over_grpc_too() {
    let server = server();
    let client = wasmrpc_client::blocking::Client::create(
        "grpc",
        authority(&server),
        "e2e-blocking",
        Duration::from_secs(30),
    )
    .unwrap();
    let out = client
        .method("add")
        .unwrap()
        .call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])
        .unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![5]);
    let err = client
        .call("no_such_method", vec![], None, None)
        .get_value()
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
}

//! The Rust client's two encodings against the real server: binary tensor data over the KServe
//! v2 infer route (the default) and JSON over the v1 call route give the same outputs and the
//! same canonical error codes.

use std::time::Duration;

use half::bf16;
use wasmrpc_client::{Client, Code, Encoding, Tensor};

use crate::support::{TestServer, register};

async fn client(server: &TestServer, encoding: Encoding) -> Client {
    Client::builder("http", &server.url)
        .name(format!("{encoding:?}"))
        .timeout(Duration::from_secs(30))
        .encoding(encoding)
        .connect()
        .await
        .unwrap()
}

fn examples_server(flags: &[&str]) -> TestServer {
    let server = TestServer::start(flags);
    let http = server.http();
    for (name, package, export) in [
        ("add", "example-add", "add"),
        ("add_bfloat16", "example-add", "add_bfloat16"),
        ("add_uint64", "example-add", "add_uint64"),
        ("upper", "example-strings", "upper"),
        ("max", "example-linalg", "max"),
        ("matmul", "example-matmul", "matmul"),
        ("spin", "guest-hostile", "spin"),
    ] {
        register(&http, name, package, Some(export));
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_json_calls_give_the_same_outputs() {
    let server = examples_server(&[]);
    let binary = client(&server, Encoding::Binary).await;
    let json = client(&server, Encoding::Json).await;
    let cases: Vec<(&str, Vec<Tensor>)> = vec![
        (
            "add",
            vec![
                Tensor::from_vec([2, 2], vec![1i32, 2, 3, 4]).unwrap(),
                Tensor::from_vec([2, 2], vec![10i32, 20, 30, 40]).unwrap(),
            ],
        ),
        (
            "add_bfloat16",
            vec![
                Tensor::vector(vec![bf16::from_f32(1.5), bf16::from_f32(-3.0)]),
                Tensor::vector(vec![bf16::from_f32(0.5), bf16::from_f32(1.0)]),
            ],
        ),
        (
            "add_uint64",
            vec![Tensor::scalar(u64::MAX - 1), Tensor::scalar(1u64)],
        ),
        (
            "upper",
            vec![Tensor::from_strings([3], ["ab", "", "é"]).unwrap()],
        ),
        (
            "max",
            vec![Tensor::from_vec([2, 2], vec![1.0f32, 5.0, -2.0, 0.5]).unwrap()],
        ),
    ];
    for (method, args) in cases {
        let by_binary = binary
            .call_async(method, args.clone(), None, None)
            .await
            .unwrap_or_else(|e| panic!("{method} in binary: {e}"));
        let by_json = json
            .call_async(method, args, None, None)
            .await
            .unwrap_or_else(|e| panic!("{method} in JSON: {e}"));
        assert_eq!(by_binary, by_json, "{method}");
    }
    // Two outputs, in the signature's order.
    let max = binary
        .call_async(
            "max",
            vec![Tensor::vector(vec![1.0f32, 7.0, 3.0])],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(max[0].to_vec::<f32>().unwrap(), vec![7.0]);
    assert_eq!(max[1].to_vec::<i64>().unwrap(), vec![1]);
    // A pinned version goes by the names that version takes.
    let pinned = binary
        .call_version(
            "add",
            1,
            vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
            None,
        )
        .await
        .unwrap();
    assert_eq!(pinned[0].to_vec::<i32>().unwrap(), vec![5]);
}

/// Binary is what travels by default: under a request limit that a JSON body of the same tensor
/// passes, the binary body fits and the JSON one is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_encoding_sends_raw_bytes_not_text() {
    let server = examples_server(&["--max-request-bytes", "9000"]);
    let default = client(&server, Encoding::default()).await;
    let json = client(&server, Encoding::Json).await;
    // 1,000 float32 values that each take about 10 characters as JSON text, 4 bytes raw.
    let a: Vec<f32> = (0..1000).map(|i| 0.123_456_7 + i as f32).collect();
    let args = vec![Tensor::vector(a.clone()), Tensor::vector(a.clone())];
    register(&server.http(), "addf", "example-add", Some("add_float32"));
    default.refresh().await.unwrap();
    let sum = default.call_async("addf", args.clone(), None, None).await;
    let sum = sum.unwrap_or_else(|e| panic!("binary: {e}"));
    assert_eq!(sum[0].to_vec::<f32>().unwrap()[999], a[999] * 2.0);
    let refused = json.call_async("addf", args, None, None).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canonical_codes_survive_the_binary_path() {
    let server = examples_server(&[]);
    let binary = client(&server, Encoding::Binary).await;
    // DEADLINE_EXCEEDED from the server's deadline.
    let e = binary
        .call_async(
            "spin",
            vec![Tensor::vector(vec![0f32; 4])],
            None,
            Some(Duration::from_millis(200)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    // The guest's own INVALID_ARGUMENT, with its message.
    let e = binary
        .call_async(
            "matmul",
            vec![
                Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap(),
                Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap(),
            ],
            None,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // NOT_FOUND for a version that does not exist.
    let e = binary
        .call_version("add", 9, vec![Tensor::scalar(1i32); 2], None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    // NOT_FOUND for a method that does not exist, listing those that do.
    let e = binary
        .call_async("absent", vec![Tensor::scalar(1i32)], None, None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assert!(e.message().contains("registered methods: add"), "{e}");
}

/// A method registered again with other input names (elsewhere, after this client listed it)
/// is still called by the right names: the server's refusal makes the client look them up again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_registered_again_with_other_input_names_is_called_by_its_new_names() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "m", "example-add", Some("add_float32")); // inputs `a`, `b`
    let binary = client(&server, Encoding::Binary).await;
    let args = vec![Tensor::vector(vec![2.0f32, 3.0]), Tensor::scalar(10.0f32)];
    register(&http, "m", "example-linalg", Some("scale")); // inputs `x`, `factor`
    let outputs = binary.call_async("m", args, None, None).await.unwrap();
    assert_eq!(outputs[0].to_vec::<f32>().unwrap(), vec![20.0, 30.0]);
}

//! The Rust client SDK (`wasmrpc-client`) against the real server: TensorFlow's RPC client
//! example with the async and the blocking client, timeouts, NOT_FOUND, arguments refused before
//! sending, creation failures, many concurrent calls over one connection, and output specs.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use wasmrpc_client::{Client, Code, DType, Dim, Tensor, TensorSpec, blocking};

use crate::support::{TestServer, guest, register};

/// A server with the add example as `addition` and the hostile guest's `spin` as `spin`.
fn server_with_methods(flags: &[&str]) -> TestServer {
    let server = TestServer::start(flags);
    let http = server.http();
    register(&http, "addition", "example-add", Some("add"));
    register(&http, "spin", "guest-hostile", Some("spin"));
    server
}

/// TF's example arguments, as vectors: `[1, 2] + [10, 20] = [11, 22]`.
fn a_and_b() -> Vec<Tensor> {
    vec![
        Tensor::vector(vec![1i32, 2]),
        Tensor::vector(vec![10i32, 20]),
    ]
}

/// The int32 values of every output.
fn ints(outputs: &[Tensor]) -> Vec<Vec<i32>> {
    outputs.iter().map(|t| t.to_vec::<i32>().unwrap()).collect()
}

fn int32_spec(shape: Option<Vec<Dim>>) -> TensorSpec {
    TensorSpec {
        name: "sum".into(),
        dtype: DType::Int32,
        shape,
    }
}

fn metrics(server: &TestServer) -> String {
    String::from_utf8(server.http().get("/metrics").body).unwrap()
}

/// A float32 tensor for `spin`, which loops forever on any shape.
fn spin_arg() -> Vec<Tensor> {
    vec![Tensor::vector(vec![0f32; 4])]
}

/// ESTABLISHED TCP connections from this process to `port` on the loopback.
#[cfg(target_os = "linux")]
pub(crate) fn connections_to(port: u16) -> usize {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields[2].rsplit(':').next().unwrap();
            if u16::from_str_radix(remote_port, 16) == Ok(port) && fields[3] == "01" {
                inodes.push(format!("socket:[{}]", fields[9]));
            }
        }
    }
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
        .count()
}

#[tokio::test]
async fn the_tf_example_flow_works_with_the_async_client() {
    let server = server_with_methods(&[]);
    let client = Client::create("http", &server.url, "sdk-async", Duration::from_secs(30))
        .await
        .unwrap();
    let names: Vec<String> = client
        .list_registered_methods()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["addition", "spin"]);

    // TF: client.call(args=[a, b], method_name="addition", output_specs=...)
    let result = client.call("addition", a_and_b(), Some(vec![int32_spec(None)]), None);
    assert!(result.is_ok().await);
    assert_eq!(result.get_error().await, None);
    assert_eq!(ints(&result.get_value().await.unwrap()), [[11, 22]]);
    // Asking again gives the same answer.
    assert_eq!(ints(&result.get_value().await.unwrap()), [[11, 22]]);

    // TF: client.addition(a, b) → StatusOrResult
    let addition = client.method("addition").unwrap();
    let pending = addition.call(a_and_b());
    assert!(pending.is_ok().await);
    assert_eq!(ints(&pending.get_value().await.unwrap()), [[11, 22]]);

    // TF: client.addition_blocking(a, b) → the value
    let value = addition.call_blocking(a_and_b()).await.unwrap();
    assert_eq!(ints(&value), [[11, 22]]);
    let scalar = addition
        .call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])
        .await
        .unwrap();
    assert_eq!(scalar, vec![Tensor::scalar(5i32)]);
}

#[test]
fn the_tf_example_flow_works_with_the_blocking_client() {
    let server = server_with_methods(&[]);
    // TF-style address: host:port, the layer given apart.
    let address = server.url.trim_start_matches("http://");
    let client =
        blocking::Client::create("http", address, "sdk-blocking", Duration::from_secs(30)).unwrap();
    assert_eq!(client.list_registered_methods().len(), 2);

    let result = client.call("addition", a_and_b(), Some(vec![int32_spec(None)]), None);
    assert!(result.is_ok());
    assert_eq!(result.get_error(), None);
    assert_eq!(ints(&result.get_value().unwrap()), [[11, 22]]);

    let addition = client.method("addition").unwrap();
    let pending = addition.call(a_and_b());
    assert_eq!(ints(&pending.get_value().unwrap()), [[11, 22]]);
    assert_eq!(
        ints(&addition.call_blocking(a_and_b()).unwrap()),
        [[11, 22]]
    );

    // Timeouts and NOT_FOUND look the same as with the async client.
    let spin = client.method("spin").unwrap();
    let err = spin
        .call_with_timeout(spin_arg(), Duration::from_millis(300))
        .unwrap_err();
    assert!(err.is_deadline_exceeded(), "{err}");
    assert!(client.method("nope").unwrap_err().is_not_found());
    assert_eq!(
        ints(&addition.call_blocking(a_and_b()).unwrap()),
        [[11, 22]]
    );
}

#[test]
fn the_blocking_client_registers_describes_and_deletes_methods() {
    let server = server_with_methods(&[]);
    let client =
        blocking::Client::create("http", &server.url, "sdk-admin", Duration::from_secs(30))
            .unwrap();
    let info = client
        .register("plus", guest("example-add"), Some("add"))
        .unwrap();
    assert_eq!((info.name.as_str(), info.version), ("plus", 1));
    // Registering makes the method callable through a handle at once.
    let plus = client.method("plus").unwrap();
    assert_eq!(ints(&plus.call_blocking(a_and_b()).unwrap()), [[11, 22]]);
    assert_eq!(client.describe("plus").unwrap().digest, info.digest);

    assert_eq!(client.delete("plus").unwrap(), vec![1]);
    assert!(client.method("plus").unwrap_err().is_not_found());
    assert!(client.describe("plus").unwrap_err().is_not_found());
    let (code, _) = client
        .call("plus", a_and_b(), None, None)
        .get_error()
        .unwrap();
    assert_eq!(code, Code::NotFound);
}

#[tokio::test]
async fn a_client_built_with_a_key_names_itself_and_calls_as_with_create() {
    let server = server_with_methods(&[]);
    // This version's server does not check keys: one is sent and accepted.
    let client = Client::builder("http", &server.url)
        .name("sdk-builder")
        .timeout(Duration::from_secs(30))
        .key("sdk-test-key")
        .connect()
        .await
        .unwrap();
    assert_eq!(client.name(), "sdk-builder");
    assert_eq!(client.address(), server.url);
    assert_eq!(client.list_registered_methods().len(), 2);
    let value = client
        .method("addition")
        .unwrap()
        .call_blocking(a_and_b())
        .await
        .unwrap();
    assert_eq!(ints(&value), [[11, 22]]);
    // The builder's timeout is the calls' default, as `create`'s is.
    let spin = client.method("spin").unwrap();
    let err = spin
        .call_with_timeout(spin_arg(), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(err.is_deadline_exceeded(), "{err}");

    // The blocking builder, from a thread of its own (this test runs inside a runtime).
    let url = server.url.clone();
    let blocking_value = std::thread::spawn(move || {
        let client = blocking::Client::builder("http", &url)
            .name("sdk-builder-blocking")
            .key("sdk-test-key")
            .connect()
            .unwrap();
        assert_eq!(client.name(), "sdk-builder-blocking");
        client
            .call("addition", a_and_b(), Some(vec![int32_spec(None)]), None)
            .get_value()
    })
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(ints(&blocking_value), [[11, 22]]);

    // Each name reached the server: the method list and the calls were counted under it.
    let metrics = metrics(&server);
    assert!(
        metrics.contains(r#"wasmrpc_client_requests_total{client="sdk-builder"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"wasmrpc_client_requests_total{client="sdk-builder-blocking"} 2"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_call_past_its_client_timeout_is_deadline_exceeded_and_the_server_still_answers() {
    let server = server_with_methods(&[]);
    let client = Client::create("http", &server.url, "sdk-timeout", Duration::from_secs(30))
        .await
        .unwrap();
    let started = Instant::now();
    let result = client.call("spin", spin_arg(), None, Some(Duration::from_millis(300)));
    let (code, message) = result.get_error().await.expect("spin never finishes");
    let took = started.elapsed();
    assert_eq!(code, Code::DeadlineExceeded, "{message}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // Generous for a debug build on a shared 2-core machine.
    assert!(took < Duration::from_secs(5), "{took:?}");

    // The host stopped the guest (it counts the call as DEADLINE_EXCEEDED) and still serves.
    let value = client
        .method("addition")
        .unwrap()
        .call_blocking(a_and_b())
        .await
        .unwrap();
    assert_eq!(ints(&value), [[11, 22]]);
    let metrics = metrics(&server);
    assert!(
        metrics.contains(
            r#"wasmrpc_calls_total{tenant="default",method="spin",code="DEADLINE_EXCEEDED"} 1"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_call_past_the_host_deadline_is_deadline_exceeded_when_the_client_sets_none() {
    let server = server_with_methods(&["--default-deadline-ms", "300"]);
    // Zero: no client-side timeout at all, so only the host can end the call.
    let client = Client::create("http", &server.url, "sdk-host-deadline", Duration::ZERO)
        .await
        .unwrap();
    let started = Instant::now();
    let err = client
        .call_async("spin", spin_arg(), None, None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(
        err.message().contains("deadline of 300 ms"),
        "the host's message: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let value = client
        .call_async("addition", a_and_b(), None, None)
        .await
        .unwrap();
    assert_eq!(ints(&value), [[11, 22]]);
}

#[tokio::test]
async fn an_unknown_method_is_not_found_and_lists_the_registered_methods() {
    let server = server_with_methods(&[]);
    let client = Client::create(
        "http",
        &server.url,
        "sdk-not-found",
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let (code, message) = client
        .call("nope", a_and_b(), None, None)
        .get_error()
        .await
        .unwrap();
    assert_eq!(code, Code::NotFound);
    assert!(message.contains("`nope`"), "{message}");
    assert!(
        message.contains("registered methods: addition, spin"),
        "{message}"
    );

    let err = client.method("nope").unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        err.message().contains("registered methods: addition, spin"),
        "{err}"
    );
}

#[tokio::test]
async fn a_wrong_dtype_is_refused_before_anything_is_sent() {
    let server = server_with_methods(&[]);
    let client = Client::create("http", &server.url, "sdk-dtype", Duration::from_secs(30))
        .await
        .unwrap();
    let floats = vec![
        Tensor::vector(vec![1f32, 2.0]),
        Tensor::vector(vec![3f32, 4.0]),
    ];
    let addition = client.method("addition").unwrap();

    let err = addition.call_blocking(floats.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("expected int32, got float32"),
        "{err}"
    );
    let (code, _) = addition.call(floats.clone()).get_error().await.unwrap();
    assert_eq!(code, Code::InvalidArgument);
    let (code, _) = client
        .call("addition", floats, None, None)
        .get_error()
        .await
        .unwrap();
    assert_eq!(code, Code::InvalidArgument);
    let err = addition
        .call_blocking(vec![Tensor::scalar(1i32)])
        .await
        .unwrap_err();
    assert!(err.message().contains("takes 2 argument(s)"), "{err}");

    // Nothing reached the server: it counted no call of `addition`…
    let before = metrics(&server);
    assert!(!before.contains(r#"method="addition""#), "{before}");
    // …while a good call is counted, so the check above could have failed.
    addition.call_blocking(a_and_b()).await.unwrap();
    let after = metrics(&server);
    assert!(
        after.contains(r#"wasmrpc_calls_total{tenant="default",method="addition",code="OK"} 1"#),
        "{after}"
    );
}

#[tokio::test]
async fn an_unsupported_rpc_layer_is_invalid_argument_listing_the_supported_ones() {
    let err = Client::create(
        "carrier-pigeon",
        "127.0.0.1:8080",
        "sdk",
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("`carrier-pigeon`"), "{err}");
    assert!(
        err.message()
            .contains("supported layers: http, https, grpc, grpcs"),
        "{err}"
    );
}

#[tokio::test]
async fn creating_a_client_against_a_port_nobody_listens_on_is_unavailable() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let err = Client::create(
        "http",
        &format!("127.0.0.1:{port}"),
        "sdk",
        Duration::from_secs(5),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
}

#[tokio::test]
async fn creating_a_client_against_a_server_that_never_answers_is_deadline_exceeded() {
    // The kernel accepts the connection; nobody ever reads or answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap().to_string();
    let started = Instant::now();
    let err = Client::create("http", &address, "sdk", Duration::from_millis(300))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(silent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_over_one_client_all_succeed() {
    let server = server_with_methods(&[]);
    let client = Client::create("http", &server.url, "sdk-many", Duration::from_secs(60))
        .await
        .unwrap();
    let started = Instant::now();
    let pending: Vec<_> = (0..1000i32)
        .map(|i| {
            let args = vec![Tensor::vector(vec![i, 1]), Tensor::vector(vec![1000, i])];
            client.call("addition", args, None, None)
        })
        .collect();
    for (i, result) in (0..1000i32).zip(&pending) {
        let value = result.get_value().await.unwrap();
        assert_eq!(ints(&value), [[i + 1000, i + 1]]);
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "{took:?}");

    // All of them went over a single HTTP/2 connection.
    #[cfg(target_os = "linux")]
    {
        let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(connections_to(port), 1);
    }
    let metrics = metrics(&server);
    assert!(
        metrics
            .contains(r#"wasmrpc_calls_total{tenant="default",method="addition",code="OK"} 1000"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn output_specs_that_do_not_match_are_an_error_and_matching_ones_pass() {
    let server = server_with_methods(&[]);
    let client = Client::create("http", &server.url, "sdk-specs", Duration::from_secs(30))
        .await
        .unwrap();
    for matching in [
        int32_spec(None),
        int32_spec(Some(vec![Dim::Dynamic])),
        int32_spec(Some(vec![Dim::Fixed(2)])),
    ] {
        let value = client
            .call_async("addition", a_and_b(), Some(&[matching]), None)
            .await
            .unwrap();
        assert_eq!(ints(&value), [[11, 22]]);
    }

    let float = TensorSpec {
        dtype: DType::Float32,
        ..int32_spec(None)
    };
    let (code, message) = client
        .call("addition", a_and_b(), Some(vec![float]), None)
        .get_error()
        .await
        .unwrap();
    assert_eq!(code, Code::InvalidArgument);
    assert!(message.contains("expected float32, got int32"), "{message}");

    let wrong_shape = int32_spec(Some(vec![Dim::Fixed(3)]));
    let err = client
        .call_async("addition", a_and_b(), Some(&[wrong_shape]), None)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("expected shape [3]"), "{err}");

    let two = [int32_spec(None), int32_spec(None)];
    let err = client
        .call_async("addition", a_and_b(), Some(&two), None)
        .await
        .unwrap_err();
    assert!(
        err.message().contains("2 specs but the method returned 1"),
        "{err}"
    );
}

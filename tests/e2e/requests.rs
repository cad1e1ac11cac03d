//! Malformed requests and bad tensors: INVALID_ARGUMENT naming the argument, fast, nothing run.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{TestServer, register, tensor};

fn softmax_server() -> TestServer {
    let server = TestServer::start(&["--header-timeout-s", "1"]);
    register(&server.http(), "softmax", "example-softmax", None);
    register(&server.http(), "add", "example-add", Some("add"));
    server
}

fn call_raw(server: &TestServer, name: &str, body: &str) -> crate::support::http::Response {
    server.http().request(
        "POST",
        &format!("/v1/methods/{name}/call"),
        Some(body.as_bytes()),
    )
}

fn assert_invalid(r: &crate::support::http::Response, expect: &[&str]) {
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    for e in expect {
        assert!(
            r.message().contains(e),
            "expected `{e}` in: {}",
            r.message()
        );
    }
}

#[test]
fn values_that_do_not_fit_the_dtype_are_refused_naming_the_argument() {
    let server = softmax_server();
    for (dtype, value) in [("float32", "1e39"), ("float32", "1e400")] {
        let body = format!(r#"{{"args":[{{"dtype":"{dtype}","shape":[1],"data":[{value}]}}]}}"#);
        assert_invalid(
            &call_raw(&server, "softmax", &body),
            &["argument 0 (`x`)", value],
        );
    }
    let body = r#"{"args":[{"dtype":"int32","shape":[1],"data":[1]},{"dtype":"int32","shape":[1],"data":[2147483648]}]}"#;
    assert_invalid(
        &call_raw(&server, "add", body),
        &["argument 1 (`b`)", "2147483648"],
    );
    // NaN is not JSON; spelled as a string it is a float value.
    let body = r#"{"args":[{"dtype":"float32","shape":[1],"data":[NaN]}]}"#;
    assert_invalid(&call_raw(&server, "softmax", body), &[]);
}

#[test]
fn shapes_that_do_not_match_the_data_are_refused_without_allocating() {
    let server = softmax_server();
    let http = server.http();
    let r = http.call(
        "softmax",
        json!([tensor("float32", &[2, 4], json!([1, 2, 3, 4, 5, 6, 7]))]),
        0,
    );
    assert_invalid(&r, &["argument 0", "8 elements, got 7"]);
    let r = call_raw(
        &server,
        "softmax",
        r#"{"args":[{"dtype":"float32","shape":[-2],"data":[]}]}"#,
    );
    assert_invalid(&r, &["negative"]);
    let r = call_raw(
        &server,
        "softmax",
        r#"{"args":[{"dtype":"float32","shape":[4294967296,4294967296,4294967296],"data":[1]}]}"#,
    );
    assert_invalid(&r, &["argument 0"]);
    let started = Instant::now();
    let r = call_raw(
        &server,
        "softmax",
        r#"{"args":[{"dtype":"float32","shape":[1000000000000],"data":[1]}]}"#,
    );
    assert_invalid(&r, &["argument 0"]);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn wrong_dtype_or_arity_is_refused_naming_the_argument() {
    let server = softmax_server();
    let http = server.http();
    let r = http.call("softmax", json!([tensor("int32", &[2], json!([1, 2]))]), 0);
    assert_invalid(&r, &["argument 0 (`x`)", "float32", "int32"]);
    let r = http.call("add", json!([tensor("int32", &[2], json!([1, 2]))]), 0);
    assert_invalid(&r, &["2 argument"]);
}

#[test]
fn deeply_nested_json_is_refused_fast() {
    let server = softmax_server();
    let body = format!(
        r#"{{"args":[{}{}]}}"#,
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let started = Instant::now();
    assert_invalid(&call_raw(&server, "softmax", &body), &[]);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.http().get("/healthz").status, 200);
}

#[test]
fn unknown_methods_and_routes_are_not_found_in_json() {
    let server = softmax_server();
    let http = server.http();
    let r = http.call("nope", json!([]), 0);
    assert_eq!(r.status, 404);
    assert_eq!(r.code(), "NOT_FOUND");
    let r = http.get("/v1/nothing-here");
    assert_eq!(r.status, 404);
    assert_eq!(r.code(), "NOT_FOUND");
}

#[test]
fn slow_headers_are_cut_off_at_the_header_timeout() {
    let server = softmax_server();
    let mut s = server.http().connect();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "connection held for {took:?}"
    );
    assert!(
        buf.is_empty() || String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
}

#[test]
fn http2_prior_knowledge_and_metrics_work() {
    let server = softmax_server();
    let url = server.url.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client =
            wasmrpc_client::Client::create("http", &url, "e2e-h2", Duration::from_secs(10))
                .await
                .unwrap();
        let x = wasmrpc_client::Tensor::from_vec([2], vec![0f32, 0.0]).unwrap();
        let out = client
            .call_async("softmax", vec![x], None, None)
            .await
            .unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
    });
    let response = server.http().get("/metrics");
    assert!(
        response
            .headers
            .iter()
            .any(|(k, v)| k == "content-type" && v.starts_with("text/plain"))
    );
    let metrics = String::from_utf8(response.body).unwrap();
    assert!(
        metrics.contains(r#"wasmrpc_calls_total{tenant="default",method="softmax",code="OK"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("wasmrpc_call_duration_seconds_bucket"));
    // The client's name shows in the metrics (create's listing plus the call).
    assert!(
        metrics.contains(r#"wasmrpc_client_requests_total{client="e2e-h2"} 2"#),
        "{metrics}"
    );
}

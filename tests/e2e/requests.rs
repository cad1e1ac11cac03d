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
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
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

/// Sends `method path` with headers announcing a 100-byte body, then trickles the body one byte a
/// second (for at most 10 s, then goes quiet); returns how long after the headers the server
/// answered or closed the connection, and what it sent.
fn trickle_body(http: &crate::support::Http, method: &str, path: &str) -> (Duration, String) {
    let mut s = http.connect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n"
    )
    .unwrap();
    let started = Instant::now();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let mut writer = s.try_clone().unwrap();
    let trickler = std::thread::spawn(move || {
        for _ in 0..10 {
            // One byte a second, until the reader is done (its sender drops) or the server hangs up.
            if writer.write_all(b" ").is_err() {
                return;
            }
            if !matches!(
                stopped.recv_timeout(Duration::from_secs(1)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            ) {
                return;
            }
        }
    });
    let mut buf = Vec::new();
    // An error (a reset after the answer) still leaves what was read in `buf`.
    let _ = s.read_to_end(&mut buf);
    let took = started.elapsed();
    drop(stop);
    trickler.join().unwrap();
    (took, String::from_utf8_lossy(&buf).into_owned())
}

/// The body timeout bounds the whole body, not the silence between its bytes: a byte a second
/// against `--body-timeout-s 2` is answered 408 DEADLINE_EXCEEDED and disconnected after about
/// 2 s, for a call and an upload alike, and the server keeps serving.
#[test]
fn a_trickled_body_is_cut_off_at_the_body_timeout() {
    let server = TestServer::start(&["--body-timeout-s", "2"]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    let trickled: Vec<_> = [
        ("POST", "/v1/methods/add/call"),
        ("PUT", "/v1/methods/trickled"),
    ]
    .into_iter()
    .map(|(method, path)| {
        let http = http.clone();
        std::thread::spawn(move || (method, trickle_body(&http, method, path)))
    })
    .collect();
    for t in trickled {
        let (method, (took, answer)) = t.join().unwrap();
        // The deadline counts from when the server starts reading the body; a debug build on a
        // shared machine gets slack, but a timer reset by every byte would run to 10 s and more.
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(8),
            "{method}: connection held for {took:?}"
        );
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "{method}: expected a 408 answer, got {answer:?}"
        );
        assert!(answer.contains("DEADLINE_EXCEEDED"), "{method}: {answer}");
        assert!(
            answer.contains("body read timeout of 2 s"),
            "{method}: {answer}"
        );
    }
    // Nothing was stored from the cut-off upload, and the server still serves.
    assert_eq!(http.get("/v1/methods/trickled").status, 404);
    let r = http.call(
        "add",
        json!([
            tensor("int32", &[1], json!([1])),
            tensor("int32", &[1], json!([2]))
        ]),
        0,
    );
    assert_eq!(r.json()["outputs"][0]["data"], json!([3]));
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
    // Triton's names, for dashboards written for Triton.
    assert!(
        metrics.contains(
            r#"nv_inference_request_success{model="softmax",version="1",tenant="default"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains("nv_inference_compute_infer_duration_us{model=\"softmax\""));
    // The client's name shows in the metrics (create's listing plus the call).
    assert!(
        metrics.contains(r#"wasmrpc_client_requests_total{client="e2e-h2"} 2"#),
        "{metrics}"
    );
}

#[test]
fn connections_past_the_cap_get_a_fast_503_and_the_server_recovers() {
    let server = TestServer::start(&["--max-connections", "4"]);
    let http = server.http();
    // Four keep-alive connections hold every slot, each proven to hold one by a served request
    // (a connection the readiness check used may still be closing, and a connection accepted
    // while it does is refused: such a one is opened again).
    let idle: Vec<_> = (0..4).map(|_| hold_a_connection_slot(&http)).collect();
    let started = Instant::now();
    let refused = match http.try_request("GET", "/healthz", None) {
        Ok(r) => {
            assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.code(), "UNAVAILABLE");
            true
        }
        // The server may hang up before the request is even written: also a refusal.
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
    };
    assert!(refused, "a fifth connection was served with four open");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the refusal took {:?}",
        started.elapsed()
    );
    drop(idle);
    // Slots come back as the idle connections close.
    let started = Instant::now();
    loop {
        if let Ok(r) = http.try_request("GET", "/healthz", None)
            && r.status == 200
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the slots never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A keep-alive connection that the server has served a request on, so it holds one of the
/// connection cap's slots until dropped. Retried for up to 10 s while the cap refuses it.
fn hold_a_connection_slot(http: &crate::support::Http) -> std::net::TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = http.connect();
        if stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .and_then(|()| read_head(&mut stream))
            .is_ok_and(|head| head.starts_with("HTTP/1.1 200"))
        {
            return stream;
        }
        assert!(
            Instant::now() < deadline,
            "no connection slot came free within 10 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status line and headers of a response on a connection that stays open.
fn read_head(stream: &mut std::net::TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// CPU seconds (user + system) from a `/proc/.../stat` line (fields 14 and 15, in clock ticks).
fn cpu_seconds(stat_path: &str) -> f64 {
    let stat = std::fs::read_to_string(stat_path).expect("reading /proc");
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// The HTTP/2 "rapid reset" pattern (CVE-2023-44487): open streams and reset them at once, as fast
/// as possible. The server must close the connection (GOAWAY) rather than keep paying for each
/// stream, spend no more CPU than the client, and keep serving.
#[tokio::test(flavor = "current_thread")]
async fn rapid_reset_streams_cost_the_server_no_more_than_the_client() {
    let server = TestServer::start(&[]);
    register(&server.http(), "add", "example-add", Some("add"));
    let authority = server.url.trim_start_matches("http://").to_owned();
    let server_stat = format!("/proc/{}/stat", server.pid());
    let (server_before, client_before) = (
        cpu_seconds(&server_stat),
        cpu_seconds("/proc/thread-self/stat"),
    );
    let tcp = tokio::net::TcpStream::connect(&authority).await.unwrap();
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(connection);
    let started = Instant::now();
    let mut sent = 0u32;
    let mut ended = None;
    while sent < 20_000 && started.elapsed() < Duration::from_secs(20) {
        client = match client.ready().await {
            Ok(c) => c,
            Err(e) => {
                ended = Some(e);
                break;
            }
        };
        let request = http::Request::post(format!("http://{authority}/v1/methods/add/call"))
            .body(())
            .unwrap();
        match client.send_request(request, false) {
            Ok((_response, mut stream)) => {
                stream.send_reset(h2::Reason::CANCEL);
                sent += 1;
            }
            Err(e) => {
                ended = Some(e);
                break;
            }
        }
        if sent.is_multiple_of(64) {
            tokio::task::yield_now().await;
        }
    }
    // Let the frames reach the server and the connection wind down.
    let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let server_cpu = cpu_seconds(&server_stat) - server_before;
    let client_cpu = cpu_seconds("/proc/thread-self/stat") - client_before;
    println!(
        "rapid reset: {sent} streams opened and reset; server CPU {server_cpu:.2} s, client CPU \
         {client_cpu:.2} s; ended by {ended:?}"
    );
    // The server, not the client, ended it: GOAWAY with ENHANCE_YOUR_CALM, or (when the client
    // was still writing as the server hung up) the closed connection.
    let by_server = ended.as_ref().is_some_and(|e| {
        e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) || e.is_io() || e.is_go_away()
    });
    assert!(by_server && sent < 20_000, "{ended:?} after {sent} streams");
    assert!(
        server_cpu <= client_cpu * 2.0 + 0.5,
        "the server spent {server_cpu:.2} s of CPU on {sent} reset streams, the client {client_cpu:.2} s"
    );
    let http = server.http();
    let healthy = tokio::task::spawn_blocking(move || {
        http.call(
            "add",
            json!([
                tensor("int32", &[1], json!([1])),
                tensor("int32", &[1], json!([2]))
            ]),
            0,
        )
        .status
    })
    .await
    .unwrap();
    assert_eq!(healthy, 200);
}

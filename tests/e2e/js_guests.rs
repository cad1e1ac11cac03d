//! Functions written in JavaScript with the guest SDK (`guest-sdk/js`), built by `wasmrpc build`
//! with componentize-js (bundled by esbuild, its default WASI 0.2 imports, `wasi:http` among them),
//! uploaded to the real server over HTTP and called with JSON: matmul gives its Rust twin's
//! answers, every dtype round-trips, thrown errors arrive with their codes, and hostile guests are
//! stopped or refused inside the sandbox while their calls answer cleanly.
//!
//! One server per test: each upload of a new component compiles a JavaScript engine.

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::json;

use crate::support::source_guests::{
    assert_ends_at_its_deadline, assert_output, dtype_edges, register_source, said, string_scalar,
};
use crate::support::{TestServer, outputs, register, scalar_f32, tensor};

#[test]
fn javascript_functions_answer_as_their_rust_twins_for_every_dtype_and_error() {
    let server = TestServer::start(&[]);
    let http = server.http();

    register_source(&http, "examples/js/matmul/app.js", &["matmul"]);
    register(&http, "matmul_rust", "example-matmul", None);
    let a = tensor("float32", &[2, 3], json!([1, 2, 3, 4, 5, 6]));
    let b = tensor("float32", &[3, 2], json!([0.5, -1, 2, 0.25, "Infinity", 3]));
    let js = outputs(&http.call("matmul", json!([a.clone(), b.clone()]), 0));
    let rust = outputs(&http.call("matmul_rust", json!([a.clone(), b]), 0));
    assert_eq!(js, rust, "matmul: JavaScript and Rust disagree");
    let r = http.call("matmul", json!([a.clone(), a]), 0);
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());
    assert!(
        r.message().contains("inner dimensions differ"),
        "{}",
        r.message()
    );

    // Every dtype, decoded into the dtype's typed array inside the guest and encoded back.
    let echo = "examples/js/echo/app.js";
    let mut names: Vec<String> = dtype_edges()
        .iter()
        .map(|(dtype, _, _)| format!("echo_{dtype}"))
        .collect();
    names.push("echo_bytes".into());
    let kinds = [
        "sdk_out_of_range",
        "type_error",
        "range_error",
        "plain_error",
        "string",
    ];
    names.extend(kinds.iter().map(|k| format!("fail_{k}")));
    names.push("shout".into());
    register_source(
        &http,
        echo,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for (dtype, shape, data) in dtype_edges() {
        let r = http.call(
            &format!("echo_{dtype}"),
            json!([tensor(dtype, &shape, data.clone())]),
            0,
        );
        assert_output(&r, dtype, &shape, &data, dtype);
    }
    let raw = json!({"dtype": "string", "shape": [2], "data_b64": "AgAAAP/+AQAAAIA="});
    let r = http.call("echo_bytes", json!([raw]), 0);
    assert_eq!(
        outputs(&r)[0]["data_b64"],
        "AgAAAP/+AQAAAIA=",
        "{}",
        r.json()
    );
    assert_output(
        &http.call(
            "shout",
            json!([tensor("string", &[2], json!(["héllo", "straße"]))]),
            0,
        ),
        "string",
        &[2],
        &json!(["HÉLLO", "STRASSE"]),
        "shout",
    );

    // What a method throws arrives as the documented code and message.
    for (kind, code, message) in [
        ("sdk_out_of_range", "OUT_OF_RANGE", "index 7 of 4"),
        ("type_error", "INVALID_ARGUMENT", "wants a matrix"),
        ("range_error", "INVALID_ARGUMENT", "k too large"),
        (
            "plain_error",
            "INTERNAL",
            "method fail_plain_error: Error: a bug",
        ),
        (
            "string",
            "INTERNAL",
            "a method threw a non-Error value: not an Error",
        ),
    ] {
        let r = http.call(&format!("fail_{kind}"), json!([]), 0);
        assert_eq!(r.code(), code, "{kind}: {}", r.message());
        assert!(r.message().contains(message), "{kind}: {}", r.message());
    }
}

/// A one-request HTTP server on loopback that answers `secret` to whoever connects; returns its
/// URL and whether anyone connected (checked by the caller after the guest tried).
fn bait_server() -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (told, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = told.send(());
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecret");
        }
    });
    (url, connected)
}

#[test]
fn hostile_javascript_guests_fail_inside_the_sandbox_and_their_calls_answer() {
    let server = TestServer::start(&["--default-deadline-ms", "10000"]);
    let http = server.http();
    register_source(
        &http,
        "tests/source-guests/js-hostile/app.js",
        &[
            "spin",
            "grow",
            "fetch_url",
            "environment",
            "clock_step",
            "sleep",
        ],
    );

    assert_ends_at_its_deadline(&http, "spin", scalar_f32(0.0), 700);

    // A timer waits in the host, where the epoch cannot stop it: the deadline still does.
    assert_ends_at_its_deadline(&http, "sleep", scalar_f32(3600.0), 700);

    let r = http.call("grow", json!([scalar_f32(0.0)]), 0);
    assert!(
        r.code() == "RESOURCE_EXHAUSTED",
        "{} {}",
        r.code(),
        r.message()
    );

    // fetch() to a server that is listening: the request is denied in the host, never sent.
    let (url, connected) = bait_server();
    let seen = said(&http, "fetch_url", string_scalar(&url));
    assert!(
        !seen.contains("secret") && !seen.starts_with("status"),
        "{seen}"
    );
    assert!(
        connected.recv_timeout(Duration::from_millis(200)).is_err(),
        "the guest's fetch reached the server"
    );
    for url in [
        "http://example.com/",
        "https://169.254.169.254/latest/meta-data/",
    ] {
        let seen = said(&http, "fetch_url", string_scalar(url));
        assert!(!seen.starts_with("status"), "{url}: {seen}");
    }

    let seen = said(&http, "environment", scalar_f32(0.0));
    assert!(!seen.contains("PATH") && !seen.contains("HOME"), "{seen}");

    // Both clocks move in steps of a millisecond or more.
    let r = http.call("clock_step", json!([scalar_f32(0.0)]), 0);
    let steps = outputs(&r)[0]["data"].clone();
    for step in steps.as_array().unwrap() {
        let ms = step.as_f64().unwrap();
        assert!(ms >= 1.0, "a clock stepped by {ms} ms: {steps}");
    }

    let r = http.call("environment", json!([scalar_f32(0.0)]), 0);
    assert_eq!(r.status, 200, "{}", r.message());
}

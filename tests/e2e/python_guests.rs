//! Functions written in Python with the guest SDK (`guest-sdk/python`), built by `wasmrpc build`
//! with componentize-py (its default WASI 0.2 imports and its own extra export), uploaded to the
//! real server over HTTP and called with JSON: the examples give their Rust twins' answers, every
//! dtype round-trips, every row of the error table arrives with its code, and hostile guests are
//! stopped or refused inside the sandbox while their calls answer cleanly.
//!
//! One server for all of it: each upload of a new component compiles it (seconds for a Python
//! runtime), and the several names of one component share one compile.

use serde_json::{Value, json};

use crate::support::source_guests::{
    assert_ends_at_its_deadline, assert_output, dtype_edges, register_source, said, string_scalar,
};
use crate::support::{TestServer, outputs, register, scalar_f32, tensor};

fn close(got: &[Value], want: &[Value]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| match (g.as_f64(), w.as_f64()) {
                (Some(g), Some(w)) => (g - w).abs() < 1e-6,
                _ => g == w,
            })
}

#[test]
fn python_functions_answer_as_their_rust_twins_for_every_dtype_and_error() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let (softmax, strings, dtypes, errors) = (
        "examples/python/softmax/app.py",
        "examples/python/strings/app.py",
        "examples/python/dtypes/app.py",
        "examples/python/errors/app.py",
    );

    // The examples next to their Rust twins, with the same arguments.
    register_source(&http, softmax, &["softmax"]);
    register(&http, "softmax_rust", "example-softmax", None);
    let signature = &http.get("/v1/methods/softmax").json()["signature"];
    assert_eq!(signature["inputs"][0]["dtype"], "float32", "{signature}");
    assert!(
        signature["doc"]
            .as_str()
            .unwrap()
            .starts_with("Softmax along the last axis"),
        "{signature}"
    );
    for x in [
        tensor("float32", &[2, 3], json!([1, 2, 3, 0, 0, 0])),
        tensor("float32", &[3], json!([1000, 1000, -1000])),
        tensor("float32", &[1, 4], json!([-1.5, 0.25, 3, "-Infinity"])),
    ] {
        let python = outputs(&http.call("softmax", json!([x.clone()]), 0));
        let rust = outputs(&http.call("softmax_rust", json!([x.clone()]), 0));
        assert_eq!(python[0]["shape"], rust[0]["shape"], "{x}");
        assert!(
            close(
                python[0]["data"].as_array().unwrap(),
                rust[0]["data"].as_array().unwrap()
            ),
            "softmax of {x}: Python {python:?}, Rust {rust:?}"
        );
    }
    let scalar = http.call("softmax", json!([scalar_f32(1.0)]), 0);
    assert_eq!(scalar.code(), "INVALID_ARGUMENT", "{}", scalar.message());
    assert!(
        scalar.message().contains("rank 1 or more"),
        "{}",
        scalar.message()
    );

    register_source(&http, strings, &["upper", "length"]);
    let words = tensor("string", &[2, 2], json!(["hello", "Wörld", "", "straße"]));
    assert_output(
        &http.call("upper", json!([words.clone()]), 0),
        "string",
        &[2, 2],
        &json!(["HELLO", "WÖRLD", "", "STRASSE"]),
        "upper",
    );
    assert_output(
        &http.call("length", json!([words]), 0),
        "int64",
        &[2, 2],
        &json!([5, 5, 0, 6]),
        "length",
    );

    // Every dtype, decoded into Python values inside the guest and encoded back.
    let names: Vec<String> = dtype_edges()
        .iter()
        .map(|(dtype, _, _)| format!("roundtrip_{dtype}"))
        .chain(["roundtrip_bytes".to_owned()])
        .collect();
    register_source(
        &http,
        dtypes,
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for (dtype, shape, data) in dtype_edges() {
        let r = http.call(
            &format!("roundtrip_{dtype}"),
            json!([tensor(dtype, &shape, data.clone())]),
            0,
        );
        assert_output(&r, dtype, &shape, &data, dtype);
    }
    // `bytes` takes any bytes: an element that is not UTF-8 comes back as it went, in base64.
    let raw = json!({"dtype": "string", "shape": [2], "data_b64": "AgAAAP/+AQAAAIA="});
    let r = http.call("roundtrip_bytes", json!([raw]), 0);
    assert_eq!(
        outputs(&r)[0]["data_b64"],
        "AgAAAP/+AQAAAIA=",
        "{}",
        r.json()
    );
    let not_utf8 = json!({"dtype": "string", "shape": [1], "data_b64": "AgAAAP/+"});
    let r = http.call("roundtrip_string", json!([not_utf8]), 0);
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());

    // Every row of the SDK's error table, raised inside the component, with its code and message.
    register_source(&http, errors, &["fail"]);
    for (kind, code, message) in [
        ("InvalidArgument", "INVALID_ARGUMENT", "bad value"),
        ("FailedPrecondition", "FAILED_PRECONDITION", "not now"),
        ("OutOfRange", "OUT_OF_RANGE", "past the end"),
        ("Unimplemented", "UNIMPLEMENTED", "later"),
        ("Internal", "INTERNAL", "a bug"),
        ("ResourceExhausted", "RESOURCE_EXHAUSTED", "too big"),
        ("NotFound", "NOT_FOUND", "no such row"),
        ("ValueError", "INVALID_ARGUMENT", "x must be positive"),
        ("TypeError", "INVALID_ARGUMENT", "not a number"),
        ("IndexError", "OUT_OF_RANGE", "list index out of range"),
        ("KeyError", "NOT_FOUND", "k"),
        (
            "NotImplementedError",
            "UNIMPLEMENTED",
            "NotImplementedError",
        ),
        ("MemoryError", "RESOURCE_EXHAUSTED", "MemoryError"),
        (
            "ZeroDivisionError",
            "INTERNAL",
            "ZeroDivisionError: division by zero",
        ),
    ] {
        let r = http.call("fail", json!([string_scalar(kind)]), 0);
        assert_eq!(r.code(), code, "{kind}: {}", r.message());
        assert!(r.message().contains(message), "{kind}: {}", r.message());
    }
    assert_output(
        &http.call("fail", json!([string_scalar("none")]), 0),
        "int8",
        &[1],
        &json!([1]),
        "fail(none)",
    );
}

#[test]
fn hostile_python_guests_fail_inside_the_sandbox_and_their_calls_answer() {
    let server = TestServer::start(&["--default-deadline-ms", "10000"]);
    let http = server.http();
    register_source(
        &http,
        "tests/source-guests/python-hostile/app.py",
        &[
            "spin",
            "grow",
            "read_file",
            "list_dir",
            "environment",
            "connect",
            "clock_step",
            "sleep",
        ],
    );

    // An infinite loop ends at its deadline.
    assert_ends_at_its_deadline(&http, "spin", scalar_f32(0.0), 700);

    // Sleeping in the host (a clock subscription, no wasm running for the epoch to stop) ends at
    // the deadline too.
    assert_ends_at_its_deadline(&http, "sleep", scalar_f32(3600.0), 700);

    // Memory growth stops at the per-call cap.
    let r = http.call("grow", json!([scalar_f32(0.0)]), 0);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "{}", r.message());

    // Files: nothing is there to read or list.
    for path in [
        "/etc/passwd",
        "/proc/self/environ",
        "../../etc/hostname",
        "app.py",
    ] {
        let seen = said(&http, "read_file", string_scalar(path));
        assert!(!seen.starts_with("read "), "{path}: {seen}");
        assert!(seen.contains("Error"), "{path}: {seen}");
    }
    for path in ["/", ".", "/etc"] {
        let seen = said(&http, "list_dir", string_scalar(path));
        assert!(
            !seen.contains("passwd") && !seen.contains("etc,"),
            "{path}: {seen}"
        );
    }

    // The environment is empty, whatever the server's is.
    let seen = said(&http, "environment", scalar_f32(0.0));
    assert!(seen.starts_with("env=[] "), "{seen}");
    for leaked in ["PATH", "HOME", "WASMRPC", "CARGO"] {
        assert!(!seen.contains(leaked), "{seen}");
    }

    // No connection leaves the sandbox (here refused before it reaches WASI: componentize-py's
    // CPython has no socket module; a JavaScript guest's fetch reaches the host's denial).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let seen = said(&http, "connect", string_scalar(&target));
    assert_ne!(seen, "connected", "{seen}");
    assert!(seen.contains("Error"), "{seen}");

    // The clocks move in coarse steps only: no finer than a millisecond.
    let r = http.call("clock_step", json!([scalar_f32(0.0)]), 0);
    let steps = outputs(&r)[0]["data"].clone();
    for step in steps.as_array().unwrap() {
        let ns = step.as_i64().unwrap();
        assert!(ns >= 1_000_000, "a clock stepped by {ns} ns: {steps}");
    }

    // And after all of it the server answers as before.
    let r = http.call("read_file", json!([string_scalar("/")]), 0);
    assert_eq!(r.status, 200, "{}", r.message());
}

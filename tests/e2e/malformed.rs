//! A component whose exports return values that break the canonical ABI: at upload the
//! uploader is told, fast, what is malformed and where, and nothing is registered; at call time
//! the caller gets INTERNAL naming the method and the fault, never the withheld host-fault text.
//! The components are written by hand (`support/handmade.rs`).

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::json;

use crate::support::handmade::{CallReturns, SignaturesFlaw, component};
use crate::support::{TestServer, outputs, tensor};

/// Far above the milliseconds a refusal takes, far below the 5 s `signatures()` deadline: on a
/// busy machine the compile alone can take a few hundred milliseconds.
const FAST: Duration = Duration::from_secs(2);

/// Each flaw, what wasmtime says of it, and where in the value it is.
const FLAWS: &[(SignaturesFlaw, &str, &str)] = &[
    (
        SignaturesFlaw::NameOutOfBounds,
        "string pointer/length out of bounds of memory",
        "[0].name",
    ),
    (
        SignaturesFlaw::NameNotUtf8,
        "invalid utf-8 sequence",
        "[0].name",
    ),
    (
        SignaturesFlaw::DtypeOutOfRange,
        "unexpected discriminant: 14",
        "[0].inputs[0].dtype",
    ),
    (
        SignaturesFlaw::ShapeOptionOutOfRange,
        "invalid option discriminant",
        "[0].inputs[0].shape",
    ),
    (
        SignaturesFlaw::ShapeListMisaligned,
        "list pointer is not aligned",
        "[0].inputs[0].shape",
    ),
];

fn x() -> serde_json::Value {
    tensor("float32", &[2], json!([1.0, 2.0]))
}

#[test]
fn a_handmade_component_with_nothing_malformed_registers_and_answers() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put("/v1/methods/m", &component("m", None, CallReturns::Outputs));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let sig = &r.json()["signature"];
    assert_eq!(sig["inputs"][0]["name"], "x", "{sig}");
    assert_eq!(sig["inputs"][0]["shape"], json!([2]), "{sig}");
    let r = http.call("m", json!([x()]), 0);
    assert_eq!(
        outputs(&r),
        vec![tensor("float32", &[2], json!([1.5, 2.5]))]
    );
}

/// Upload a component with `flaw` as `m`: refused fast as INVALID_ARGUMENT saying its
/// signatures are malformed, and nothing registered. Returns the message.
fn refused_fast(http: &crate::support::Http, flaw: SignaturesFlaw) -> String {
    let bytes = component("m", Some(flaw), CallReturns::Outputs);
    let started = Instant::now();
    let r = http.put("/v1/methods/m", &bytes);
    let took = started.elapsed();
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 400, "{flaw:?}: {body}");
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{flaw:?}: {body}");
    let message = r.message();
    assert!(
        message.contains("the component's signatures() returned a malformed value"),
        "{flaw:?}: {message}"
    );
    assert!(!message.contains("request id"), "{flaw:?}: {message}");
    assert!(took < FAST, "{flaw:?} took {took:?}");
    // Nothing registered: no method, no version.
    assert_eq!(http.get("/v1/methods").json()["methods"], json!([]));
    assert_eq!(http.get("/v1/methods/m").status, 404, "{flaw:?}");
    message
}

#[test]
fn signatures_returning_a_malformed_value_are_refused_fast_naming_what_is_wrong() {
    let server = TestServer::start(&[]);
    let http = server.http();
    for &(flaw, problem, place) in FLAWS {
        let message = refused_fast(&http, flaw);
        for expect in [problem, &format!("(at `{place}`)")] {
            assert!(
                message.contains(expect),
                "{flaw:?}: `{expect}` in: {message}"
            );
        }
    }
}

/// The return area's own pointer is checked by wasmtime before any part of the value is read:
/// still the component's fault, said as such, with no place inside the value to name.
#[test]
fn signatures_whose_return_area_is_out_of_bounds_or_misaligned_are_refused_fast() {
    let server = TestServer::start(&[]);
    let http = server.http();
    for (flaw, problem) in [
        (
            SignaturesFlaw::ReturnAreaOutOfBounds,
            "pointer out of bounds of memory",
        ),
        (SignaturesFlaw::ReturnAreaMisaligned, "not aligned"),
    ] {
        let message = refused_fast(&http, flaw);
        assert!(message.contains(problem), "{flaw:?}: {message}");
    }
}

#[test]
fn the_kserve_repository_load_refuses_malformed_signatures_as_v1_does() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let bytes = component(
        "m",
        Some(SignaturesFlaw::DtypeOutOfRange),
        CallReturns::Outputs,
    );
    let body = json!({"parameters": {
        "file:1/model.wasm": base64::engine::general_purpose::STANDARD.encode(&bytes)
    }});
    let started = Instant::now();
    let r = http.post_json("/v2/repository/models/m/load", &body);
    let took = started.elapsed();
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("x-wasmrpc-code"), Some("INVALID_ARGUMENT"));
    let message = r.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.contains("the component's signatures() returned a malformed value")
            && message.contains("unexpected discriminant: 14")
            && message.contains("[0].inputs[0].dtype"),
        "{message}"
    );
    assert!(took < FAST, "took {took:?}");
    let index = http.request("POST", "/v2/repository/index", None);
    assert_eq!(index.json(), json!([]), "nothing was registered");
    assert_eq!(http.get("/v1/methods/m").status, 404);
}

/// Register `m` returning `returns` from `call`, then call it `times` times: each answer is
/// INTERNAL naming the method and its malformed value, never the server's withheld text, and the
/// server still answers after. Returns the last message.
fn call_faults(returns: CallReturns, times: usize) -> String {
    let server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put("/v1/methods/m", &component("m", None, returns));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut message = String::new();
    for _ in 0..times {
        let r = http.call("m", json!([x()]), 0);
        assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.code(), "INTERNAL");
        message = r.message();
        assert!(
            message.contains("method `m` returned a malformed value"),
            "{message}"
        );
        assert!(!message.contains("the server's log"), "{message}");
    }
    assert_eq!(http.get("/healthz").status, 200);
    message
}

#[test]
fn a_call_returning_a_malformed_value_is_internal_naming_the_method_and_the_fault() {
    // Twice: the first call's fault leaves nothing behind for the next.
    let message = call_faults(CallReturns::DataOutOfBounds, 2);
    assert!(
        message.contains("list pointer/length out of bounds of memory")
            && message.contains("(at `outputs[0].data`)"),
        "{message}"
    );
}

/// A `call` whose return area itself lies outside memory: wasmtime checks that before any part of
/// the value is read, and it is still the function's bug, named as such.
#[test]
fn a_call_whose_return_area_is_out_of_bounds_is_internal_naming_the_method() {
    let message = call_faults(CallReturns::ReturnAreaOutOfBounds, 1);
    assert!(
        message.contains("pointer out of bounds of memory"),
        "{message}"
    );
}

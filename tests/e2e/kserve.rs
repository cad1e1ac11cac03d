//! The Open Inference Protocol (KServe v2) routes against the real server: metadata, config,
//! infer by input name, output selection, the deadline parameter, and errors in the protocol's
//! `{"error": "..."}` shape with the canonical code beside it.

use serde_json::{Value, json};

use crate::support::{Http, TestServer, guest, http::Response};
use crate::tenants::Keyed;

fn v2_server() -> (TestServer, Http) {
    server_with(&[
        ("add", "example-add", "add"),
        ("spin", "guest-hostile", "spin"),
        ("upper", "example-strings", "upper"),
    ])
}

/// A server with `methods` registered, each `(name, guest package, export)`.
pub(crate) fn server_with(methods: &[(&str, &str, &str)]) -> (TestServer, Http) {
    let server = TestServer::start(&[]);
    let http = server.http();
    for (name, package, export) in methods {
        let r = http.put(
            &format!("/v1/methods/{name}?export={export}"),
            &guest(package),
        );
        assert!(
            r.status < 300,
            "{name}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    (server, http)
}

/// A protocol error: the status, `{"error": "<string>"}` and nothing else, the code beside it.
fn assert_v2_error(r: &Response, status: u16, code: &str, contains: &str) {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    let object = body.as_object().expect("an object");
    assert_eq!(object.len(), 1, "only `error`: {body}");
    let message = body["error"].as_str().expect("`error` is a string");
    assert!(message.contains(contains), "`{contains}` in: {message}");
    assert_eq!(r.header("x-wasmrpc-code"), Some(code));
}

fn int32(name: &str, data: Value) -> Value {
    let n = data.as_array().map_or(1, Vec::len);
    json!({"name": name, "datatype": "INT32", "shape": [n], "data": data})
}

#[test]
fn server_and_model_metadata_speak_the_protocol() {
    let (_server, http) = v2_server();
    let r = http.get("/v2");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["name"], "wasmrpc");
    assert!(r.json()["extensions"].is_array());
    assert_eq!(http.get("/v2/health/live").status, 200);
    assert_eq!(http.get("/v2/health/ready").status, 200);

    let r = http.get("/v2/models/add");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json(),
        json!({
            "name": "add", "versions": ["1"], "platform": "wasmrpc_wasm",
            "inputs": [
                {"name": "a", "datatype": "INT32", "shape": [-1]},
                {"name": "b", "datatype": "INT32", "shape": [-1]}
            ],
            "outputs": [{"name": "output", "datatype": "INT32", "shape": [-1]}]
        })
    );
    assert_eq!(http.get("/v2/models/add/versions/1").json(), r.json());
    assert_eq!(http.get("/v2/models/add/ready").status, 200);
    assert_eq!(http.get("/v2/models/add/versions/1/ready").status, 200);
    let config = http.get("/v2/models/add/config").json();
    assert_eq!(config["max_batch_size"], 0);
    assert_eq!(config["input"][0]["data_type"], "TYPE_INT32");
    assert_eq!(config["output"][0]["dims"], json!([-1]));
    let strings = http.get("/v2/models/upper/config").json();
    assert!(
        strings.to_string().contains("TYPE_STRING"),
        "BYTES is TYPE_STRING in a config: {strings}"
    );
}

#[test]
fn infer_matches_inputs_by_name_and_names_its_outputs() {
    let (_server, http) = v2_server();
    // Inputs in another order than the signature's; nested data is row-major.
    let r = http.post_json(
        "/v2/models/add/infer",
        &json!({
            "id": "req-7",
            "parameters": {"custom": true},
            "inputs": [
                {"name": "b", "datatype": "INT32", "shape": [2, 1], "data": [1, 2]},
                {"name": "a", "datatype": "INT32", "shape": [2, 1], "data": [[10], [20]]}
            ]
        }),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json(),
        json!({
            "model_name": "add", "model_version": "1", "id": "req-7",
            "outputs": [{"name": "output", "datatype": "INT32", "shape": [2, 1], "data": [11, 22]}]
        })
    );
    // The same through the versioned route, asking for the output by name.
    let r = http.post_json(
        "/v2/models/add/versions/1/infer",
        &json!({
            "inputs": [int32("a", json!([1])), int32("b", json!([2]))],
            "outputs": [{"name": "output"}]
        }),
    );
    assert_eq!(r.json()["outputs"][0]["data"], json!([3]));
    assert!(r.json().get("id").is_none(), "no id when none was sent");
    // BYTES in and out, as strings.
    let r = http.post_json(
        "/v2/models/upper/infer",
        &json!({"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2], "data": ["ab", "é"]}]}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["outputs"][0]["datatype"], "BYTES");
    assert_eq!(r.json()["outputs"][0]["data"], json!(["AB", "É"]));
}

#[test]
fn bad_requests_get_protocol_errors_naming_what_is_wrong() {
    let (_server, http) = v2_server();
    let add = |inputs: Value| http.post_json("/v2/models/add/infer", &json!({ "inputs": inputs }));
    let r = http.post_json("/v2/models/nope/infer", &json!({"inputs": []}));
    assert_v2_error(&r, 404, "NOT_FOUND", "nope");
    assert_v2_error(&http.get("/v2/models/nope"), 404, "NOT_FOUND", "nope");
    assert_v2_error(&http.get("/v2/models/nope/ready"), 404, "NOT_FOUND", "nope");
    assert_v2_error(
        &http.get("/v2/models/add/versions/9"),
        404,
        "NOT_FOUND",
        "9",
    );
    assert_v2_error(
        &add(json!([int32("a", json!([1]))])),
        400,
        "INVALID_ARGUMENT",
        "missing input `b`",
    );
    assert_v2_error(
        &add(json!([
            int32("a", json!([1])),
            int32("b", json!([1])),
            int32("c", json!([1]))
        ])),
        400,
        "INVALID_ARGUMENT",
        "unknown input `c`",
    );
    assert_v2_error(
        &add(json!([
            {"name": "a", "datatype": "FP32", "shape": [1], "data": [1.5]},
            int32("b", json!([1]))
        ])),
        400,
        "INVALID_ARGUMENT",
        "expected int32, got float32",
    );
    assert_v2_error(
        &add(json!([
            {"name": "a", "datatype": "INT32", "shape": [3], "data": [1, 2]},
            int32("b", json!([1]))
        ])),
        400,
        "INVALID_ARGUMENT",
        "input `a`",
    );
    assert_v2_error(
        &add(json!([
            {"name": "a", "datatype": "INT32", "shape": [-1], "data": [1]},
            int32("b", json!([1]))
        ])),
        400,
        "INVALID_ARGUMENT",
        "negative",
    );
    assert_v2_error(
        &add(json!([
            {"name": "a", "datatype": "FLOAT", "shape": [1], "data": [1]},
            int32("b", json!([1]))
        ])),
        400,
        "INVALID_ARGUMENT",
        "unknown datatype `FLOAT`",
    );
    assert_v2_error(
        &http.request("POST", "/v2/models/add/infer", Some(b"{not json")),
        400,
        "INVALID_ARGUMENT",
        "not a valid inference request",
    );
    let r = http.post_json(
        "/v2/models/add/infer",
        &json!({
            "inputs": [int32("a", json!([1])), int32("b", json!([1]))],
            "outputs": [{"name": "logits"}]
        }),
    );
    assert_v2_error(&r, 400, "INVALID_ARGUMENT", "unknown output `logits`");
    // The router's own answers under /v2 keep the protocol's shape: no such route, wrong verb.
    assert_v2_error(
        &http.get("/v2/models/add/no-such-thing"),
        404,
        "NOT_FOUND",
        "no route",
    );
    assert_v2_error(
        &http.request("DELETE", "/v2/models/add", None),
        405,
        "UNIMPLEMENTED",
        "DELETE",
    );
    // ...while v1 keeps its own.
    assert!(http.get("/v1/nothing").json()["error"]["code"].is_string());
}

/// `parameters.timeout` is the call's deadline in microseconds, as Triton sends it.
#[test]
fn the_timeout_parameter_is_the_deadline_in_microseconds() {
    let (_server, http) = v2_server();
    let started = std::time::Instant::now();
    let r = http.post_json(
        "/v2/models/spin/infer",
        &json!({
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [], "data": [1.0]}],
            "parameters": {"timeout": 200_000}
        }),
    );
    assert_v2_error(&r, 504, "DEADLINE_EXCEEDED", "200 ms");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

/// Keys apply as on v1: another tenant's model is the same 404 as a missing one, and no key is
/// a 401 in the protocol's shape, with `WWW-Authenticate`.
#[test]
fn v2_routes_are_scoped_to_the_callers_tenant() {
    let keyed = Keyed::start(&[]);
    let (alice, _) = keyed.tenant("alice");
    let (bob, _) = keyed.tenant("bob");
    let r = alice.put("/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201);
    let body = json!({"inputs": [int32("a", json!([1])), int32("b", json!([2]))]});
    assert_eq!(
        alice.post_json("/v2/models/add/infer", &body).json()["outputs"][0]["data"],
        json!([3])
    );
    for path in [
        "/v2/models/add",
        "/v2/models/add/ready",
        "/v2/models/add/config",
    ] {
        let theirs = bob.get(path);
        let missing = bob.get(&path.replace("add", "absent"));
        assert_eq!(theirs.status, 404, "{path}");
        assert_eq!(
            String::from_utf8_lossy(&theirs.body).replace("add", "absent"),
            String::from_utf8_lossy(&missing.body),
            "{path}: another tenant's model answers as a missing one"
        );
    }
    let r = bob.post_json("/v2/models/add/infer", &body);
    assert_v2_error(&r, 404, "NOT_FOUND", "add");
    let anonymous = keyed.server.http();
    let r = anonymous.post_json("/v2/models/add/infer", &body);
    assert_v2_error(&r, 401, "UNAUTHENTICATED", "");
    assert!(r.header("www-authenticate").is_some());
    // Health stays open, as /healthz does.
    assert_eq!(anonymous.get("/v2/health/ready").status, 200);
}

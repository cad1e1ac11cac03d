//! The KServe v2 model repository and statistics extensions against the real server: the index
//! is the caller's registry, a load with a base64 `file:` parameter registers the component as
//! `PUT /v1/methods/{name}` would (quotas, limits, versions), an unload unregisters it, each
//! tenant sees only its own models, and the statistics count real calls.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::http::Response;
use crate::support::{Http, TestServer, guest};
use crate::tenants::Keyed;

/// The body tritonclient's `load_model(name, config=..., files={"file:1/model.wasm": bytes})`
/// sends.
fn load_body(component: &[u8], export: Option<&str>) -> Value {
    let mut parameters = json!({
        "file:1/model.wasm": base64::engine::general_purpose::STANDARD.encode(component)
    });
    if let Some(export) = export {
        let config = json!({"parameters": {"export": {"string_value": export}}});
        parameters["config"] = Value::String(config.to_string());
    }
    json!({ "parameters": parameters })
}

fn load(http: &Http, name: &str, body: &Value) -> Response {
    http.post_json(&format!("/v2/repository/models/{name}/load"), body)
}

fn index(http: &Http) -> Value {
    let r = http.request("POST", "/v2/repository/index", None);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn add_request(a: i32, b: i32) -> Value {
    json!({"inputs": [
        {"name": "a", "datatype": "INT32", "shape": [1], "data": [a]},
        {"name": "b", "datatype": "INT32", "shape": [1], "data": [b]}
    ]})
}

/// A protocol error: the status, `{"error": "<string>"}` alone, the code beside it.
fn assert_v2_error(r: &Response, status: u16, code: &str, contains: &str) {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(
        body.as_object().map(|o| o.len()),
        Some(1),
        "only `error`: {body}"
    );
    let message = body["error"].as_str().expect("`error` is a string");
    assert!(message.contains(contains), "`{contains}` in: {message}");
    assert_eq!(r.header("x-wasmrpc-code"), Some(code));
}

#[test]
fn a_base64_component_loads_serves_infer_and_loads_again_as_version_2() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let add = guest("example-add");
    // A multi-method component: the method is chosen in the config, as `?export=` does on v1.
    let r = load(&http, "plus", &load_body(&add, None));
    assert_v2_error(&r, 400, "INVALID_ARGUMENT", "string_value");
    let r = load(&http, "plus", &load_body(&add, Some("add")));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = http.post_json("/v2/models/plus/infer", &add_request(2, 3));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["outputs"][0]["data"], json!([5]));
    assert_eq!(r.json()["model_version"], "1");
    // A method named as the model needs no choice.
    assert_eq!(load(&http, "add", &load_body(&add, None)).status, 200);
    // Loading a name again with a file is a new version, as registering again is on v1.
    assert_eq!(
        load(&http, "plus", &load_body(&add, Some("add"))).status,
        200
    );
    assert_eq!(
        http.get("/v2/models/plus").json()["versions"],
        json!(["1", "2"])
    );
    let v1 = http.get("/v1/methods/plus").json();
    assert_eq!(
        (v1["version"].clone(), v1["export"].clone()),
        (json!(2), json!("add"))
    );
    assert_eq!(
        http.post_json("/v2/models/plus/versions/2/infer", &add_request(1, 1))
            .json()["model_version"],
        "2"
    );
    assert_eq!(
        index(&http),
        json!([
            {"name": "add", "version": "1", "state": "READY", "reason": ""},
            {"name": "plus", "version": "2", "state": "READY", "reason": ""}
        ])
    );
    // tritonclient's index request body, and a `ready` filter (everything is ready).
    let r = http.post_json("/v2/repository/index", &json!({"ready": true}));
    assert_eq!(r.json().as_array().map(Vec::len), Some(2));
    // The extension is advertised.
    let extensions = http.get("/v2").json()["extensions"].clone();
    assert!(
        extensions
            .as_array()
            .unwrap()
            .contains(&json!("model_repository")),
        "{extensions}"
    );
}

#[test]
fn a_load_without_a_file_is_200_for_a_model_and_404_otherwise() {
    let server = TestServer::start(&[]);
    let http = server.http();
    assert_eq!(
        load(&http, "add", &load_body(&guest("example-add"), None)).status,
        200
    );
    for body in [None, Some(&b"{}"[..]), Some(&b"{\"parameters\": {}}"[..])] {
        let r = http.request("POST", "/v2/repository/models/add/load", body);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let r = http.request("POST", "/v2/repository/models/absent/load", body);
        assert_v2_error(
            &r,
            404,
            "NOT_FOUND",
            "send its component in a `file:` parameter",
        );
    }
    assert_eq!(http.get("/v2/models/add").json()["versions"], json!(["1"]));
}

#[test]
fn bad_load_requests_are_400_naming_the_problem() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let r = load(
        &http,
        "m",
        &json!({"parameters": {"file:1/model.wasm": "AGFz-_-_"}}),
    );
    assert_v2_error(
        &r,
        400,
        "INVALID_ARGUMENT",
        "`file:1/model.wasm`: is not base64",
    );
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("standard alphabet")
    );
    let r = load(
        &http,
        "m",
        &json!({"parameters": {"file:1/model.wasm": "AA==", "file:1/other.wasm": "AA=="}}),
    );
    assert_v2_error(
        &r,
        400,
        "INVALID_ARGUMENT",
        "`file:1/model.wasm`, `file:1/other.wasm`",
    );
    let r = http.request("POST", "/v2/repository/models/m/load", Some(b"{not json"));
    assert_v2_error(
        &r,
        400,
        "INVALID_ARGUMENT",
        "not a valid model load request",
    );
    // Not a component: refused by the same checks as a v1 upload.
    let r = load(&http, "m", &load_body(b"not wasm at all", None));
    assert_v2_error(&r, 400, "INVALID_ARGUMENT", "");
    // A name that breaks the rule.
    let r = load(&http, "_m", &load_body(&guest("example-add"), None));
    assert_v2_error(&r, 400, "INVALID_ARGUMENT", "not a valid method name");
    assert_eq!(index(&http), json!([]), "nothing was registered");
}

/// The component limit is v1's: 413 for a body past it (refused from its `Content-Length`
/// before it is read) and for a component over it, and the tenant's quota is named as v1 names it.
#[test]
fn an_oversize_load_is_413_as_on_v1() {
    let server = TestServer::start(&["--max-component-bytes", "100000"]);
    let http = server.http();
    // A body bigger than any load of a 100 000-byte component.
    let r = load(&http, "big", &load_body(&vec![0u8; 200_000], None));
    assert_v2_error(
        &r,
        413,
        "RESOURCE_EXHAUSTED",
        "over the limit of 100000 bytes",
    );
    // A body within the body limit whose component is over the component limit.
    let r = load(&http, "big", &load_body(&vec![0u8; 110_000], None));
    assert_v2_error(
        &r,
        413,
        "RESOURCE_EXHAUSTED",
        "over the limit of 100000 bytes",
    );
    assert_eq!(index(&http), json!([]));

    let keyed = Keyed::start(&[]);
    let (alice, _) = keyed.tenant("alice");
    let r = keyed.admin.request(
        "PUT",
        "/v1/tenants/alice/quota",
        Some(br#"{"max_component_bytes": 1000}"#),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = load(&alice, "add", &load_body(&guest("example-add"), None));
    assert_v2_error(&r, 413, "RESOURCE_EXHAUSTED", "max_component_bytes (1000)");
    let v1 = alice.put("/v1/methods/add", &guest("example-add"));
    assert_eq!(v1.status, 413, "v1 answers the same");
}

#[test]
fn unload_removes_every_version_and_infer_is_then_404() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let add = guest("example-add");
    assert_eq!(load(&http, "add", &load_body(&add, None)).status, 200);
    assert_eq!(load(&http, "add", &load_body(&add, None)).status, 200);
    let r = http.post_json(
        "/v2/repository/models/add/unload",
        &json!({"parameters": {"unload_dependents": false}}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = http.post_json("/v2/models/add/infer", &add_request(1, 2));
    assert_v2_error(&r, 404, "NOT_FOUND", "add");
    assert_eq!(http.get("/v1/methods/add").status, 404);
    assert_eq!(index(&http), json!([]));
    let r = http.request("POST", "/v2/repository/models/add/unload", None);
    assert_v2_error(&r, 404, "NOT_FOUND", "add");
    // Loaded again, the name starts at version 1.
    assert_eq!(load(&http, "add", &load_body(&add, None)).status, 200);
    assert_eq!(http.get("/v2/models/add").json()["versions"], json!(["1"]));
}

/// The repository is the caller's tenant's registry: another tenant's models are not listed,
/// cannot be unloaded, and a load of the same name makes a model of the loader's own.
#[test]
fn each_tenant_has_a_repository_of_its_own() {
    let keyed = Keyed::start(&[]);
    let (alice, _) = keyed.tenant("alice");
    let (bob, _) = keyed.tenant("bob");
    let add = guest("example-add");
    assert_eq!(load(&alice, "add", &load_body(&add, None)).status, 200);
    assert_eq!(
        alice.put("/v1/methods/plus?export=add", &add).status,
        201,
        "a v1 registration is a model too"
    );
    assert_eq!(
        load(&bob, "mine", &load_body(&add, Some("add"))).status,
        200
    );
    let names = |http: &Http| -> Vec<String> {
        index(http)
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&alice), ["add", "plus"]);
    assert_eq!(names(&bob), ["mine"]);

    // Bob cannot unload Alice's model, nor tell it from a missing one.
    let theirs = bob.request("POST", "/v2/repository/models/add/unload", None);
    let missing = bob.request("POST", "/v2/repository/models/absent/unload", None);
    assert_v2_error(&theirs, 404, "NOT_FOUND", "add");
    assert_eq!(
        String::from_utf8_lossy(&theirs.body).replace("`add`", "`absent`"),
        String::from_utf8_lossy(&missing.body)
    );
    let theirs = bob.request("POST", "/v2/repository/models/add/load", None);
    let missing = bob.request("POST", "/v2/repository/models/absent/load", None);
    assert_v2_error(&theirs, 404, "NOT_FOUND", "add");
    assert_eq!(
        String::from_utf8_lossy(&theirs.body).replace("`add`", "`absent`"),
        String::from_utf8_lossy(&missing.body)
    );
    // Bob loading the same name makes Bob's own model; Alice's keeps its one version.
    assert_eq!(load(&bob, "add", &load_body(&add, None)).status, 200);
    assert_eq!(alice.get("/v2/models/add").json()["versions"], json!(["1"]));
    assert_eq!(bob.get("/v2/models/add").json()["versions"], json!(["1"]));
    assert_eq!(names(&alice), ["add", "plus"]);
    assert_eq!(names(&bob), ["add", "mine"]);
    assert_eq!(
        alice
            .post_json("/v2/models/add/infer", &add_request(1, 2))
            .status,
        200
    );

    // No key: 401 in the protocol's shape; the admin key is not a tenant's.
    let anonymous = keyed.server.http();
    for path in [
        "/v2/repository/index",
        "/v2/repository/models/add/load",
        "/v2/repository/models/add/unload",
    ] {
        let r = anonymous.request("POST", path, None);
        assert_v2_error(&r, 401, "UNAUTHENTICATED", "");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{path}");
        let r = keyed.admin.request("POST", path, None);
        assert_v2_error(&r, 403, "PERMISSION_DENIED", "");
    }
    for path in ["/v2/models/stats", "/v2/models/add/stats"] {
        assert_v2_error(&anonymous.get(path), 401, "UNAUTHENTICATED", "");
    }
    assert_eq!(names(&alice), ["add", "plus"], "nothing changed");
}

#[test]
fn statistics_count_the_calls_of_each_version() {
    let keyed = Keyed::start(&[]);
    let (alice, _) = keyed.tenant("alice");
    let (bob, _) = keyed.tenant("bob");
    let add = guest("example-add");
    assert_eq!(load(&alice, "add", &load_body(&add, None)).status, 200);
    assert_eq!(load(&alice, "add", &load_body(&add, None)).status, 200);
    for _ in 0..3 {
        assert_eq!(
            alice
                .post_json("/v2/models/add/infer", &add_request(1, 2))
                .status,
            200
        );
    }
    // A failing call: different shapes are the guest's INVALID_ARGUMENT.
    let r = alice.post_json(
        "/v2/models/add/versions/1/infer",
        &json!({"inputs": [
            {"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]},
            {"name": "b", "datatype": "INT32", "shape": [1], "data": [1]}
        ]}),
    );
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        alice
            .call(
                "add",
                json!([
                    {"dtype": "int32", "shape": [1], "data": [1]},
                    {"dtype": "int32", "shape": [1], "data": [1]}
                ]),
                0
            )
            .status,
        200,
        "v1 calls count too"
    );

    let r = alice.get("/v2/models/add/stats");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let stats = r.json()["model_stats"].clone();
    assert_eq!(stats.as_array().map(Vec::len), Some(2), "{stats}");
    let (one, two) = (&stats[0], &stats[1]);
    assert_eq!(
        (one["name"].clone(), one["version"].clone()),
        (json!("add"), json!("1"))
    );
    assert_eq!(one["inference_count"], 0);
    assert_eq!(one["inference_stats"]["fail"]["count"], 1);
    assert!(one["inference_stats"]["fail"]["ns"].as_u64().unwrap() > 0);
    assert_eq!(two["version"], "2");
    assert_eq!(two["inference_count"], 4);
    assert_eq!(two["execution_count"], 4);
    assert_eq!(two["inference_stats"]["success"]["count"], 4);
    assert!(two["inference_stats"]["success"]["ns"].as_u64().unwrap() > 0);
    assert_eq!(two["inference_stats"]["fail"]["count"], 0);
    assert!(two["last_inference"].as_u64().unwrap() > 1_700_000_000_000);
    assert_eq!(
        alice.get("/v2/models/add/versions/2/stats").json()["model_stats"],
        json!([two])
    );
    assert_eq!(alice.get("/v2/models/stats").json()["model_stats"], stats);

    // Another tenant sees none of it.
    assert_eq!(
        bob.get("/v2/models/stats").json(),
        json!({"model_stats": []})
    );
    assert_v2_error(&bob.get("/v2/models/add/stats"), 404, "NOT_FOUND", "add");
    assert_v2_error(
        &alice.get("/v2/models/add/versions/9/stats"),
        404,
        "NOT_FOUND",
        "9",
    );
    assert_v2_error(
        &alice.get("/v2/models/add/versions/x/stats"),
        400,
        "INVALID_ARGUMENT",
        "x",
    );

    // Unloaded and loaded again, the model starts from zero.
    assert_eq!(
        alice
            .request("POST", "/v2/repository/models/add/unload", None)
            .status,
        200
    );
    assert_eq!(load(&alice, "add", &load_body(&add, None)).status, 200);
    let fresh = alice.get("/v2/models/add/stats").json()["model_stats"].clone();
    assert_eq!(
        fresh[0]["inference_stats"]["success"]["count"], 0,
        "{fresh}"
    );
    assert_eq!(fresh[0]["last_inference"], 0);
}

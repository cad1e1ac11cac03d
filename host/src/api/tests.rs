//! Router tests: requests through the real router with `oneshot`, no socket; a real service
//! behind it (runtime and store in a temp dir), so refusals are the ones users get.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::{AppState, AppStateParts, HttpLimits, router};
use crate::metrics::Metrics;
use crate::registry::LocalRegistry;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::service::Service;
use crate::tenancy::{Access, Quota};

fn quota() -> Quota {
    Quota {
        max_component_bytes: 1000,
        max_methods: 0,
        max_stored_bytes: 0,
        memory_per_call_mib: 256,
        max_deadline_ms: 300_000,
        max_concurrent_calls: 64,
        calls_per_second: 0,
    }
}

fn state(dir: &tempfile::TempDir) -> AppState {
    let runtime = Runtime::new(RuntimeConfig {
        pooling: false,
        max_component_bytes: 1000,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let registry = LocalRegistry::open(dir.path()).unwrap();
    AppState::new(AppStateParts {
        service: Arc::new(Service::new(
            Arc::new(runtime),
            Arc::new(registry),
            Arc::new(Metrics::default()),
            64,
        )),
        limits: HttpLimits {
            max_request_bytes: 1000,
            ..HttpLimits::default()
        },
        access: Access::open(quota()),
        bytes_in_flight: crate::admission::BytesBudget::new(1 << 20, 1 << 20),
    })
}

async fn send(state: &AppState, req: Request<Body>) -> (StatusCode, serde_json::Value) {
    let response = router(state.clone()).oneshot(req).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, json)
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

fn code(json: &serde_json::Value) -> &str {
    json["error"]["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn readiness_follows_the_registry_load() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    assert_eq!(send(&state, get("/healthz")).await.0, StatusCode::OK);
    let (status, json) = send(&state, get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(code(&json), "UNAVAILABLE");
    state.service.warm().await;
    assert_eq!(send(&state, get("/readyz")).await.0, StatusCode::OK);
}

#[tokio::test]
async fn unknown_routes_methods_and_verbs_get_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    let (status, json) = send(&state, get("/nope")).await;
    assert_eq!((status, code(&json)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (status, json) = send(&state, get("/v1/methods/absent")).await;
    assert_eq!((status, code(&json)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let del = Request::delete("/v1/methods/absent")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&state, del).await.0, StatusCode::NOT_FOUND);
    let patch = Request::patch("/v1/methods").body(Body::empty()).unwrap();
    let (status, json) = send(&state, patch).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::METHOD_NOT_ALLOWED, "UNIMPLEMENTED")
    );
}

#[tokio::test]
async fn bad_query_strings_are_json_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    for uri in [
        "/v1/methods/x?version=abc",
        "/v1/methods/x?unknown=1",
        "/v1/methods/%FF",
    ] {
        let (status, json) = send(&state, get(uri)).await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            "{uri}"
        );
    }
}

#[tokio::test]
async fn bodies_over_their_limits_are_413() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    let put = Request::put("/v1/methods/big")
        .header(header::CONTENT_LENGTH, "5000")
        .body(Body::from(vec![0u8; 5000]))
        .unwrap();
    let (status, json) = send(&state, put).await;
    assert_eq!(
        (status, code(&json)),
        (StatusCode::PAYLOAD_TOO_LARGE, "RESOURCE_EXHAUSTED")
    );
    // Without a declared length the limit still holds.
    let post = Request::post("/v1/methods/x/call")
        .body(Body::from(vec![b' '; 5000]))
        .unwrap();
    assert_eq!(send(&state, post).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_call_body_that_is_not_a_call_request_is_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    for body in ["not json", r#"{"args": 5}"#, r#"{"args": [], "extra": 1}"#] {
        let post = Request::post("/v1/methods/x/call")
            .body(Body::from(body))
            .unwrap();
        let (status, json) = send(&state, post).await;
        assert_eq!(
            (status, code(&json)),
            (StatusCode::BAD_REQUEST, "INVALID_ARGUMENT"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_routes_of_the_code() {
    use std::collections::BTreeSet;
    let dir = tempfile::tempdir().unwrap();
    let state = state(&dir);
    let in_code: BTreeSet<(String, String)> = super::routes(&state)
        .table()
        .into_iter()
        .map(|r| (r.verb.to_owned(), r.path.to_owned()))
        .collect();
    let document: serde_json::Value =
        serde_json::from_str(super::openapi::DOCUMENT).expect("docs/openapi.json is JSON");
    assert_eq!(document["openapi"], "3.1.0");
    let documented: BTreeSet<(String, String)> =
        super::openapi::operations(&document).into_iter().collect();
    let show = |routes: Vec<&(String, String)>| {
        routes
            .iter()
            .map(|(verb, path)| format!("\n    {} {path}", verb.to_ascii_uppercase()))
            .collect::<String>()
    };
    let undocumented = show(in_code.difference(&documented).collect());
    let gone = show(documented.difference(&in_code).collect());
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "docs/openapi.json does not match the routers (api/mod.rs, api/v2*.rs):\n  \
         served but not in the document:{undocumented}\n  \
         in the document but not served:{gone}"
    );
}

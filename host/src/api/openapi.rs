//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, `docs/openapi.json` compiled
//! in. The document is written by hand; what keeps it from drifting is a test
//! (`the_openapi_document_lists_exactly_the_routes_of_the_code`, `api/tests.rs`) that compares
//! its (verb, path) pairs with the ones the routers were built from ([`super::routes::Routes`]).

use axum::http::header;
use axum::response::IntoResponse;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

/// `GET /openapi.json`: open, like `/healthz` (it describes the API, not anyone's methods).
pub async fn document() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, wasmrpc_proto::headers::JSON)],
        DOCUMENT,
    )
}

/// Every (verb, path) the document describes.
#[cfg(test)]
pub fn operations(document: &serde_json::Value) -> Vec<(String, String)> {
    const VERBS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    let mut found = Vec::new();
    let paths = document["paths"].as_object().expect("`paths` is an object");
    for (path, item) in paths {
        let item = item.as_object().expect("a path item is an object");
        for verb in item.keys().filter(|k| VERBS.contains(&k.as_str())) {
            found.push((verb.clone(), path.clone()));
        }
    }
    found.sort();
    found
}

//! The OpenAPI document the server serves is `docs/openapi.json`, byte for byte; that its routes
//! are the code's is a unit test (`host/src/api/tests.rs`).

use crate::support::TestServer;

#[test]
fn the_server_serves_docs_openapi_json_without_a_key() {
    let keyed = crate::tenants::Keyed::start(&[]);
    let r = keyed.server.http().get("/openapi.json");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let file = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"))
        .expect("reading docs/openapi.json");
    assert!(r.body == file, "GET /openapi.json is not docs/openapi.json");
    let document = r.json();
    assert_eq!(document["openapi"], "3.1.0");
    assert!(document["paths"]["/v2/repository/index"]["post"].is_object());
    // Open without keys too.
    let server = TestServer::start(&[]);
    assert_eq!(server.http().get("/openapi.json").body, file);
}

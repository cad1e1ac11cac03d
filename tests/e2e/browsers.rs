//! What a web page can make a browser do to a server on the user's machine, against the real
//! keyless server (loopback, no keys: the default): a cross-site form POST, a page whose name
//! was re-pointed at 127.0.0.1 (DNS rebinding), a body of a type only a form sends. Each is
//! refused and changes nothing; curl, the SDKs, same-origin pages and `--allow-origin` pages
//! keep working (`host/src/api/browsers.rs`).

use std::io::Write as _;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::http::{Response, read_response};
use crate::support::{Http, TestServer, guest};

/// One HTTP/1.1 request with exactly these headers (`Host` among them, or none), as a browser
/// or a rebound page would send it.
fn raw(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = server.http().connect();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut s).unwrap()
}

/// `host:port` of the server, as curl sends it in `Host`.
fn authority(server: &TestServer) -> String {
    server.url.trim_start_matches("http://").to_owned()
}

/// A KServe v2 load body for the add component (as tritonclient sends it).
fn load_body() -> String {
    let file = base64::engine::general_purpose::STANDARD.encode(guest("example-add"));
    let config = json!({"parameters": {"export": {"string_value": "add"}}}).to_string();
    json!({"parameters": {"file:1/model.wasm": file, "config": config}}).to_string()
}

fn versions(http: &Http, model: &str) -> Value {
    let r = http.get(&format!("/v2/models/{model}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()["versions"].clone()
}

fn infers(http: &Http, model: &str) -> bool {
    let request = json!({"inputs": [
        {"name": "a", "datatype": "INT32", "shape": [1], "data": [2]},
        {"name": "b", "datatype": "INT32", "shape": [1], "data": [3]}
    ]});
    let r = http.post_json(&format!("/v2/models/{model}/infer"), &request);
    r.status == 200 && r.json()["outputs"][0]["data"] == json!([5])
}

/// A refusal: its status, the canonical code (in the body, or beside a v2 body) and a word of
/// its message.
fn assert_refused(r: &Response, status: u16, code: &str, says: &str) {
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, status, "{text}");
    let code_seen = r
        .header("x-wasmrpc-code")
        .map(str::to_owned)
        .unwrap_or_else(|| r.code());
    assert_eq!(code_seen, code, "{text}");
    assert!(text.contains(says), "`{says}` in {text}");
}

#[test]
fn a_cross_site_form_cannot_load_unload_upload_or_call_on_a_keyless_server() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let host = authority(&server);
    let r = http.post_json(
        "/v2/repository/models/add/load",
        &serde_json::from_str(&load_body()).unwrap(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(versions(&http, "add"), json!(["1"]));
    // What a page on evil.example's `<form enctype="text/plain" method="post">` sends.
    let form = |path: &str, body: &[u8]| {
        raw(
            &server,
            "POST",
            path,
            &[
                ("Host", &host),
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            body,
        )
    };
    let r = form("/v2/repository/models/add/load", load_body().as_bytes());
    assert_refused(&r, 403, "PERMISSION_DENIED", "--allow-origin");
    assert_eq!(versions(&http, "add"), json!(["1"]), "the load happened");
    let r = form("/v2/repository/models/add/unload", b"{}");
    assert_refused(&r, 403, "PERMISSION_DENIED", "--allow-origin");
    assert!(infers(&http, "add"), "the unload happened");
    let r = form("/v1/methods/add/call", br#"{"args":[]}"#);
    assert_refused(&r, 403, "PERMISSION_DENIED", "http://evil.example");
    // A form cannot PUT, but a page's script can ask to (the preflight is refused too).
    let r = raw(
        &server,
        "PUT",
        "/v1/methods/evil",
        &[("Host", &host), ("Origin", "http://evil.example")],
        &guest("example-add"),
    );
    assert_refused(&r, 403, "PERMISSION_DENIED", "--allow-origin");
    let r = raw(
        &server,
        "OPTIONS",
        "/v1/methods/evil",
        &[
            ("Host", &host),
            ("Origin", "http://evil.example"),
            ("Access-Control-Request-Method", "PUT"),
        ],
        b"",
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.header("access-control-allow-origin"), None);
    assert_eq!(
        http.get("/v1/methods/evil").status,
        404,
        "the upload happened"
    );
}

#[test]
fn a_rebound_host_is_refused_on_a_keyless_server_and_loopback_names_are_served() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let port = authority(&server).rsplit_once(':').unwrap().1.to_owned();
    let evil = format!("evil.example:{port}");
    // DNS rebinding: the page's own name, now resolving to 127.0.0.1; no Origin (same-origin
    // GETs carry none).
    let r = raw(&server, "GET", "/v1/methods", &[("Host", &evil)], b"");
    assert_refused(&r, 403, "PERMISSION_DENIED", "--admin-key-file");
    assert!(r.message().contains("loopback"), "{}", r.message());
    let r = raw(
        &server,
        "PUT",
        "/v1/methods/rebound",
        &[("Host", &evil)],
        &guest("example-add"),
    );
    assert_refused(&r, 403, "PERMISSION_DENIED", "loopback");
    let r = raw(
        &server,
        "DELETE",
        "/v1/methods/rebound",
        &[("Host", &evil)],
        b"",
    );
    assert_refused(&r, 403, "PERMISSION_DENIED", "loopback");
    let r = raw(&server, "GET", "/v2/models/add", &[("Host", &evil)], b"");
    assert_refused(&r, 403, "PERMISSION_DENIED", "loopback");
    assert_eq!(
        http.get("/v1/methods/rebound").status,
        404,
        "the upload happened"
    );
    // Every loopback name, with the port or without; HTTP/1.0 without a Host at all.
    for name in [
        format!("localhost:{port}"),
        format!("console.localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("127.0.0.2:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_owned(),
    ] {
        let r = raw(&server, "GET", "/v1/methods", &[("Host", &name)], b"");
        assert_eq!(
            r.status,
            200,
            "{name}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let mut s = http.connect();
    s.write_all(b"GET /v1/methods HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s).unwrap().status, 200);
}

#[test]
fn a_server_with_keys_answers_any_host() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("admin.key");
    let server = TestServer::start(&["--admin-key-file", key_file.to_str().unwrap()]);
    let key = std::fs::read_to_string(&key_file).unwrap();
    let authorization = format!("Bearer {}", key.trim());
    let r = raw(
        &server,
        "GET",
        "/v1/tenants",
        &[
            ("Host", "wasmrpc.example:443"),
            ("Authorization", &authorization),
        ],
        b"",
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn the_servers_own_pages_and_allowed_origins_are_served_with_cors() {
    let server = TestServer::start_with_env(
        &["--allow-origin", "https://console.example:8443"],
        &[(
            "WASMRPC_ALLOW_ORIGINS",
            "http://localhost:3000,http://notebook.example",
        )],
    );
    let host = authority(&server);
    let own = format!("http://{host}");
    let r = raw(
        &server,
        "GET",
        "/v1/methods",
        &[("Host", &host), ("Origin", &own)],
        b"",
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // Same-origin needs no CORS headers.
    assert_eq!(r.header("access-control-allow-origin"), None);
    // The flag wins over the variable (as every setting's does).
    for (origin, allowed) in [
        ("https://console.example:8443", true),
        ("http://localhost:3000", false),
        ("https://console.example", false),
        ("http://console.example:8443", false),
    ] {
        let r = raw(
            &server,
            "GET",
            "/v1/methods",
            &[("Host", &host), ("Origin", origin)],
            b"",
        );
        if allowed {
            assert_eq!(
                r.status,
                200,
                "{origin}: {}",
                String::from_utf8_lossy(&r.body)
            );
            assert_eq!(r.header("access-control-allow-origin"), Some(origin));
            let r = raw(
                &server,
                "OPTIONS",
                "/v1/methods/add/call",
                &[
                    ("Host", &host),
                    ("Origin", origin),
                    ("Access-Control-Request-Method", "POST"),
                    ("Access-Control-Request-Headers", "content-type"),
                ],
                b"",
            );
            assert_eq!(r.status, 204);
            assert_eq!(r.header("access-control-allow-origin"), Some(origin));
            assert!(
                r.header("access-control-allow-methods")
                    .unwrap()
                    .contains("POST")
            );
            assert!(
                r.header("access-control-allow-headers")
                    .unwrap()
                    .contains("content-type")
            );
        } else {
            assert_refused(&r, 403, "PERMISSION_DENIED", "--allow-origin");
        }
    }
    // The variable alone, comma-separated.
    let server = TestServer::start_with_env(
        &[],
        &[(
            "WASMRPC_ALLOW_ORIGINS",
            "http://localhost:3000, http://notebook.example",
        )],
    );
    let host = authority(&server);
    for origin in ["http://localhost:3000", "http://notebook.example"] {
        let r = raw(
            &server,
            "GET",
            "/v1/methods",
            &[("Host", &host), ("Origin", origin)],
            b"",
        );
        assert_eq!(
            r.status,
            200,
            "{origin}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
}

#[test]
fn curl_bodies_pass_and_form_body_types_are_refused_with_415() {
    let server = TestServer::start(&[]);
    let host = authority(&server);
    let http = server.http();
    // `curl -X PUT --data-binary @add.wasm` and `curl -d '{...}'`: url-encoded, as the docs show.
    let curl = |method: &str, path: &str, body: &[u8]| {
        raw(
            &server,
            method,
            path,
            &[
                ("Host", &host),
                ("User-Agent", "curl/8.5.0"),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            body,
        )
    };
    let r = curl("PUT", "/v1/methods/add?export=add", &guest("example-add"));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let args = json!({"args": [
        {"dtype": "int32", "shape": [1], "data": [1]},
        {"dtype": "int32", "shape": [1], "data": [2]}
    ]});
    let r = curl("POST", "/v1/methods/add/call", args.to_string().as_bytes());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // The types a form sends raw, without an Origin (a browser that sent none), and a type the
    // API does not read.
    for content_type in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "multipart/form-data; boundary=x",
        "text/html",
    ] {
        let r = raw(
            &server,
            "PUT",
            "/v1/methods/add?export=add",
            &[("Host", &host), ("Content-Type", content_type)],
            &guest("example-add"),
        );
        assert_refused(&r, 415, "INVALID_ARGUMENT", "application/json");
        let r = raw(
            &server,
            "POST",
            "/v2/repository/models/add/unload",
            &[("Host", &host), ("Content-Type", content_type)],
            b"{}",
        );
        assert_refused(&r, 415, "INVALID_ARGUMENT", "application/json");
    }
    assert_eq!(
        http.get("/v1/methods/add").json()["versions"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    assert!(infers(&http, "add"), "the unload happened");
}

#[test]
fn a_loopback_metrics_address_answers_only_loopback_names() {
    let port = crate::support::nats::free_port();
    let metrics = format!("127.0.0.1:{port}");
    let _server = TestServer::start(&["--metrics-listen", &metrics]);
    let ask = |host: &str| {
        let mut s = std::net::TcpStream::connect(&metrics).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        read_response(&mut s).unwrap()
    };
    // A rebound page reads nobody's method names (before issue 32's fix it got them, 200).
    let r = ask(&format!("evil.example:{port}"));
    assert_refused(&r, 403, "PERMISSION_DENIED", "loopback");
    // The operator's scraper, addressing it as itself, is served.
    let r = ask(&metrics);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(String::from_utf8_lossy(&r.body).contains("wasmrpc_"));
}

//! Bad uploads get a clear INVALID_ARGUMENT (or 413) and store nothing.

use std::io::Write;

use serde_json::json;

use crate::support::{TestServer, guest, http::read_response};

fn assert_nothing_stored(server: &TestServer) {
    assert_eq!(
        server.http().get("/v1/methods").json()["methods"],
        json!([])
    );
}

fn refused(server: &TestServer, bytes: &[u8], expect: &str) {
    let r = server.http().put("/v1/methods/bad", bytes);
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert!(
        r.message().contains(expect),
        "expected `{expect}` in: {}",
        r.message()
    );
    assert_nothing_stored(server);
}

#[test]
fn non_components_are_refused_with_a_reason() {
    let server = TestServer::start(&[]);
    refused(&server, b"this is not wasm", "not WebAssembly");
    refused(&server, b"\0asm\x01\0\0\0", "core wasm module");
    refused(&server, b"\x7fELF\x02\x01\x01\0 precompiled", "precompiled");
    let component = guest("example-add");
    refused(&server, &component[..component.len() / 2], "invalid");
    let r = server.http().put("/v1/methods/bad", b"");
    assert_eq!(r.code(), "INVALID_ARGUMENT");
}

#[test]
fn forbidden_imports_are_refused_naming_the_import() {
    let server = TestServer::start(&[]);
    refused(&server, &guest("guest-forbidden-fs"), "wasi:filesystem/");
    refused(&server, &guest("guest-forbidden-net"), "wasi:sockets/tcp@");
}

#[test]
fn a_component_of_another_world_is_refused() {
    let server = TestServer::start(&[]);
    refused(
        &server,
        &guest("guest-wrong-world"),
        "wasmrpc:tensor/method@0.1.0",
    );
}

#[test]
fn invalid_names_are_refused() {
    let server = TestServer::start(&[]);
    let r = server
        .http()
        .put("/v1/methods/_hidden", &guest("example-softmax"));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert_nothing_stored(&server);
}

#[test]
fn a_body_over_the_limit_is_refused_with_413_with_or_without_content_length() {
    let server = TestServer::start(&["--max-component-bytes", "100000"]);
    let http = server.http();

    // Declared too large: refused before the body is sent at all.
    let mut s = http.connect();
    write!(
        s,
        "PUT /v1/methods/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10000000000\r\n\r\n"
    )
    .unwrap();
    let r = read_response(&mut s).unwrap();
    assert_eq!(r.status, 413);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");

    // Chunked, no length: cut off once past the limit.
    let mut s = http.connect();
    write!(
        s,
        "PUT /v1/methods/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .unwrap();
    let chunk = vec![0u8; 64 * 1024];
    for _ in 0..4 {
        if write!(s, "{:x}\r\n", chunk.len()).is_err()
            || s.write_all(&chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    let r = read_response(&mut s).unwrap();
    assert_eq!(r.status, 413);
    assert_nothing_stored(&server);
}

#[test]
fn the_same_bytes_uploaded_twice_at_once_are_stored_once() {
    let server = TestServer::start(&[]);
    let bytes = std::sync::Arc::new(guest("example-softmax"));
    let handles: Vec<_> = ["s1", "s2"]
        .into_iter()
        .map(|name| {
            let (http, bytes) = (server.http(), bytes.clone());
            std::thread::spawn(move || http.put(&format!("/v1/methods/{name}"), &bytes).json())
        })
        .collect();
    let infos: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(infos[0]["digest"], infos[1]["digest"]);
    let blobs = std::fs::read_dir(server.data_dir().join("blobs/sha256"))
        .unwrap()
        .count();
    assert_eq!(blobs, 1);
}

#[test]
fn a_corrupted_blob_is_detected_on_load_and_never_run() {
    let mut server = TestServer::start(&[]);
    let info = server
        .http()
        .put("/v1/methods/softmax", &guest("example-softmax"))
        .json();
    let digest = info["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let path = server.data_dir().join("blobs/sha256").join(&digest);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    server.kill9_and_restart();
    let r = server.http().call(
        "softmax",
        json!([crate::support::tensor("float32", &[1], json!([1]))]),
        0,
    );
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "UNAVAILABLE");
    assert!(r.message().contains("corrupt"), "{}", r.message());

    // Registering the same bytes again repairs the stored blob, also across a restart.
    let again = server
        .http()
        .put("/v1/methods/softmax", &guest("example-softmax"));
    assert_eq!(
        again.status,
        200,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    server.kill9_and_restart();
    let r = server.http().call(
        "softmax",
        json!([crate::support::tensor("float32", &[1], json!([1]))]),
        0,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

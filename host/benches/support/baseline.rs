//! The native baseline the benchmarks compare wasmrpc with: an axum handler on the server's own
//! accept loop that does a v1 call's work without a sandbox. It parses the body with the same
//! decoder (`decode_call_request`), adds the two int32 tensors natively, and writes the same
//! `{"outputs": [...]}` answer, so the difference measured is the sandbox and the plumbing.

use axum::routing::post;
use wasmrpc_client::{CallResponse, Tensor};

/// `POST /v1/methods/add/call` done natively.
pub async fn native_add(body: axum::body::Bytes) -> axum::response::Response {
    let args = match wasmrpc_client::json::decode_call_request(&body) {
        Ok(request) => request.args,
        Err(e) => {
            return axum::response::IntoResponse::into_response((
                axum::http::StatusCode::BAD_REQUEST,
                e.to_string(),
            ));
        }
    };
    let (x, y) = (
        args[0].to_vec::<i32>().unwrap(),
        args[1].to_vec::<i32>().unwrap(),
    );
    let sum: Vec<i32> = x.iter().zip(&y).map(|(p, q)| p.wrapping_add(*q)).collect();
    let sum = Tensor::from_vec(args[0].shape().to_vec(), sum).unwrap();
    let out = serde_json::to_vec(&CallResponse { outputs: vec![sum] }).unwrap();
    axum::response::IntoResponse::into_response((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        out,
    ))
}

/// `POST /echo`: the body back as it came, as `application/octet-stream` (row P4's floor: what
/// moving the bytes through the same HTTP stack costs without a sandbox).
pub async fn echo(body: axum::body::Bytes) -> axum::response::Response {
    axum::response::IntoResponse::into_response((
        [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
        body,
    ))
}

/// `POST /v1/traces`: an OTLP/HTTP collector that takes every export and keeps nothing (the
/// traced side of `wrk.sh WRK_TRACING=1` exports here). Each piece of the body is dropped as it
/// arrives, not gathered first: this sink shares the machine with the server measured, and a
/// collector's work is not the server's. An empty body is an empty
/// `ExportTraceServiceResponse`: all taken.
pub async fn otlp_sink(body: axum::body::Body) -> axum::response::Response {
    use http_body_util::BodyExt as _;
    let mut body = body;
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            break;
        }
    }
    axum::response::IntoResponse::into_response((
        [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
        axum::body::Bytes::new(),
    ))
}

/// The baseline's routes: the call, a raw echo, an OTLP sink, and the method list a client asks
/// for when it connects.
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/v1/methods/add/call", post(native_add))
        // The server's own default request cap, not axum's 2 MB.
        .route(
            "/echo",
            post(echo).layer(axum::extract::DefaultBodyLimit::max(256 << 20)),
        )
        .route(
            "/v1/traces",
            post(otlp_sink).layer(axum::extract::DefaultBodyLimit::max(64 << 20)),
        )
        .route(
            "/v1/methods",
            axum::routing::get(|| async { axum::Json(serde_json::json!({ "methods": [] })) }),
        )
}

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

/// The baseline's routes: the call, a raw echo, and the method list a client asks for when it
/// connects.
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/v1/methods/add/call", post(native_add))
        // The server's own default request cap, not axum's 2 MB.
        .route(
            "/echo",
            post(echo).layer(axum::extract::DefaultBodyLimit::max(256 << 20)),
        )
        .route(
            "/v1/methods",
            axum::routing::get(|| async { axum::Json(serde_json::json!({ "methods": [] })) }),
        )
}

//! Reading request bodies under a size limit, refusing oversized ones before reading past it.

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use http_body_util::BodyExt;
use wasmrpc_proto::Code;

use super::error::ApiError;

/// Read the whole body, at most `limit` bytes.
///
/// A `Content-Length` over the limit is refused before any of the body is read; a body without
/// one is cut off as soon as it passes the limit.
///
/// # Errors
/// 413 RESOURCE_EXHAUSTED over the limit; INVALID_ARGUMENT when the body cannot be read.
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::body_too_large(limit))
        }
        Err(e) => {
            // axum wraps the limit error; look through the chain before calling it a read failure.
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
            while let Some(err) = source {
                if err.is::<http_body_util::LengthLimitError>() {
                    return Err(ApiError::body_too_large(limit));
                }
                source = err.source();
            }
            Err(ApiError::new(
                Code::InvalidArgument,
                format!("reading the request body failed: {e}"),
            ))
        }
    }
}

//! Request bodies read under a size limit and a time limit (refusing oversized ones before
//! reading past it and slow ones when the whole body has not arrived in time). Response bodies
//! of several buffers go out as [`wasmrpc_proto::body::Chunks`].

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use wasmrpc_proto::Code;

use super::HttpLimits;
use super::error::ApiError;

/// The body of a call (`/v1/…/call`, `/v2/…/infer`): at most `max_request_bytes`, within the
/// body timeout.
///
/// # Errors
/// As [`read_limited`].
pub async fn read_call_body(
    limits: &HttpLimits,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, ApiError> {
    read_limited(
        headers,
        body,
        limits.max_request_bytes,
        limits.body_read_timeout,
    )
    .await
}

/// Read the whole body, at most `limit` bytes, within `timeout` of starting to read it.
///
/// A `Content-Length` over the limit is refused before any of the body is read; a body without
/// one is cut off as soon as it passes the limit. The timeout bounds the whole body, not the
/// silence between its frames: a client trickling a byte at a time is cut off all the same.
///
/// # Errors
/// 413 RESOURCE_EXHAUSTED over the limit; 408 DEADLINE_EXCEEDED (closing the connection) when
/// the body is not all there in time; INVALID_ARGUMENT when the body cannot be read.
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    let read = wasmrpc_proto::body::gather(
        http_body_util::Limited::new(body, limit),
        declared.map_or(0, |n| n as usize),
    );
    let Ok(read) = tokio::time::timeout(timeout, read).await else {
        return Err(ApiError::body_timeout(timeout));
    };
    match read {
        Ok(bytes) => Ok(bytes),
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

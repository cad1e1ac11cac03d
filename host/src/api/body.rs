//! Request bodies read under a size limit and a time limit (refusing oversized ones before
//! reading past it and slow ones when the whole body has not arrived in time). Response bodies
//! of several buffers go out as [`wasmrpc_proto::body::Chunks`].

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use wasmrpc_proto::{Code, Tensor};

use super::AppState;
use super::error::ApiError;
use crate::admission::{AdmissionError, BytesHeld};
use crate::error::ServiceError;
use crate::tenancy::TenantId;

/// The body of a call (`/v1/…/call`, `/v2/…/infer`): at most `max_request_bytes`, within the
/// body timeout, its bytes held in the server's budget of bytes in flight ([`read_budgeted`]).
/// The caller keeps the hold until the call's arguments are dropped.
///
/// # Errors
/// As [`read_budgeted`].
pub async fn read_call_body(
    state: &AppState,
    tenant: &TenantId,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Bytes, BytesHeld), ApiError> {
    read_budgeted(state, tenant, headers, body, state.limits.max_request_bytes).await
}

/// Read the whole body as [`read_limited`] does, at most `limit` bytes, taking its bytes from
/// the server's budget of bytes in flight for `tenant` as it is read (`admission/bytes.rs`):
/// its `Content-Length` up front when it has one, frame by frame otherwise. The hold comes back
/// with the body.
///
/// # Errors
/// As [`read_limited`]; 429 RESOURCE_EXHAUSTED with `Retry-After` past the budget, before the
/// body is read when it has a `Content-Length`, as soon as it passes the budget otherwise.
pub async fn read_budgeted(
    state: &AppState,
    tenant: &TenantId,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<(Bytes, BytesHeld), ApiError> {
    let declared = declared_length(headers);
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    // At most `limit`, checked above, so it fits in usize.
    let mut held = state
        .bytes_in_flight
        .take(tenant, declared.map_or(0, |n| n as usize))
        .map_err(|e| ApiError::from(ServiceError::Admission(e)))?;
    let mut over_budget = None;
    let budgeted = Budgeted {
        inner: body,
        held: &mut held,
        read: 0,
        over_budget: &mut over_budget,
    };
    let bytes = read_limited(headers, budgeted, limit, state.limits.body_read_timeout).await;
    if let Some(e) = over_budget {
        return Err(ApiError::from(ServiceError::Admission(e)));
    }
    Ok((bytes?, held))
}

/// Hold the bytes of a call's decoded arguments in place of its body's, once the body is
/// decoded and dropped: fewer for binary inputs (slices of the body) and most JSON, more for
/// JSON text shorter than its values (`0,` is 2 bytes of text and 8 of float64).
///
/// # Errors
/// 429 RESOURCE_EXHAUSTED with `Retry-After` when the arguments need more than the budget has.
pub fn hold_arguments<'t>(
    held: &mut BytesHeld,
    args: impl IntoIterator<Item = &'t Tensor>,
) -> Result<(), ApiError> {
    let bytes = args
        .into_iter()
        .fold(0usize, |sum, t| sum.saturating_add(t.raw_data().len()));
    held.grow_to(bytes)
        .map_err(|e| ApiError::from(ServiceError::Admission(e)))
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// A body whose frames are taken from the budget of bytes in flight as they arrive, past what
/// was taken for it up front. Past the budget it ends with an error, and leaves the refusal in
/// `over_budget` for [`read_call_body`] to answer with.
struct Budgeted<'a> {
    inner: Body,
    held: &'a mut BytesHeld,
    read: usize,
    over_budget: &'a mut Option<AdmissionError>,
}

impl http_body::Body for Budgeted<'_> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let frame = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            this.read = this.read.saturating_add(data.len());
            if this.read > this.held.bytes()
                && let Err(e) = this.held.grow_to(this.read)
            {
                let text = e.to_string();
                *this.over_budget = Some(e);
                return Poll::Ready(Some(Err(axum::Error::new(text))));
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
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
pub async fn read_limited<B>(
    headers: &HeaderMap,
    body: B,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = declared_length(headers);
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

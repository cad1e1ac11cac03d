//! The W3C trace context a call from Python carries. The Python side decides which (an explicit
//! `traceparent=`, else OpenTelemetry's current span: `wasmrpc/_trace.py`) and hands over the
//! two header values; here they are checked and made current around the call.

use std::future::Future;

use pyo3::prelude::*;
use wasmrpc_client::trace::{self, TraceContext};

use crate::errors::{invalid_argument, to_pyerr};

/// The context of `traceparent` and `tracestate`; none without a `traceparent`.
///
/// # Errors
/// `InvalidArgumentError` for a malformed header, or a `tracestate` without a `traceparent`.
pub(crate) fn context(
    py: Python<'_>,
    traceparent: Option<String>,
    tracestate: Option<String>,
) -> PyResult<Option<TraceContext>> {
    match (traceparent, tracestate) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(invalid_argument(
            py,
            "a tracestate goes with a traceparent, and none was given",
        )),
        (Some(parent), state) => TraceContext::parse(&parent, state.as_deref())
            .map(Some)
            .map_err(|e| to_pyerr(py, &e)),
    }
}

/// `fut` with `ctx` as its current trace context (as it is, without one).
pub(crate) async fn within<F: Future>(ctx: Option<TraceContext>, fut: F) -> F::Output {
    match ctx {
        Some(ctx) => trace::scope(ctx, fut).await,
        None => fut.await,
    }
}

/// `start` with `ctx` current, for what starts tasks (they take the context along).
pub(crate) fn starting<R>(ctx: Option<TraceContext>, start: impl FnOnce() -> R) -> R {
    match ctx {
        Some(ctx) => trace::scope_blocking(ctx, start),
        None => start(),
    }
}

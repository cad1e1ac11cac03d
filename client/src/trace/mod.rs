//! W3C Trace Context on every request, so that the server's spans join the caller's trace.
//!
//! Which context a request carries, the first there is: the one of the innermost [`scope`] (or
//! [`scope_blocking`] for the blocking client) around the call; the client's own, from
//! [`ClientBuilder::trace_context`](crate::ClientBuilder::trace_context); with the cargo
//! feature `opentelemetry`, the span current in OpenTelemetry's `Context`. With none of them, a
//! request carries no trace headers. Calls that run as tasks of their own ([`Client::call`],
//! the blocking client, the cluster's `schedule`) take the context with them from where they
//! were started.
//!
//! ```no_run
//! # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
//! use wasmrpc_client::{Tensor, trace::{self, TraceContext}};
//! let parent: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
//! let args = vec![Tensor::scalar(2i32), Tensor::scalar(3i32)];
//! let sum = trace::scope(parent, client.call_async("addition", args, None, None)).await?;
//! # Ok(()) }
//! ```
//!
//! [`Client::call`]: crate::Client::call

mod context;
#[cfg(feature = "opentelemetry")]
mod otel;
#[cfg(test)]
mod tests;

use std::future::Future;

pub use context::{
    MAX_TRACESTATE_LEN, MAX_TRACESTATE_MEMBERS, TRACEPARENT, TRACESTATE, TraceContext,
};

tokio::task_local! {
    /// The context of the innermost [`scope`]; `None` inside a task started outside any.
    static SCOPED: Option<TraceContext>;
}

/// Run `fut` with `ctx` as the current trace context: every request it makes, on any client,
/// carries `ctx` (unless a [`scope`] inside it says otherwise).
///
/// ```no_run
/// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::trace::{self, TraceContext};
/// let parent: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
/// trace::scope(parent, client.refresh()).await?; // the method list, fetched under `parent`
/// # Ok(()) }
/// ```
pub fn scope<F: Future>(ctx: TraceContext, fut: F) -> impl Future<Output = F::Output> {
    SCOPED.scope(Some(ctx), fut)
}

/// Run `f` with `ctx` as the current trace context, for the blocking client: every call `f`
/// starts on this thread carries `ctx`, including calls still running after `f` returns.
///
/// ```no_run
/// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::{Tensor, trace::{self, TraceContext}};
/// let parent: TraceContext = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
/// let sum = trace::scope_blocking(parent, || {
///     client.method("addition")?.call_blocking(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)])
/// })?;
/// # Ok(()) }
/// ```
pub fn scope_blocking<R>(ctx: TraceContext, f: impl FnOnce() -> R) -> R {
    SCOPED.sync_scope(Some(ctx), f)
}

/// The trace context a request made here would carry from a client with none of its own: the
/// innermost [`scope`]'s, else (with the feature `opentelemetry`) OpenTelemetry's current span's.
///
/// ```
/// use wasmrpc_client::trace::{self, TraceContext};
/// let parent = TraceContext::new([1; 16], [2; 8], 1).unwrap();
/// assert_eq!(trace::scope_blocking(parent.clone(), trace::current), Some(parent));
/// ```
pub fn current() -> Option<TraceContext> {
    scoped().or_else(ambient)
}

/// The context a request carries: the scope's, else the client's own, else OpenTelemetry's.
pub(crate) fn outgoing(client_default: Option<&TraceContext>) -> Option<TraceContext> {
    scoped()
        .or_else(|| client_default.cloned())
        .or_else(ambient)
}

/// `fut`, to run as a task of its own, with the trace context of where it is made (the scope's,
/// and OpenTelemetry's `Context`): a spawned task starts with neither.
pub(crate) fn carry<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let fut = SCOPED.scope(scoped(), fut);
    #[cfg(feature = "opentelemetry")]
    let fut =
        opentelemetry::context::FutureExt::with_context(fut, opentelemetry::Context::current());
    fut
}

fn scoped() -> Option<TraceContext> {
    SCOPED.try_with(Clone::clone).ok().flatten()
}

/// The context of OpenTelemetry's current span, with the feature; none without it.
fn ambient() -> Option<TraceContext> {
    #[cfg(feature = "opentelemetry")]
    return otel::current();
    #[cfg(not(feature = "opentelemetry"))]
    None
}

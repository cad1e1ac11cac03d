//! The bridge to OpenTelemetry (cargo feature `opentelemetry`): the current span's context, and
//! conversions between [`TraceContext`] and OpenTelemetry's `SpanContext`.
//!
//! Only the API crate: whichever SDK and tracer provider the application installs, its spans
//! are in the `Context` this reads.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId};

use super::TraceContext;

/// The context of the span current in OpenTelemetry's `Context`, when it is a valid one.
pub(super) fn current() -> Option<TraceContext> {
    opentelemetry::Context::map_current(|cx| {
        TraceContext::from_span_context(cx.span().span_context())
    })
}

impl TraceContext {
    /// The context of an OpenTelemetry span, for its children elsewhere; `None` for an invalid
    /// one (no current span). A trace state that W3C Trace Context's limits refuse is left out,
    /// not the trace. (Cargo feature `opentelemetry`.)
    ///
    /// ```
    /// use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    /// use wasmrpc_client::trace::TraceContext;
    /// let span = SpanContext::new(TraceId::from_bytes([1; 16]), SpanId::from_bytes([2; 8]),
    ///                             TraceFlags::SAMPLED, false, TraceState::NONE);
    /// let ctx = TraceContext::from_span_context(&span).unwrap();
    /// assert_eq!(ctx.traceparent(), format!("00-{}-{}-01", "01".repeat(16), "02".repeat(8)));
    /// assert_eq!(TraceContext::from_span_context(&SpanContext::NONE), None);
    /// ```
    pub fn from_span_context(span: &SpanContext) -> Option<TraceContext> {
        if !span.is_valid() {
            return None;
        }
        let ctx = TraceContext::new(
            span.trace_id().to_bytes(),
            span.span_id().to_bytes(),
            span.trace_flags().to_u8(),
        )
        .ok()?;
        let state = span.trace_state().header();
        Some(ctx.clone().with_tracestate(&state).unwrap_or(ctx))
    }

    /// This context as OpenTelemetry's remote `SpanContext`, to start spans under it.
    /// (Cargo feature `opentelemetry`.)
    ///
    /// ```
    /// use wasmrpc_client::trace::TraceContext;
    /// let ctx = TraceContext::new([1; 16], [2; 8], 1).unwrap().with_tracestate("k=v").unwrap();
    /// let span = ctx.to_span_context();
    /// assert!(span.is_remote() && span.is_sampled());
    /// assert_eq!(span.trace_state().get("k"), Some("v"));
    /// assert_eq!(TraceContext::from_span_context(&span), Some(ctx));
    /// ```
    pub fn to_span_context(&self) -> SpanContext {
        SpanContext::new(
            TraceId::from_bytes(self.trace_id()),
            SpanId::from_bytes(self.parent_id()),
            TraceFlags::new(self.flags()),
            true,
            self.tracestate()
                .and_then(|s| s.parse().ok())
                .unwrap_or_default(),
        )
    }
}

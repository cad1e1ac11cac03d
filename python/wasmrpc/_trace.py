"""The W3C trace context a call carries: the ``traceparent`` given to it, else that of the span
current in OpenTelemetry's context when the ``opentelemetry`` package (its API) is installed,
else none. The server then makes its spans children of the caller's.

OpenTelemetry is looked up on the first call, not at import: without it, nothing changes.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .errors import InvalidArgumentError

#: Not looked up yet; then the ``opentelemetry.trace`` module, or None without one.
_UNSET: Any = object()
_otel_trace: Any = _UNSET

#: The longest ``tracestate`` W3C Trace Context propagates (the native core refuses longer).
_MAX_TRACESTATE = 512


def _opentelemetry() -> Any:
    global _otel_trace
    if _otel_trace is _UNSET:
        try:
            from opentelemetry import trace
        except Exception:  # not installed, or broken: calls go on untraced either way
            trace = None
        _otel_trace = trace
    return _otel_trace


def context(
    traceparent: Optional[str] = None, tracestate: Optional[str] = None
) -> Tuple[Optional[str], Optional[str]]:
    """``(traceparent, tracestate)`` for a call: the ones given (the native core checks them),
    else the current OpenTelemetry span's, else ``(None, None)``."""
    if traceparent is not None:
        return traceparent, tracestate
    if tracestate is not None:
        raise InvalidArgumentError("a tracestate goes with a traceparent, and none was given")
    trace = _opentelemetry()
    if trace is None:
        return None, None
    span = trace.get_current_span().get_span_context()
    if not span.is_valid:
        return None, None
    parent = f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}"
    # OpenTelemetry's TraceState checks keys, values and the member count as W3C does, but not
    # the length: a longer one is left out rather than failing the call.
    state = span.trace_state.to_header() if span.trace_state else ""
    if not state or len(state) > _MAX_TRACESTATE:
        return parent, None
    return parent, state

//! W3C Trace Context (level 1): the `traceparent` and `tracestate` headers a call arrives with
//! (HTTP v1 and v2, gRPC metadata, the headers of a call between workers) and leaves with, and
//! the identifiers of this process's spans.
//!
//! Parsing is strict where the specification is (lowercase hex, no all-zero identifier, version
//! `ff` refused) and lenient where it asks to be (a later version's extra fields are ignored). A
//! `traceparent` that fails is ignored, as the specification says: the call starts a trace of its
//! own. A `tracestate` is passed on untouched when it is printable and at most 512 bytes, and
//! dropped otherwise.

use std::sync::Arc;

/// The header that names the caller's trace and span.
pub const TRACEPARENT: &str = "traceparent";
/// The header of vendors' trace state, passed on with the trace.
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` passed on (the specification's limit for propagating it whole).
const MAX_TRACESTATE: usize = 512;

/// The `sampled` bit of the trace flags.
const SAMPLED: u8 = 0x01;

/// Where a span sits in a trace: what a child of it (here or on another worker) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    /// The trace, 16 bytes, not all zero.
    pub trace_id: [u8; 16],
    /// The span, 8 bytes, not all zero.
    pub span_id: [u8; 8],
    /// Whether the trace is being recorded (the `sampled` flag).
    pub sampled: bool,
    /// The caller's `tracestate`, passed on as it came.
    pub state: Option<Arc<str>>,
    /// Whether the span is another process's (it came in a header).
    pub remote: bool,
}

impl SpanContext {
    /// The context a `traceparent` header (and its `tracestate`) gives, or `None` for a header
    /// that does not follow the specification.
    pub fn from_headers(traceparent: &[u8], tracestate: Option<&[u8]>) -> Option<SpanContext> {
        let (trace_id, span_id, flags) = parse_traceparent(traceparent)?;
        let state = tracestate
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE)
            .filter(|s| s.iter().all(|b| (0x20..=0x7e).contains(b)))
            .and_then(|s| std::str::from_utf8(s).ok())
            .map(Arc::from);
        Some(SpanContext {
            trace_id,
            span_id,
            sampled: flags & SAMPLED != 0,
            state,
            remote: true,
        })
    }

    /// The `traceparent` header that makes a callee's spans children of this span.
    pub fn traceparent(&self) -> String {
        let flags = if self.sampled { "01" } else { "00" };
        format!(
            "00-{}-{}-{flags}",
            hex::encode(self.trace_id),
            hex::encode(self.span_id)
        )
    }
}

/// A new trace identifier: random, never all zero.
pub fn new_trace_id() -> [u8; 16] {
    loop {
        let id = fastrand::u128(..).to_le_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

/// A new span identifier: random, never all zero.
pub fn new_span_id() -> [u8; 8] {
    loop {
        let id = fastrand::u64(..).to_le_bytes();
        if id != [0; 8] {
            return id;
        }
    }
}

/// `version-traceid-parentid-flags`: the trace id, the parent id and the flags.
fn parse_traceparent(header: &[u8]) -> Option<([u8; 16], [u8; 8], u8)> {
    let header = trim(header);
    if header.len() < 55 {
        return None;
    }
    let version = hex_byte(&header[0..2])?;
    // Version 00 is exactly 55 characters; a later one may add fields after a dash.
    match version {
        0xff => return None,
        0x00 if header.len() != 55 => return None,
        _ if header.len() > 55 && header[55] != b'-' => return None,
        _ => {}
    }
    if header[2] != b'-' || header[35] != b'-' || header[52] != b'-' {
        return None;
    }
    let mut trace_id = [0u8; 16];
    for (i, byte) in trace_id.iter_mut().enumerate() {
        *byte = hex_byte(&header[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span_id = [0u8; 8];
    for (i, byte) in span_id.iter_mut().enumerate() {
        *byte = hex_byte(&header[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = hex_byte(&header[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some((trace_id, span_id, flags))
}

/// Optional whitespace around a header's value is not part of it.
fn trim(value: &[u8]) -> &[u8] {
    let start = value.iter().position(|b| !b.is_ascii_whitespace());
    let end = value.iter().rposition(|b| !b.is_ascii_whitespace());
    match (start, end) {
        (Some(s), Some(e)) => &value[s..=e],
        _ => &[],
    }
}

/// Two lowercase hex digits (the specification allows no uppercase).
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(pair[0])? << 4 | digit(pair[1])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let c = SpanContext::from_headers(GOOD.as_bytes(), Some(b"rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(hex::encode(c.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(c.span_id), "00f067aa0ba902b7");
        assert!(c.sampled && c.remote);
        assert_eq!(c.state.as_deref(), Some("rojo=00f067aa0ba902b7"));
        assert_eq!(c.traceparent(), GOOD);
        let unsampled = GOOD.replace("-01", "-00");
        assert!(
            !SpanContext::from_headers(unsampled.as_bytes(), None)
                .unwrap()
                .sampled
        );
    }

    #[test]
    fn headers_against_the_specification_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(
                SpanContext::from_headers(bad.as_bytes(), None).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_later_version_may_carry_more_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(SpanContext::from_headers(later.as_bytes(), None).is_some());
        assert!(SpanContext::from_headers(format!(" {GOOD} ").as_bytes(), None).is_some());
    }

    #[test]
    fn a_tracestate_too_long_or_unprintable_is_dropped() {
        let long = "a=".to_owned() + &"b".repeat(600);
        let c = SpanContext::from_headers(GOOD.as_bytes(), Some(long.as_bytes())).unwrap();
        assert_eq!(c.state, None);
        let c = SpanContext::from_headers(GOOD.as_bytes(), Some(b"a=b\nc=d")).unwrap();
        assert_eq!(c.state, None);
    }

    #[test]
    fn new_identifiers_are_never_zero_and_differ() {
        assert_ne!(new_trace_id(), new_trace_id());
        assert_ne!(new_span_id(), [0; 8]);
    }
}

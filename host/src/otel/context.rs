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
    for (i, bytes) in trace_id.chunks_exact_mut(4).enumerate() {
        bytes.copy_from_slice(&hex8(&header[3 + 8 * i..11 + 8 * i])?);
    }
    let mut span_id = [0u8; 8];
    for (i, bytes) in span_id.chunks_exact_mut(4).enumerate() {
        bytes.copy_from_slice(&hex8(&header[36 + 8 * i..44 + 8 * i])?);
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

/// Eight lowercase hex digits, the four bytes they write, all eight checked and converted at
/// once in the lanes of one `u64` (a `traceparent` has 48 of them, parsed for every request).
fn hex8(digits: &[u8]) -> Option<[u8; 4]> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = u64::from_le_bytes(digits.try_into().ok()?);
    if x & HIGH != 0 {
        return None;
    }
    // Each byte is below 0x80, so adding 0x80 - n to it sets its high bit exactly when it is
    // at least n, and carries into no other byte.
    let at_least = |n: u8| x + ONES * u64::from(0x80 - n);
    let digit = at_least(b'0') & !at_least(b'9' + 1);
    let letter = at_least(b'a') & !at_least(b'f' + 1);
    if (digit | letter) & HIGH != HIGH {
        return None;
    }
    // '0'..='9' are 0x30..=0x39 and 'a'..='f' 0x61..=0x66: the low nibble, plus 9 for a letter
    // (bit 6 set).
    let nibbles = (x & (ONES * 0x0f)) + 9 * ((x >> 6) & ONES);
    // The first digit of each pair (the lower byte) is the high nibble of its byte.
    let pairs = ((nibbles & 0x00ff_00ff_00ff_00ff) << 4) | ((nibbles >> 8) & 0x00ff_00ff_00ff_00ff);
    let quads = (pairs & 0x0000_00ff_0000_00ff) | ((pairs >> 8) & 0x0000_ff00_0000_ff00);
    let bytes = (quads & 0xffff) | ((quads >> 16) & 0xffff_0000);
    Some((bytes as u32).to_le_bytes())
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

    /// The eight digits at once read what two at a time read, for every byte in every place.
    #[test]
    fn eight_digits_at_once_read_as_two_at_a_time() {
        let reference = |digits: &[u8]| -> Option<[u8; 4]> {
            let mut out = [0u8; 4];
            for (i, b) in out.iter_mut().enumerate() {
                *b = hex_byte(&digits[2 * i..2 * i + 2])?;
            }
            Some(out)
        };
        let base = *b"0123abcd";
        for place in 0..8 {
            for byte in 0..=255u8 {
                let mut digits = base;
                digits[place] = byte;
                assert_eq!(hex8(&digits), reference(&digits), "{digits:?}");
            }
        }
        for digits in [b"00000000", b"ffffffff", b"9a9a9a9a", b"f0e1d2c3"] {
            assert_eq!(hex8(digits), reference(digits));
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

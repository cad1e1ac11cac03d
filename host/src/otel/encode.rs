//! OTLP's `ExportTraceServiceRequest` in protobuf, written straight from [`SpanRecord`]s: one
//! pass, no message objects in between (the field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto` and its `common` and `resource` protos; the tests
//! and the suite's receiver decode the output with the official definitions).

use super::span::{Child, Event, SpanRecord, Value};

/// Protobuf's wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH: u8 = 2;
const FIXED32: u8 = 5;

/// Span flags: the W3C flags in the low byte, then whether the parent's remoteness is known
/// (bit 8) and whether it is remote (bit 9).
const FLAGS_SAMPLED: u32 = 0x01;
const FLAGS_HAS_IS_REMOTE: u32 = 0x100;
const FLAGS_IS_REMOTE: u32 = 0x200;

/// OTLP's status codes.
const STATUS_ERROR: u64 = 2;

/// A protobuf message being written.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, data: &[u8]) {
        self.key(field, LENGTH);
        self.varint(data.len() as u64);
        self.buf.extend_from_slice(data);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, v: u32) {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A nested message in `field`, written by `body`. Its length goes in front once known: one
    /// byte is kept for it, and the body moved along in the rare case it needs more.
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        self.key(field, LENGTH);
        let at = self.buf.len();
        self.buf.push(0);
        body(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
            return;
        }
        let mut prefix = Writer::default();
        prefix.varint(len as u64);
        self.buf.splice(at..=at, prefix.buf);
    }

    fn key_value(&mut self, field: u32, key: &str, value: &Value) {
        self.message(field, |w| {
            w.string(1, key);
            w.message(2, |w| match value {
                Value::Str(s) => w.string(1, s),
                Value::Digest(d) => {
                    let mut text = [0u8; 7 + 64];
                    text[..7].copy_from_slice(b"sha256:");
                    hex_into(&mut text[7..], d);
                    w.bytes(1, &text);
                }
                Value::Bool(b) => w.uint(2, u64::from(*b)),
                // int64 is a varint of the two's complement.
                Value::Int(i) => w.uint(3, *i as u64),
            });
        });
    }
}

/// What every batch from this process says of it: its resource's attributes, and the
/// instrumentation scope.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `service.name` and the rest.
    pub resource: Vec<(String, String)>,
    /// The scope's name.
    pub scope: &'static str,
    /// The scope's version.
    pub version: &'static str,
}

/// An `ExportTraceServiceRequest` of `spans`, all from `origin`: its bytes start at the offset
/// returned, after `headroom` bytes the caller may use (the gRPC frame's prefix).
///
/// The spans are written first and the messages around them (whose lengths are theirs plus a
/// little) last, right-aligned in room kept in front: no pass moves the batch's bytes.
pub fn export_request(origin: &Origin, spans: &[SpanRecord], headroom: usize) -> (Vec<u8>, usize) {
    // ResourceSpans.resource and ScopeSpans.scope, which do not depend on the spans.
    let mut head = Writer::default();
    head.message(1, |w| {
        for (k, v) in &origin.resource {
            w.key_value(1, k, &Value::Str(v.clone().into()));
        }
    });
    let resource = head.into_bytes();
    let mut scope = Writer::default();
    scope.message(1, |w| {
        w.string(1, origin.scope);
        w.string(2, origin.version);
    });
    let scope = scope.into_bytes();
    // Three tags and three lengths of at most 5 bytes each, the two messages, the caller's room.
    let room = headroom + resource.len() + scope.len() + 3 * 6;
    let mut w = Writer {
        buf: Vec::with_capacity(room + spans.len() * 1024),
    };
    w.buf.resize(room, 0);
    for span in spans {
        w.message(2, |w| write_span(w, span));
        for (i, child) in span.children.iter().enumerate() {
            w.message(2, |w| write_child(w, span, i, child));
        }
    }
    let spans_len = w.buf.len() - room;
    // ScopeSpans = scope + spans; ResourceSpans = resource + tag/len + ScopeSpans;
    // the request = tag/len + ResourceSpans.
    let scope_spans_len = scope.len() + spans_len;
    let mut scope_spans_prefix = Writer::default();
    scope_spans_prefix.key(2, LENGTH);
    scope_spans_prefix.varint(scope_spans_len as u64);
    let resource_spans_len = resource.len() + scope_spans_prefix.buf.len() + scope_spans_len;
    let mut front = Writer::default();
    front.key(1, LENGTH);
    front.varint(resource_spans_len as u64);
    front.buf.extend_from_slice(&resource);
    front.buf.extend_from_slice(&scope_spans_prefix.buf);
    front.buf.extend_from_slice(&scope);
    let start = room - front.buf.len();
    w.buf[start..room].copy_from_slice(&front.buf);
    (w.buf, start)
}

fn write_span(w: &mut Writer, s: &SpanRecord) {
    w.bytes(1, &s.trace_id);
    w.bytes(2, &s.span_id);
    if let Some(state) = &s.state {
        w.string(3, state);
    }
    if let Some(parent) = &s.parent_span_id {
        w.bytes(4, parent);
    }
    w.string(5, &s.name);
    w.uint(6, s.kind as u64);
    w.fixed64(7, s.start_ns);
    w.fixed64(8, s.end_ns);
    write_details(w, &s.attributes, &s.events);
    if let Some(failure) = &s.failure {
        w.message(15, |w| {
            w.string(2, &failure.message);
            w.uint(3, STATUS_ERROR);
        });
    }
    let mut flags = FLAGS_SAMPLED;
    if s.parent_span_id.is_some() {
        flags |= FLAGS_HAS_IS_REMOTE;
        if s.parent_remote {
            flags |= FLAGS_IS_REMOTE;
        }
    }
    w.fixed32(16, flags);
}

/// A span's attributes (field 9) and events (field 11).
fn write_details(w: &mut Writer, attributes: &[(&'static str, Value)], events: &[Event]) {
    for (k, v) in attributes {
        w.key_value(9, k, v);
    }
    for e in events {
        w.message(11, |w| {
            w.fixed64(1, e.time_ns);
            w.string(2, e.name);
            for (k, v) in &e.attributes {
                w.key_value(3, k, v);
            }
        });
    }
}

/// A step of `parent` as a span: its id derived from the parent's and its place (a parent's id
/// is random, so these are as unlikely to collide as any two).
fn write_child(w: &mut Writer, parent: &SpanRecord, index: usize, c: &Child) {
    w.bytes(1, &parent.trace_id);
    w.bytes(2, &child_id(&parent.span_id, index));
    if let Some(state) = &parent.state {
        w.string(3, state);
    }
    w.bytes(4, &parent.span_id);
    w.string(5, c.name);
    w.uint(6, 1);
    w.fixed64(7, c.start_ns);
    w.fixed64(8, c.end_ns);
    write_details(w, &c.attributes, &c.events);
    // Sampled; the parent is known to be this process's own.
    w.fixed32(16, FLAGS_SAMPLED | FLAGS_HAS_IS_REMOTE);
}

/// The id of step `index` of the span `parent` (splitmix64 of the two: never zero in practice,
/// and never the parent's).
pub fn child_id(parent: &[u8; 8], index: usize) -> [u8; 8] {
    let mut z = u64::from_le_bytes(*parent)
        .wrapping_add((index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    if z == 0 { 1 } else { z }.to_le_bytes()
}

fn hex_into(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_nested_message_gets_a_longer_length() {
        let mut w = Writer::default();
        w.message(1, |w| w.bytes(2, &[7; 300]));
        let b = w.into_bytes();
        // key 1/LENGTH, length 303 as a two-byte varint, then key 2/LENGTH, 300 as two bytes.
        assert_eq!(&b[..5], &[0x0a, 0xaf, 0x02, 0x12, 0xac]);
        assert_eq!(b.len(), 1 + 2 + 1 + 2 + 300);
    }

    #[test]
    fn negative_ints_are_ten_byte_varints() {
        let mut w = Writer::default();
        w.uint(3, -1i64 as u64);
        assert_eq!(w.into_bytes().len(), 11);
    }
}

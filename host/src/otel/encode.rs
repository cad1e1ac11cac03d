//! OTLP's `ExportTraceServiceRequest` in protobuf, written straight from [`SpanRecord`]s: one
//! pass, no message objects in between (the field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto` and its `common` and `resource` protos; the tests
//! and the suite's receiver decode the output with the official definitions).

use std::cell::RefCell;
use std::sync::Arc;

use super::span::{Child, Event, Name, Shared, SpanRecord, Value, ValueRef, key_bit};

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

    /// Text made of `parts`, one after the other.
    fn string_of(&mut self, field: u32, parts: &[&str]) {
        self.key(field, LENGTH);
        self.varint(parts.iter().map(|p| p.len() as u64).sum());
        for p in parts {
            self.buf.extend_from_slice(p.as_bytes());
        }
    }

    /// A nested message in `field`, written by `body`, expected under 128 bytes.
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        self.message_in(field, 1, body);
    }

    /// A nested message in `field`, written by `body`. Its length goes in front once known:
    /// `guess` bytes are kept for it (1 up to 127 bytes, 2 up to 16 KiB), and the body moved
    /// in the rare case it needs another number.
    fn message_in(&mut self, field: u32, guess: usize, body: impl FnOnce(&mut Writer)) {
        self.key(field, LENGTH);
        let at = self.buf.len();
        self.buf.resize(at + guess, 0);
        body(self);
        let len = self.buf.len() - at - guess;
        let n = varint_len(len as u64);
        if n != guess {
            let end = self.buf.len();
            if n > guess {
                self.buf.resize(end + n - guess, 0);
            }
            self.buf.copy_within(at + guess..end, at + n);
            self.buf.truncate(at + n + len);
        }
        let mut v = len as u64;
        for (i, byte) in self.buf[at..at + n].iter_mut().enumerate() {
            let more = if i + 1 < n { 0x80 } else { 0 };
            *byte = (v as u8 & 0x7f) | more;
            v >>= 7;
        }
    }

    /// A `KeyValue` in `field` (see [`write_attribute`]).
    fn key_value(&mut self, field: u32, key: &str, value: ValueRef<'_>) {
        write_attribute(&mut self.buf, field, key, value);
    }
}

/// Append to `out` the `KeyValue` `key` = `value` as field `field` (under 16) of its message:
/// a span's attribute is its field 9. Its lengths are known before it is written, so it is
/// written in one pass, room made once. Inlined where attributes are set: a key given as a
/// literal is then copied as that many bytes, not by a call to copy so many, which on a call's
/// dozen attributes is most of the cost of writing them ([`super::Span::set`]).
#[inline(always)]
pub fn write_attribute(out: &mut Vec<u8>, field: u32, key: &str, value: ValueRef<'_>) {
    const DIGEST_TEXT: usize = 7 + 64;
    debug_assert!(field < 16, "a one-byte tag");
    // AnyValue: one field of the value's kind.
    let any_len = match value {
        ValueRef::Str(s) => 1 + varint_len(s.len() as u64) + s.len(),
        ValueRef::Digest(_) => 1 + varint_len(DIGEST_TEXT as u64) + DIGEST_TEXT,
        ValueRef::Bool(_) => 2,
        // int64 is a varint of the two's complement.
        ValueRef::Int(i) => 1 + varint_len(i as u64),
    };
    let len =
        1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any_len as u64) + any_len;
    out.reserve(1 + varint_len(len as u64) + len);
    out.push((field << 3) as u8 | LENGTH);
    push_varint(out, len as u64);
    out.push(1 << 3 | LENGTH);
    push_varint(out, key.len() as u64);
    out.extend_from_slice(key.as_bytes());
    out.push(2 << 3 | LENGTH);
    push_varint(out, any_len as u64);
    match value {
        ValueRef::Str(s) => {
            out.push(1 << 3 | LENGTH);
            push_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        ValueRef::Digest(d) => {
            let mut text = [0u8; 2 + DIGEST_TEXT];
            text[..9].copy_from_slice(b"\x0a\x47sha256:");
            hex_into(&mut text[9..], d);
            out.extend_from_slice(&text);
        }
        ValueRef::Bool(b) => out.extend_from_slice(&[2 << 3 | VARINT, u8::from(b)]),
        ValueRef::Int(i) => {
            out.push(3 << 3 | VARINT);
            push_varint(out, i as u64);
        }
    }
}

#[inline(always)]
fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Whether the `KeyValue`s `attributes` (a span's field 9, as [`write_attribute`] writes them),
/// whose keys' [`key_bit`]s are `bits`, have one for `key`. Read only when `key`'s bit is among
/// `bits`.
pub fn has_key(attributes: &[u8], bits: u64, key: &str) -> bool {
    if bits & key_bit(key) == 0 {
        return false;
    }
    let mut rest = attributes;
    while let Some((kv, after)) = length_delimited(rest) {
        // The key is the KeyValue's first field.
        if kv.first() == Some(&(1 << 3 | LENGTH))
            && let Some((k, _)) = length_delimited(kv)
            && k == key.as_bytes()
        {
            return true;
        }
        rest = after;
    }
    false
}

/// The body of the length-delimited field `bytes` begins with (its one-byte tag, its length and
/// what it says), and what follows it.
fn length_delimited(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut len = 0usize;
    let mut at = 1;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(at)?;
        at += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b < 0x80 {
            let end = at.checked_add(len)?;
            return Some((bytes.get(at..end)?, &bytes[end..]));
        }
    }
    None
}

/// The bytes of `v` as a varint.
fn varint_len(v: u64) -> usize {
    // One byte per 7 bits, at least one. Nearly every length and number a span writes takes
    // one byte, which this says without the arithmetic.
    if v < 0x80 {
        return 1;
    }
    (64 - v.leading_zeros() as usize).div_ceil(7)
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

/// `origin` in protobuf, once: what goes in front of every batch's spans.
#[derive(Debug, Clone)]
pub struct Head {
    /// `ResourceSpans.resource`, with its tag and length.
    resource: Vec<u8>,
    /// `ScopeSpans.scope`, with its tag and length.
    scope: Vec<u8>,
}

impl Head {
    /// The head of every batch from `origin`.
    pub fn new(origin: &Origin) -> Head {
        let mut resource = Writer::default();
        resource.message_in(1, 2, |w| {
            for (k, v) in &origin.resource {
                w.key_value(1, k, ValueRef::Str(v));
            }
        });
        let mut scope = Writer::default();
        scope.message(1, |w| {
            w.string(1, origin.scope);
            w.string(2, origin.version);
        });
        Head {
            resource: resource.buf,
            scope: scope.buf,
        }
    }

    /// The bytes a batch keeps free in front of its spans for [`Head::finish`] to fill:
    /// `headroom` for the caller (the gRPC frame's prefix), the two messages, and three tags
    /// and three lengths of at most 5 bytes each.
    pub fn room(&self, headroom: usize) -> usize {
        headroom + self.resource.len() + self.scope.len() + 3 * 6
    }

    /// Make `batch` an `ExportTraceServiceRequest`: `batch` is [`Head::room`]`(headroom)` bytes,
    /// then spans as [`write_record`] wrote them. Its messages go right-aligned in the room (the
    /// spans are not moved); the request's bytes start at the offset returned.
    pub fn finish(&self, batch: &mut [u8], headroom: usize) -> usize {
        let room = self.room(headroom);
        let spans_len = batch.len() - room;
        // ScopeSpans = scope + spans; ResourceSpans = resource + tag/len + ScopeSpans;
        // the request = tag/len + ResourceSpans.
        let scope_spans_len = self.scope.len() + spans_len;
        let mut scope_spans_prefix = Writer::default();
        scope_spans_prefix.key(2, LENGTH);
        scope_spans_prefix.varint(scope_spans_len as u64);
        let resource_spans_len =
            self.resource.len() + scope_spans_prefix.buf.len() + scope_spans_len;
        let mut front = Writer::default();
        front.key(1, LENGTH);
        front.varint(resource_spans_len as u64);
        front.buf.extend_from_slice(&self.resource);
        front.buf.extend_from_slice(&scope_spans_prefix.buf);
        front.buf.extend_from_slice(&self.scope);
        let start = room - front.buf.len();
        batch[start..room].copy_from_slice(&front.buf);
        start
    }
}

/// Append `record` to `out` as `ScopeSpans.spans`: its span, then each of its steps as a span.
pub fn write_record(out: &mut Vec<u8>, record: &SpanRecord) {
    let mut w = Writer {
        buf: std::mem::take(out),
    };
    // A call's span is some hundreds of bytes: two for its length.
    w.message_in(2, 2, |w| write_span(w, record));
    for (i, child) in record.children.iter().enumerate() {
        w.message(2, |w| write_child(w, record, i, child));
    }
    *out = w.buf;
}

/// An `ExportTraceServiceRequest` of `records`, all from `origin`: its bytes start at the
/// offset returned, after `headroom` bytes the caller may use.
#[cfg(test)]
pub fn export_request(
    origin: &Origin,
    records: &[SpanRecord],
    headroom: usize,
) -> (Vec<u8>, usize) {
    let head = Head::new(origin);
    let mut batch = vec![0; head.room(headroom)];
    for record in records {
        write_record(&mut batch, record);
    }
    let start = head.finish(&mut batch, headroom);
    (batch, start)
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
    write_name(w, &s.name, &s.text);
    w.uint(6, s.kind as u64);
    w.fixed64(7, s.start_ns);
    w.fixed64(8, s.end_ns);
    w.buf.extend_from_slice(&s.attributes);
    write_details(w, &[], &s.events);
    w.buf.extend_from_slice(&s.shared);
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

fn write_name(w: &mut Writer, name: &Name, text: &str) {
    w.string_of(5, &name.parts(text));
}

/// A span's attributes (field 9) and events (field 11).
fn write_details(w: &mut Writer, attributes: &[(&'static str, Value)], events: &[Event]) {
    for (k, v) in attributes {
        w.key_value(9, k, v.as_ref());
    }
    for e in events {
        w.message(11, |w| {
            w.fixed64(1, e.time_ns);
            w.string(2, e.name);
            for (k, v) in &e.attributes {
                w.key_value(3, k, v.as_ref());
            }
        });
    }
}

/// Shared attributes as this thread last wrote them (see [`write_shared`]).
struct Written {
    /// What they came from: held, so that its address is not reused while it is here.
    from: Arc<dyn Shared>,
    /// Their keys.
    keys: Vec<&'static str>,
    /// Their keys' [`key_bit`]s: a key whose bit is not here is not one of them.
    key_bits: u64,
    /// Their `KeyValue`s in protobuf, as a span's field 9.
    bytes: Vec<u8>,
}

/// How many sets of shared attributes a thread keeps written (a method's each).
const WRITTEN_KEPT: usize = 8;

thread_local! {
    /// The shared attributes this thread wrote last, newest last. A method's calls share the
    /// same five (name, tenant, version, digest in hex…), written once here and copied for
    /// each of its calls after.
    static WRITTEN: RefCell<Vec<Written>> = const { RefCell::new(Vec::new()) };
}

/// Append to `out` the attributes a span takes from `shared` (as its field 9), but those it
/// has set itself (`own`, `KeyValue`s whose keys' [`key_bit`]s are `own_bits`): copied as this
/// thread wrote them last when it has.
pub fn write_shared<S: Shared + 'static>(
    out: &mut Vec<u8>,
    own: &[u8],
    own_bits: u64,
    shared: &Arc<S>,
) {
    let from = Arc::as_ptr(shared).cast::<()>();
    let copied = WRITTEN.try_with(|written| {
        let mut written = written.borrow_mut();
        let at = match written
            .iter()
            .position(|x| std::ptr::eq(Arc::as_ptr(&x.from).cast::<()>(), from))
        {
            Some(at) => at,
            None => {
                let mut keys = Vec::new();
                let mut bytes = Writer::default();
                shared.attributes(&mut |key, value| {
                    keys.push(key);
                    bytes.key_value(9, key, value);
                });
                if written.len() == WRITTEN_KEPT {
                    written.remove(0);
                }
                written.push(Written {
                    from: shared.clone(),
                    key_bits: keys.iter().fold(0, |bits, k| bits | key_bit(k)),
                    keys,
                    bytes: bytes.buf,
                });
                written.len() - 1
            }
        };
        let x = &written[at];
        // A span that set one of the keys itself (a gRPC request's `rpc.method`) has them
        // written one by one below. The bits spare comparing a call's two dozen keys with each
        // of the five as text.
        let overlaps =
            own_bits & x.key_bits != 0 && x.keys.iter().any(|k| has_key(own, own_bits, k));
        if !overlaps {
            out.extend_from_slice(&x.bytes);
        }
        !overlaps
    });
    if copied != Ok(true) {
        let mut w = Writer {
            buf: std::mem::take(out),
        };
        shared.attributes(&mut |key, value| {
            if !has_key(own, own_bits, key) {
                w.key_value(9, key, value);
            }
        });
        *out = w.buf;
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
        let b = w.buf;
        // key 1/LENGTH, length 303 as a two-byte varint, then key 2/LENGTH, 300 as two bytes.
        assert_eq!(&b[..5], &[0x0a, 0xaf, 0x02, 0x12, 0xac]);
        assert_eq!(b.len(), 1 + 2 + 1 + 2 + 300);
    }

    #[test]
    fn lengths_guessed_wrong_either_way_are_written_right() {
        for n in [0usize, 1, 126, 127, 128, 300, 16_383, 16_384, 70_000] {
            let mut w = Writer::default();
            w.message_in(1, 2, |w| w.buf.extend(std::iter::repeat_n(9, n)));
            let mut expected = Writer::default();
            expected.key(1, LENGTH);
            expected.varint(n as u64);
            expected.buf.extend(std::iter::repeat_n(9, n));
            assert_eq!(w.buf, expected.buf, "a body of {n} bytes");
        }
    }

    /// A method's identity, shared.
    #[derive(Debug)]
    struct Method;

    impl Shared for Method {
        fn attributes(&self, out: &mut dyn FnMut(&'static str, ValueRef<'_>)) {
            out("rpc.method", ValueRef::Str("add"));
            out("wasmrpc.version", ValueRef::Int(3));
        }
    }

    #[test]
    fn the_official_definitions_read_a_batch_with_shared_attributes_and_a_route_name() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        use prost::Message as _;

        let mut record = SpanRecord {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: Some([3; 8]),
            parent_remote: true,
            state: None,
            name: Name::Route("POST", 13, 36),
            kind: super::super::Kind::Server,
            start_ns: 10,
            end_ns: 20,
            attributes: Vec::new(),
            attribute_bits: 0,
            text: "abc/path/more/v1/methods/{name}/call".to_owned(),
            shared: Vec::new(),
            events: Vec::new(),
            children: Vec::new(),
            failure: None,
        };
        record.set("rpc.method", ValueRef::Str("ModelInfer"));
        record.set("big", ValueRef::Str(&"x".repeat(20_000)));
        record.set("url.path", ValueRef::Str("path/"));
        write_shared(
            &mut record.shared,
            &record.attributes,
            record.attribute_bits,
            &std::sync::Arc::new(Method),
        );
        let origin = Origin {
            resource: vec![("service.name".into(), "svc".into())],
            scope: "wasmrpc",
            version: "0",
        };
        let (buf, start) = export_request(&origin, &[record], 5);
        let request = ExportTraceServiceRequest::decode(&buf[start..]).expect("decodes");
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "POST /v1/methods/{name}/call");
        let attributes: Vec<(String, Option<V>)> = span
            .attributes
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone().and_then(|v| v.value)))
            .collect();
        // The span's own rpc.method wins over the shared one; the shared version is there.
        assert_eq!(
            attributes[0],
            (
                "rpc.method".into(),
                Some(V::StringValue("ModelInfer".into()))
            )
        );
        assert_eq!(attributes[1].0, "big");
        assert_eq!(
            attributes[2],
            ("url.path".into(), Some(V::StringValue("path/".into())))
        );
        assert_eq!(
            attributes[3],
            ("wasmrpc.version".into(), Some(V::IntValue(3)))
        );
        assert_eq!(attributes.len(), 4);
    }

    /// A method's attributes are written once a thread and copied after: the copy says what
    /// writing them says, and a span that set one of their keys itself still gets its own.
    #[test]
    fn shared_attributes_written_once_read_the_same() {
        use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
        use prost::Message as _;

        let shared = std::sync::Arc::new(Method);
        let mut record = a_calls_span();
        record.children.clear();
        // The attributes of `record` with `shared`'s, as `Span::share` takes them.
        let keys = |record: &mut SpanRecord| {
            record.shared.clear();
            write_shared(
                &mut record.shared,
                &record.attributes,
                record.attribute_bits,
                &shared,
            );
            let mut buf = Vec::new();
            write_record(&mut buf, record);
            // One span: its field tag, a two-byte length, then the span.
            let span = ProtoSpan::decode(&buf[3..]).expect("decodes");
            span.attributes
                .iter()
                .map(|kv| (kv.key.clone(), format!("{:?}", kv.value)))
                .collect::<Vec<_>>()
        };
        let first = keys(&mut record);
        assert_eq!(
            keys(&mut record),
            first,
            "the copy differs from the first writing"
        );
        assert_eq!(first.iter().filter(|(k, _)| k == "rpc.method").count(), 1);
        assert_eq!(
            first.iter().filter(|(k, _)| k == "wasmrpc.version").count(),
            1
        );

        record.set("rpc.method", ValueRef::Str("ModelInfer"));
        let own = keys(&mut record);
        let methods: Vec<_> = own.iter().filter(|(k, _)| k == "rpc.method").collect();
        assert_eq!(methods.len(), 1, "{own:?}");
        assert!(methods[0].1.contains("ModelInfer"), "{own:?}");
        assert_eq!(
            own.iter().filter(|(k, _)| k == "wasmrpc.version").count(),
            1
        );
    }

    /// A call's span as the server records it over HTTP/1.1, with its three steps.
    fn a_calls_span() -> SpanRecord {
        let mut record = SpanRecord {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_span_id: Some([3; 8]),
            parent_remote: true,
            state: None,
            name: Name::Route("POST", 0, 23),
            kind: super::super::Kind::Server,
            start_ns: 1_700_000_000_000_000_000,
            end_ns: 1_700_000_000_000_100_000,
            attributes: Vec::new(),
            attribute_bits: 0,
            text: "/v1/methods/{name}/call".to_owned(),
            shared: Vec::new(),
            events: Vec::new(),
            children: Vec::new(),
            failure: None,
        };
        record_a_call(
            &mut record,
            &request_attributes(),
            &std::sync::Arc::new(Method),
        );
        record
    }

    /// A request's attributes as `request_attributes.rs` keeps them, and their keys' bits.
    fn request_attributes() -> (Vec<u8>, u64) {
        let mut request = Vec::new();
        let mut bits = 0;
        for (key, value) in [
            ("server.address", ValueRef::Str("127.0.0.1")),
            ("server.port", ValueRef::Int(8080)),
            ("network.protocol.version", ValueRef::Str("1.1")),
            ("http.request.method", ValueRef::Str("POST")),
            ("url.path", ValueRef::Str("/v1/methods/add/call")),
            ("http.route", ValueRef::Str("/v1/methods/{name}/call")),
        ] {
            write_attribute(&mut request, 9, key, value);
            bits |= key_bit(key);
        }
        (request, bits)
    }

    /// Record in `record` (emptied) what a call's span records: the request's attributes as
    /// they are copied in (`request_attributes.rs`), then the call's own as they are set, then
    /// its method's, and its three steps.
    fn record_a_call(
        record: &mut SpanRecord,
        (request, bits): &(Vec<u8>, u64),
        method: &std::sync::Arc<Method>,
    ) {
        record.attributes.clear();
        record.attribute_bits = 0;
        record.shared.clear();
        record.children.clear();
        record.attributes.extend_from_slice(request);
        record.attribute_bits |= bits;
        record.set("wasmrpc.admission_wait_us", ValueRef::Int(3));
        record.set("wasmrpc.slot_wait_us", ValueRef::Int(1));
        record.set("wasmrpc.instantiate_us", ValueRef::Int(12));
        record.set("wasmrpc.guest_run_us", ValueRef::Int(4));
        record.set("rpc.system", ValueRef::Str("wasmrpc"));
        record.set("wasmrpc.bytes_in", ValueRef::Int(8));
        record.set("wasmrpc.bytes_out", ValueRef::Int(4));
        record.set("wasmrpc.code", ValueRef::Str("OK"));
        record.set("http.response.status_code", ValueRef::Int(200));
        record.set("wasmrpc.digest", ValueRef::Digest(&[0xab; 32]));
        write_shared(
            &mut record.shared,
            &record.attributes,
            record.attribute_bits,
            method,
        );
        for name in ["admission", "instantiate", "run"] {
            record.children.push(Child {
                name,
                start_ns: 1_700_000_000_000_000_000,
                end_ns: 1_700_000_000_000_010_000,
                attributes: Vec::new(),
                events: Vec::new(),
            });
        }
    }

    /// How long recording a call's attributes and writing its spans take (`cargo test
    /// --release -p wasmrpc-host --lib encode_speed -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn encode_speed() {
        let method = std::sync::Arc::new(Method);
        let request = request_attributes();
        let mut record = a_calls_span();
        let mut buf = Vec::with_capacity(4096);
        let (mut best, mut best_written) = (f64::MAX, f64::MAX);
        for _ in 0..200 {
            let t = std::time::Instant::now();
            for _ in 0..512 {
                record_a_call(&mut record, &request, &method);
                buf.clear();
                write_record(&mut buf, &record);
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e9 / 512.0);
            let t = std::time::Instant::now();
            for _ in 0..512 {
                buf.clear();
                write_record(&mut buf, &record);
            }
            best_written = best_written.min(t.elapsed().as_secs_f64() * 1e9 / 512.0);
        }
        println!(
            "encode: {best:.0} ns a call recorded and written, {best_written:.0} ns written, {} bytes a call",
            buf.len()
        );
    }

    #[test]
    fn varint_lengths() {
        for v in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut w = Writer::default();
            w.varint(v);
            assert_eq!(varint_len(v), w.buf.len(), "{v}");
        }
    }

    #[test]
    fn negative_ints_are_ten_byte_varints() {
        let mut w = Writer::default();
        w.uint(3, -1i64 as u64);
        assert_eq!(w.buf.len(), 11);
    }
}

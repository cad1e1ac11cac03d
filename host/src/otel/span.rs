//! Spans as this process records them: [`SpanRecord`], what the exporter encodes, and [`Span`],
//! one being recorded, which is handed to the exporter when it ends (or is dropped: a call whose
//! client went away still has its span, ended then).
//!
//! The steps of a call (`admission`, `instantiate`, `run`…) are spans of their own in the trace,
//! but here they travel inside their parent's record as [`Child`]ren: one record, one allocation
//! and one push a call rather than one a step, which keeps sampling every call cheap
//! (docs/benchmarks.md, "Tracing"). The encoder writes each as a span, its id derived from its
//! parent's.
//!
//! A span is written in protobuf when it ends, by the thread that ends it, and its record kept
//! for the next span that thread starts: a call's span costs no allocation. What the request
//! says (its host, path, route, headers) and a method's identity ([`Shared`]) are written in
//! protobuf once a thread, for requests and calls alike, and their bytes copied into each
//! record ([`Span::set_written`], [`Span::share`]).
//!
//! Times are taken as `Instant`s where the work happens (they cost a clock read) and turned into
//! Unix nanoseconds against one reading of both clocks taken at start, so a span's start and end
//! come from the same clock and never run backwards.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::context::{SpanContext, new_span_id};

/// OTLP's span kinds (the values of its enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work inside this process.
    Internal = 1,
    /// Answering a request from outside.
    Server = 2,
    /// A request to another process (a call sent to another worker).
    Client = 3,
}

/// A span's name.
#[derive(Debug, Clone)]
pub enum Name {
    /// As it is.
    Text(Cow<'static, str>),
    /// An HTTP request's: its method, a space and its route (`POST /v1/methods/{name}/call`),
    /// the route copied into its span's [`SpanRecord::text`], these bytes of it.
    Route(&'static str, u32, u32),
}

impl Name {
    /// The name's parts, to be written one after the other; `text` is its span's
    /// [`SpanRecord::text`].
    pub fn parts<'a>(&'a self, text: &'a str) -> [&'a str; 3] {
        match self {
            Name::Text(name) => [name, "", ""],
            Name::Route(method, start, end) => [
                method,
                " ",
                text.get(*start as usize..*end as usize).unwrap_or(""),
            ],
        }
    }
}

impl From<&'static str> for Name {
    fn from(text: &'static str) -> Self {
        Name::Text(Cow::Borrowed(text))
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name::Text(Cow::Owned(text))
    }
}

/// An attribute's value.
#[derive(Debug, Clone)]
pub enum Value {
    /// Text.
    Str(Cow<'static, str>),
    /// A component's sha256, written `sha256:` and hex by the encoder.
    Digest([u8; 32]),
    /// A whole number.
    Int(i64),
    /// A flag.
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Cow::Owned(s))
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// An attribute's value as the encoder reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// Text.
    Str(&'a str),
    /// A component's sha256.
    Digest(&'a [u8; 32]),
    /// A whole number.
    Int(i64),
    /// A flag.
    Bool(bool),
}

impl Value {
    /// The value, to be written.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Str(s) => ValueRef::Str(s),
            Value::Digest(d) => ValueRef::Digest(d),
            Value::Int(i) => ValueRef::Int(*i),
            Value::Bool(b) => ValueRef::Bool(*b),
        }
    }
}

/// Attributes a span takes from something the server shares (a method's registration): written
/// in protobuf once a thread, and copied as bytes into each span after ([`Span::share`]). An
/// attribute the span has set itself wins over one of these with the same key.
pub trait Shared: Send + Sync + fmt::Debug {
    /// Hand each attribute to `out`.
    fn attributes(&self, out: &mut dyn FnMut(&'static str, ValueRef<'_>));
}

/// One bit of 64 for `key`, from its length and four of its bytes (the last two, the middle
/// one, the fourth from the end), mixed by a multiplication: a set of keys' bits rules out a
/// key that is not among them without reading them, unless the key shares a bit with one of
/// them. The multiplier gives each attribute name this server uses a bit of its own (the test
/// `the_servers_attribute_names_have_bits_of_their_own`), so that the checks made on every call
/// (`rpc.system` unless set, a method's attributes against the call's own) never read the
/// attributes; a name added later that shares a bit costs such a read, never a wrong answer.
#[inline(always)]
pub fn key_bit(key: &str) -> u64 {
    let b = key.as_bytes();
    let at = |i: usize| u64::from(b.get(i).copied().unwrap_or(0));
    let n = b.len();
    let x = n as u64
        | at(n.wrapping_sub(1)) << 8
        | at(n.wrapping_sub(2)) << 16
        | at(n / 2) << 24
        | at(n.wrapping_sub(4)) << 32;
    1 << (x.wrapping_mul(0x7249_d149_7eab_71d1) >> 58)
}

/// Something that happened during a span (a line of the guest's log).
#[derive(Debug, Clone)]
pub struct Event {
    /// When, in Unix nanoseconds.
    pub time_ns: u64,
    /// What.
    pub name: &'static str,
    /// Its attributes.
    pub attributes: Vec<(&'static str, Value)>,
}

/// A span's outcome, when it failed.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What went wrong, for the operator.
    pub message: String,
}

/// A step of a span's work, exported as a span of its own, a child of it.
#[derive(Debug, Clone)]
pub struct Child {
    /// What it did.
    pub name: &'static str,
    /// When it started, in Unix nanoseconds.
    pub start_ns: u64,
    /// When it ended, in Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes.
    pub attributes: Vec<(&'static str, Value)>,
    /// What happened during it.
    pub events: Vec<Event>,
}

/// One finished span.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    /// Its trace.
    pub trace_id: [u8; 16],
    /// Itself.
    pub span_id: [u8; 8],
    /// Its parent, if it has one.
    pub parent_span_id: Option<[u8; 8]>,
    /// Whether the parent is another process's.
    pub parent_remote: bool,
    /// The trace's `tracestate`.
    pub state: Option<Arc<str>>,
    /// What it did.
    pub name: Name,
    /// Its kind.
    pub kind: Kind,
    /// When it started, in Unix nanoseconds.
    pub start_ns: u64,
    /// When it ended, in Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes, each key once, in protobuf as they were set: `KeyValue`s, the span's
    /// field 9. Written when set ([`Span::set`]), not kept as values to be written later: a
    /// key given as a literal is then copied as that many bytes, and a call's dozen attributes
    /// cost a sixth of what writing them from a list of values did (docs/benchmarks.md,
    /// "Tracing").
    pub attributes: Vec<u8>,
    /// The [`key_bit`]s of their keys.
    pub attribute_bits: u64,
    /// The text its [`Name::Route`] refers to (the route), kept with its record from span to
    /// span rather than a string each.
    pub text: String,
    /// More of them, from what the server shares ([`Span::share`]): their `KeyValue`s in
    /// protobuf already, as the span's field 9.
    pub shared: Vec<u8>,
    /// What happened during it.
    pub events: Vec<Event>,
    /// Its steps, each exported as a child span.
    pub children: Vec<Child>,
    /// Set when it failed.
    pub failure: Option<Failure>,
}

impl SpanRecord {
    /// Set attribute `key`, which is not set yet: its `KeyValue` appended to
    /// [`SpanRecord::attributes`], its bit to [`SpanRecord::attribute_bits`]. Inlined, so a
    /// literal key is copied as that many bytes.
    #[inline(always)]
    pub fn set(&mut self, key: &str, value: ValueRef<'_>) {
        debug_assert!(
            !super::encode::has_key(&self.attributes, self.attribute_bits, key),
            "{key} set twice"
        );
        super::encode::write_attribute(&mut self.attributes, 9, key, value);
        self.attribute_bits |= key_bit(key);
    }
}

thread_local! {
    /// Records of spans that have ended here, emptied with their room kept, for the next spans
    /// started here: in a steady stream of calls, recording a span, its attributes and its steps
    /// allocates nothing but the text copied from the request.
    // Boxed, as a span holds its record: the boxes are what is kept.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<SpanRecord>>> = const { RefCell::new(Vec::new()) };
}

/// Records kept a thread: about the requests one handles at once.
const MAX_SPARE: usize = 64;

/// A record to start a span in: a spare one, or a new one.
fn spare_record() -> Option<Box<SpanRecord>> {
    SPARE
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
}

/// Empty `record` (written out already) and keep it, if there is room.
fn recycle(mut record: Box<SpanRecord>) {
    record.attributes.clear();
    record.attribute_bits = 0;
    record.text.clear();
    record.shared.clear();
    record.events.clear();
    record.children.clear();
    record.failure = None;
    record.state = None;
    record.name = Name::Text(Cow::Borrowed(""));
    record.end_ns = 0;
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < MAX_SPARE {
            spare.push(record);
        }
    });
}

/// A span being recorded. Ends (and goes to the exporter) when [`Span::end_at`] is called or it
/// is dropped.
#[derive(Debug)]
pub struct Span {
    record: Option<Box<SpanRecord>>,
}

impl Span {
    /// Start recording a span named `name` at `at`, a child of `parent` (in this trace) or the
    /// root of a new trace.
    pub(super) fn start(
        parent: Option<&SpanContext>,
        trace_id: [u8; 16],
        name: Name,
        kind: Kind,
        at: Instant,
    ) -> Span {
        let trace = (trace_id, new_span_id());
        let record = match spare_record() {
            // Emptied by `recycle`: what is not set here is empty already.
            Some(mut record) => {
                (record.trace_id, record.span_id) = trace;
                record.parent_span_id = parent.map(|p| p.span_id);
                record.parent_remote = parent.is_some_and(|p| p.remote);
                record.state = parent.and_then(|p| p.state.clone());
                record.name = name;
                record.kind = kind;
                record.start_ns = unix_nanos(at);
                record
            }
            None => Box::new(SpanRecord {
                trace_id,
                span_id: trace.1,
                parent_span_id: parent.map(|p| p.span_id),
                parent_remote: parent.is_some_and(|p| p.remote),
                state: parent.and_then(|p| p.state.clone()),
                name,
                kind,
                start_ns: unix_nanos(at),
                end_ns: 0,
                attributes: Vec::new(),
                attribute_bits: 0,
                text: String::new(),
                shared: Vec::new(),
                events: Vec::new(),
                children: Vec::new(),
                failure: None,
            }),
        };
        Span {
            record: Some(record),
        }
    }

    /// What a child of this span (here, or on another worker) is given.
    pub fn context(&self) -> SpanContext {
        let r = self.record.as_ref().expect("a span not ended");
        SpanContext {
            trace_id: r.trace_id,
            span_id: r.span_id,
            sampled: true,
            state: r.state.clone(),
            remote: false,
        }
    }

    /// Set attribute `key`, which this span has not set yet (a span sets each key once: the
    /// keys are not searched, which on a call's two dozen attributes would cost more than the
    /// rest of recording it). Written at once, inlined where it is called (see
    /// [`SpanRecord::attributes`]).
    #[inline(always)]
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if let Some(r) = self.record.as_mut() {
            r.set(key, value.into().as_ref());
        }
    }

    /// Take the attributes `bytes` (`KeyValue`s in protobuf, as a span's field 9) whose keys'
    /// [`key_bit`]s are `bits`, written already: a request's, which a thread writes once for a
    /// stream of requests alike (`otel/request_attributes.rs`). None of their keys is set yet.
    pub fn set_written(&mut self, bytes: &[u8], bits: u64) {
        if let Some(r) = self.record.as_mut() {
            r.attributes.extend_from_slice(bytes);
            r.attribute_bits |= bits;
        }
    }

    /// Name the span `method`, a space and `route` (as the router matched it): the route
    /// copied into the record's text. Copied rather than shared: the router's `MatchedPath` is
    /// one reference count for every request on every thread, and taking and dropping
    /// references to it cost more than the copy (its cache line moving between the CPUs).
    pub fn set_route_name(&mut self, method: &'static str, route: &str) {
        if let Some(r) = self.record.as_mut()
            && let (Ok(start), Ok(end)) = (
                u32::try_from(r.text.len()),
                u32::try_from(r.text.len() + route.len()),
            )
        {
            r.text.push_str(route);
            r.name = Name::Route(method, start, end);
        }
    }

    /// Set attribute `key` unless it is set already.
    pub fn set_if_absent(&mut self, key: &'static str, value: impl Into<Value>) {
        let set = self
            .record
            .as_ref()
            .is_some_and(|r| super::encode::has_key(&r.attributes, r.attribute_bits, key));
        if !set {
            self.set(key, value);
        }
    }

    /// Take attributes from `shared` too (see [`Shared`]), but those this span has set
    /// already; a second call replaces the first. They are copied as this thread wrote them
    /// for an earlier span, not written again, and `shared` is not cloned: its reference count
    /// is one for every call of a method on every thread.
    pub fn share<S: Shared + 'static>(&mut self, shared: &Arc<S>) {
        if let Some(r) = self.record.as_mut() {
            r.shared.clear();
            super::encode::write_shared(&mut r.shared, &r.attributes, r.attribute_bits, shared);
        }
    }

    /// Record a step of this span's work, from `start` to `end`, as a child span; returns it, to
    /// add attributes or events to.
    pub fn child(
        &mut self,
        name: &'static str,
        start: Instant,
        end: Instant,
    ) -> Option<&mut Child> {
        let r = self.record.as_mut()?;
        if r.children.capacity() == 0 {
            // A call has three or four steps.
            r.children.reserve(4);
        }
        let start_ns = unix_nanos(start);
        r.children.push(Child {
            name,
            start_ns,
            end_ns: unix_nanos(end).max(start_ns),
            attributes: Vec::new(),
            events: Vec::new(),
        });
        r.children.last_mut()
    }

    /// Mark the span failed, with `message`.
    pub fn fail(&mut self, message: impl Into<String>) {
        if let Some(r) = self.record.as_mut() {
            r.failure = Some(Failure {
                message: message.into(),
            });
        }
    }

    /// End the span at `at` and hand it to the exporter.
    pub fn end_at(mut self, at: Instant) {
        self.finish(at);
    }

    fn finish(&mut self, at: Instant) {
        if let Some(mut record) = self.record.take() {
            record.end_ns = unix_nanos(at).max(record.start_ns);
            super::export::submit(&record);
            recycle(record);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish(Instant::now());
    }
}

/// `at` in nanoseconds since the Unix epoch.
pub fn unix_nanos(at: Instant) -> u64 {
    static BASE: OnceLock<(Instant, u64)> = OnceLock::new();
    let (base, base_ns) = *BASE.get_or_init(|| {
        let ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (Instant::now(), ns)
    });
    if at >= base {
        base_ns + at.duration_since(base).as_nanos() as u64
    } else {
        base_ns.saturating_sub(base.duration_since(at).as_nanos() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::key_bit;

    /// Every attribute name the server sets (`otel/request_attributes.rs`, `service/trace.rs`)
    /// has a bit no other one has: see [`key_bit`].
    #[test]
    fn the_servers_attribute_names_have_bits_of_their_own() {
        let names = [
            "server.address",
            "server.port",
            "network.protocol.version",
            "http.request.method",
            "url.path",
            "http.route",
            "user_agent.original",
            "wasmrpc.admission_wait_us",
            "wasmrpc.slot_wait_us",
            "wasmrpc.instantiate_us",
            "wasmrpc.guest_run_us",
            "wasmrpc.bytes_in",
            "wasmrpc.bytes_out",
            "wasmrpc.code",
            "http.response.status_code",
            "rpc.method",
            "wasmrpc.tenant",
            "wasmrpc.method",
            "wasmrpc.version",
            "wasmrpc.digest",
            "rpc.system",
            "wasmrpc.worker",
            "rpc.service",
            "rpc.grpc.status_code",
            "messaging.system",
            "messaging.destination.name",
            "wasmrpc.size",
            "wasmrpc.compile_cache_hit",
            "wasmrpc.compile_ms",
            "wasmrpc.log_dropped_bytes",
            "message",
        ];
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                assert_ne!(key_bit(a), key_bit(b), "{a} and {b} share a bit");
            }
        }
    }
}

//! The exporter: finished spans wait in bounded batches, and a thread of their own sends them
//! to the collector, over OTLP/HTTP (protobuf) or OTLP/gRPC.
//!
//! A call's span is written in protobuf by the thread that recorded it and copied into that
//! thread's open batch: the exporter's thread has only bytes to send, and is woken when a batch is
//! full, else by its timer, never per span. When the spans waiting reach the queue's size a span is
//! dropped and counted (`wasmrpc_trace_spans_dropped_total{reason="queue_full"}`); a batch the
//! collector does not take is dropped and counted too (`reason="export_failed"`) with a warning at
//! most once a minute, so a collector that is down costs a warning and nothing else.

use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::Notify;

use super::encode::{Head, Origin, write_record};
use super::settings::{Protocol, TraceSettings};
use super::span::SpanRecord;

/// How often at most a failing export is logged.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// The longest a server's shutdown waits for its last spans to leave.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The gRPC method spans are sent to.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Counts of what became of spans, for `/metrics`.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans the collector took.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped_queue_full: AtomicU64,
    /// Spans dropped because their export failed.
    pub dropped_export_failed: AtomicU64,
}

/// The bytes before each batch's spans, for the gRPC frame's prefix.
const HEADROOM: usize = 5;

/// Spare buffers kept for batches to come: one a thread that writes spans, about.
const SPARE_KEPT: usize = 4;

/// Where spans wait for the exporter's thread, in protobuf already: each thread writing spans
/// has an open batch of its own, and full batches wait in one queue.
///
/// A thread's batch is behind a lock that only it takes, but when the exporter's thread takes
/// what every batch holds (once a `OTEL_BSP_SCHEDULE_DELAY`, or to flush): so a span is added
/// with no lock that another CPU took last, and no cache line of the queue moving between
/// CPUs, which one shared open batch cost each span (docs/benchmarks.md, "Tracing").
struct Exporter {
    queue: Mutex<Queue>,
    /// Every thread's open batch (a thread that ended leaves its own here until it is taken).
    open: Mutex<Vec<Arc<Mutex<Batch>>>>,
    /// Records in the queue's full batches: read by each span added, written once a batch.
    queued: AtomicUsize,
    /// What goes in front of each batch's spans.
    head: Head,
    /// The room a batch keeps for it ([`Head::room`]).
    room: usize,
    /// Woken when a batch is full, or to flush.
    wake: Notify,
    /// Set to have the open batches taken and sent now (a flush).
    flush_asked: AtomicBool,
    /// Woken by the thread once the queue was emptied after a flush was asked for.
    flushed: Notify,
    max_queue: usize,
    max_batch: usize,
}

/// Full batches waiting for the exporter's thread.
struct Queue {
    /// Oldest first.
    full: VecDeque<Batch>,
    /// Buffers of sent batches, to be filled again.
    spare: Vec<Vec<u8>>,
}

/// Spans in protobuf after room for the request's head ([`Head::room`]).
struct Batch {
    bytes: Vec<u8>,
    /// Records (a span with its steps counts one), against the batch size.
    records: usize,
    /// Spans, steps included, for the counts of `/metrics`.
    spans: u64,
}

impl Batch {
    /// An empty batch in `bytes`, `room` bytes kept in front.
    fn new(mut bytes: Vec<u8>, room: usize) -> Batch {
        bytes.clear();
        bytes.resize(room, 0);
        Batch {
            bytes,
            records: 0,
            spans: 0,
        }
    }
}

/// `mutex` locked, poisoned or not (what it guards is bytes and counts, whole after a panic).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Exporter {
    fn new(head: Head, max_queue: usize, max_batch: usize) -> Exporter {
        Exporter {
            queue: Mutex::new(Queue {
                full: VecDeque::new(),
                spare: Vec::new(),
            }),
            open: Mutex::new(Vec::new()),
            queued: AtomicUsize::new(0),
            room: head.room(HEADROOM),
            head,
            wake: Notify::new(),
            flush_asked: AtomicBool::new(false),
            flushed: Notify::new(),
            max_queue,
            max_batch,
        }
    }

    /// A new open batch for a thread, known to the exporter's thread.
    fn open_batch(&self) -> Arc<Mutex<Batch>> {
        let batch = Arc::new(Mutex::new(self.new_batch()));
        lock(&self.open).push(batch.clone());
        batch
    }

    /// An empty batch, in a spare buffer if there is one.
    fn new_batch(&self) -> Batch {
        Batch::new(lock(&self.queue).spare.pop().unwrap_or_default(), self.room)
    }

    /// Write `record` into `open` (its thread's batch), or drop it when the spans waiting have
    /// reached the queue's size; a batch that is full goes to the queue.
    ///
    /// The record is written straight into the batch, whose next lines were fetched for
    /// writing after the record before ([`prefetch_for_writing`]): the batch is hundreds of
    /// kilobytes, in lines no cache of this CPU holds any more (the kernel read the last batch
    /// in that buffer from the exporter's CPU), and without the lines fetched ahead each small
    /// write of protobuf waited on its line. (A scratch buffer copied in whole did better
    /// before the prefetch, and before a record's attributes were written as it was recorded;
    /// since both it costs 1.5 points of P1 traced, docs/benchmarks.md, "Tracing".) A record
    /// that is dropped is not written.
    fn add(&self, open: &Mutex<Batch>, record: &SpanRecord) {
        let spans = 1 + record.children.len() as u64;
        let mut batch = lock(open);
        if self.queued.load(Ordering::Relaxed) + batch.records >= self.max_queue {
            drop(batch);
            STATS.dropped_queue_full.fetch_add(spans, Ordering::Relaxed);
            return;
        }
        write_record(&mut batch.bytes, record);
        batch.records += 1;
        batch.spans += spans;
        let full = (batch.records >= self.max_batch)
            .then(|| std::mem::replace(&mut *batch, self.new_batch()));
        prefetch_for_writing(&batch.bytes);
        drop(batch);
        if let Some(full) = full {
            self.enqueue(full);
            self.wake.notify_one();
        }
    }

    fn enqueue(&self, batch: Batch) {
        let mut queue = lock(&self.queue);
        self.queued.fetch_add(batch.records, Ordering::Relaxed);
        queue.full.push_back(batch);
    }

    /// Move what every thread's open batch holds to the queue (their wait is over, or a flush
    /// was asked for), and forget the batches of threads that have ended.
    fn take_open(&self) {
        lock(&self.open).retain(|open| {
            let mut batch = lock(open);
            if batch.records > 0 {
                let taken = std::mem::replace(&mut *batch, self.new_batch());
                drop(batch);
                self.enqueue(taken);
            }
            // Held by its thread too while that thread lives.
            Arc::strong_count(open) > 1
        });
    }

    /// The oldest full batch, taken to be sent.
    fn take(&self) -> Option<Batch> {
        let batch = lock(&self.queue).full.pop_front()?;
        self.queued.fetch_sub(batch.records, Ordering::Relaxed);
        Some(batch)
    }

    /// Keep a sent batch's buffer (when it came back) for a batch to come.
    fn keep(&self, buffer: Option<Vec<u8>>) {
        if let Some(buffer) = buffer {
            let mut queue = lock(&self.queue);
            if queue.spare.len() < SPARE_KEPT {
                queue.spare.push(buffer);
            }
        }
    }
}

/// The bytes after a batch's end that its next record is likely to take (a call's four spans
/// are about 900).
const NEXT_RECORD: usize = 1024;

/// Ask this CPU to fetch the lines after `bytes`' end (within its capacity) into its cache for
/// writing, while the thread goes on with other work: the next record is copied there. Those
/// lines were read last by the kernel, on the exporter's CPU, and without this the copy's stores
/// wait on them at the batch's unlock, which `perf annotate` showed as most of `submit`'s time
/// (docs/benchmarks.md, "Tracing").
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn prefetch_for_writing(bytes: &Vec<u8>) {
    #[cfg(target_arch = "x86_64")]
    if *HAS_PREFETCHW {
        let room = (bytes.capacity() - bytes.len()).min(NEXT_RECORD);
        let end = bytes.as_ptr().wrapping_add(bytes.len());
        for offset in (0..room).step_by(64) {
            // SAFETY: PREFETCHW (which this CPU has) is a hint: it reads and writes nothing
            // and does not fault. The addresses are within the vector's allocation besides.
            unsafe {
                std::arch::asm!(
                    "prefetchw [{}]",
                    in(reg) end.wrapping_add(offset),
                    options(nostack, preserves_flags, readonly)
                );
            }
        }
    }
}

/// Whether this CPU has `PREFETCHW` (CPUID 8000_0001h, ECX bit 8): Intel's since Broadwell,
/// AMD's for many generations before. Rust's name for the feature, `prfchw`, is not stable yet.
#[cfg(target_arch = "x86_64")]
static HAS_PREFETCHW: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
    let extended = std::arch::x86_64::__cpuid(0x8000_0000).eax;
    extended >= 0x8000_0001 && std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0
});

static EXPORTER: OnceLock<Arc<Exporter>> = OnceLock::new();
static STATS: ExportStats = ExportStats {
    exported: AtomicU64::new(0),
    dropped_queue_full: AtomicU64::new(0),
    dropped_export_failed: AtomicU64::new(0),
};

/// What became of spans so far.
pub fn stats() -> &'static ExportStats {
    &STATS
}

thread_local! {
    /// This thread's open batch, once it has written a span.
    static OPEN: OnceCell<Arc<Mutex<Batch>>> = const { OnceCell::new() };
}

/// Hand a finished span to the exporter (a no-op when none is installed): it is written in
/// protobuf here, on the thread that recorded it, for this thread's open batch, so that the
/// record stays with this thread to be used again and the exporter's thread has only bytes to
/// send.
pub fn submit(record: &SpanRecord) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    let _ = OPEN.try_with(|open| exporter.add(open.get_or_init(|| exporter.open_batch()), record));
}

/// Start the exporter's thread, sending to `settings`' collector as `origin`. Once a process:
/// a second call (another embedded server) keeps the first exporter.
///
/// # Errors
/// The thread or its runtime could not be started, or the CA file cannot be read.
pub fn install(settings: &TraceSettings, origin: Origin) -> anyhow::Result<bool> {
    if EXPORTER.get().is_some() {
        return Ok(false);
    }
    let tls = match settings.endpoint.starts_with("https:") {
        true => Some(tls_config(settings)?),
        false => None,
    };
    let exporter = Arc::new(Exporter::new(
        Head::new(&origin),
        settings.max_queue,
        settings.max_batch,
    ));
    if EXPORTER.set(exporter.clone()).is_err() {
        return Ok(false);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let sender = Sender {
        settings: settings.clone(),
        tls,
        connection: None,
        last_warning: None,
    };
    std::thread::Builder::new()
        .name("wasmrpc-otlp".into())
        .spawn(move || runtime.block_on(sender.run(exporter)))?;
    Ok(true)
}

/// Send what is queued now and wait (at most `timeout`) until it has left: a server's last
/// spans at shutdown.
pub async fn flush(timeout: Duration) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    let flushed = exporter.flushed.notified();
    exporter.flush_asked.store(true, Ordering::Release);
    exporter.wake.notify_one();
    let _ = tokio::time::timeout(timeout, flushed).await;
}

/// The exporter's thread: batches out, one export at a time.
struct Sender {
    settings: TraceSettings,
    tls: Option<Arc<rustls::ClientConfig>>,
    connection: Option<Connection>,
    last_warning: Option<Instant>,
}

impl Sender {
    /// Send full batches as they come, and every thread's open batch once a
    /// `OTEL_BSP_SCHEDULE_DELAY` (or when a flush asks), one export at a time.
    async fn run(mut self, exporter: Arc<Exporter>) {
        let delay = self.settings.delay;
        let mut taken_open = Instant::now();
        loop {
            let wait = delay.saturating_sub(taken_open.elapsed());
            let _ = tokio::time::timeout(wait, exporter.wake.notified()).await;
            // Again while flushes are asked for, so that a flush asked during a send is not
            // told of spans sent before its own.
            loop {
                let flush = exporter.flush_asked.swap(false, Ordering::AcqRel);
                if flush || taken_open.elapsed() >= delay {
                    exporter.take_open();
                    taken_open = Instant::now();
                }
                while let Some(mut batch) = exporter.take() {
                    let start = exporter.head.finish(&mut batch.bytes, HEADROOM);
                    let n = batch.spans;
                    let (buffer, sent) = self.send(batch.bytes, start).await;
                    exporter.keep(buffer);
                    match sent {
                        Ok(()) => {
                            STATS.exported.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(why) => {
                            STATS.dropped_export_failed.fetch_add(n, Ordering::Relaxed);
                            self.connection = None;
                            self.warn(n, &why);
                        }
                    }
                }
                if !exporter.flush_asked.load(Ordering::Acquire) {
                    break;
                }
            }
            exporter.flushed.notify_waiters();
        }
    }

    fn warn(&mut self, spans: u64, why: &str) {
        if self
            .last_warning
            .is_some_and(|at| at.elapsed() < WARN_EVERY)
        {
            return;
        }
        self.last_warning = Some(Instant::now());
        tracing::warn!(
            endpoint = %self.settings.endpoint_for_display(),
            spans,
            "could not export spans ({why}); they are dropped, calls go on (counted in \
             wasmrpc_trace_spans_dropped_total; this warning at most once a minute)"
        );
    }

    /// Send the request whose bytes are `body[start..]` (with at least 5 bytes before them for
    /// the gRPC frame's prefix), within the export timeout; `body`'s buffer comes back once
    /// nothing else holds it.
    async fn send(
        &mut self,
        mut body: Vec<u8>,
        start: usize,
    ) -> (Option<Vec<u8>>, Result<(), String>) {
        let uri: http::Uri = match self.settings.endpoint.parse() {
            Ok(uri) => uri,
            Err(e) => return (Some(body), Err(format!("{e}"))),
        };
        let mut from = start;
        if self.settings.protocol == Protocol::Grpc {
            // The frame's prefix: not compressed, then the message's length.
            let len = (body.len() - start) as u32;
            body[start - 5] = 0;
            body[start - 4..start].copy_from_slice(&len.to_be_bytes());
            from = start - 5;
        }
        let whole = Bytes::from(body);
        let timeout = self.settings.timeout;
        let sent =
            match tokio::time::timeout(timeout, self.send_bytes(&uri, whole.slice(from..))).await {
                Ok(sent) => sent,
                Err(_) => Err(format!("no answer within {timeout:?}")),
            };
        // The body was written (or dropped) by now: its buffer can be filled again.
        (whole.try_into_mut().ok().map(Vec::from), sent)
    }

    async fn send_bytes(&mut self, uri: &http::Uri, body: Bytes) -> Result<(), String> {
        let (path, content_type) = match self.settings.protocol {
            Protocol::HttpProtobuf => (
                uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
                "application/x-protobuf",
            ),
            Protocol::Grpc => {
                let base = uri.path().trim_end_matches('/');
                (format!("{base}{GRPC_EXPORT}"), "application/grpc")
            }
        };
        if self.connection.as_ref().is_none_or(Connection::is_closed) {
            self.connection = Some(self.connect(uri).await?);
        }
        let authority = uri.authority().map_or("", |a| a.as_str()).to_owned();
        let scheme = uri.scheme_str().unwrap_or("http");
        // HTTP/1.1 names the path alone (origin form, RFC 9112 §3.2.1: a server may refuse a
        // full URL from a client that is not talking to a proxy); HTTP/2 carries the whole URL in
        // its pseudo-headers.
        let target = match self.settings.protocol {
            Protocol::HttpProtobuf => path.clone(),
            Protocol::Grpc => format!("{scheme}://{authority}{path}"),
        };
        let mut request = http::Request::post(target)
            .header(http::header::CONTENT_TYPE, content_type)
            .header(
                http::header::USER_AGENT,
                concat!("wasmrpc/", env!("CARGO_PKG_VERSION")),
            );
        if self.settings.protocol == Protocol::Grpc {
            request = request.header("te", "trailers");
        } else {
            request = request.header(http::header::HOST, authority.as_str());
        }
        for (k, v) in &self.settings.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let connection = self.connection.as_mut().expect("connected above");
        let response = connection.send(request).await?;
        let status = response.status();
        let grpc_status_in_headers = grpc_status(response.headers());
        let collected = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading the collector's answer: {e}"))?;
        if !status.is_success() {
            return Err(format!("the collector answered HTTP {status}"));
        }
        if self.settings.protocol == Protocol::Grpc {
            let code = grpc_status_in_headers
                .or_else(|| collected.trailers().and_then(grpc_status))
                .unwrap_or_else(|| ("missing".to_owned(), String::new()));
            if code.0 != "0" {
                return Err(format!(
                    "the collector answered gRPC status {} {}",
                    code.0, code.1
                ));
            }
        }
        Ok(())
    }

    async fn connect(&self, uri: &http::Uri) -> Result<Connection, String> {
        let host = uri.host().ok_or("the endpoint has no host")?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let tls = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let h2 = self.settings.protocol == Protocol::Grpc;
        match &self.tls {
            None => handshake(TokioIo::new(tcp), h2).await,
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|e| format!("{host}: {e}"))?;
                let stream = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {host}: {e}"))?;
                handshake(TokioIo::new(stream), h2).await
            }
        }
    }
}

/// A connection to the collector, kept between exports.
enum Connection {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Connection {
    fn is_closed(&self) -> bool {
        match self {
            Connection::Http1(s) => s.is_closed(),
            Connection::Http2(s) => s.is_closed(),
        }
    }

    async fn send(
        &mut self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, String> {
        let sent = match self {
            Connection::Http1(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(request).await
            }
            Connection::Http2(s) => {
                s.ready().await.map_err(|e| e.to_string())?;
                s.send_request(request).await
            }
        };
        sent.map_err(|e| format!("sending to the collector: {e}"))
    }
}

async fn handshake<I>(io: TokioIo<I>, h2: bool) -> Result<Connection, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if h2 {
        let (sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("HTTP/2 with the collector: {e}"))?;
        tokio::spawn(connection);
        Ok(Connection::Http2(sender))
    } else {
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP/1.1 with the collector: {e}"))?;
        tokio::spawn(connection);
        Ok(Connection::Http1(sender))
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<(String, String)> {
    let code = headers.get("grpc-status")?.to_str().ok()?.to_owned();
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("")
        .to_owned();
    Some((code, message))
}

/// TLS to the collector: the web PKI's roots, and those of the configured CA file.
fn tls_config(settings: &TraceSettings) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(file) = &settings.certificate {
        let pem = std::fs::read(file).map_err(|e| {
            anyhow::anyhow!("OTEL_EXPORTER_OTLP_CERTIFICATE {}: {e}", file.display())
        })?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| {
                anyhow::anyhow!("OTEL_EXPORTER_OTLP_CERTIFICATE {}: {e}", file.display())
            })?;
            roots.add(cert)?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = match settings.protocol {
        Protocol::Grpc => vec![b"h2".to_vec()],
        Protocol::HttpProtobuf => vec![b"http/1.1".to_vec()],
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::span::{Child, Name};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    /// An exporter that is not installed: its queue, with no thread sending.
    fn exporter(max_queue: usize, max_batch: usize) -> Exporter {
        let origin = Origin {
            resource: vec![("service.name".to_owned(), "test".to_owned())],
            scope: "wasmrpc",
            version: "0",
        };
        Exporter::new(Head::new(&origin), max_queue, max_batch)
    }

    /// A call's span, `id` its span id's first byte, with one step.
    fn record(id: u8) -> SpanRecord {
        SpanRecord {
            trace_id: [1; 16],
            span_id: [id; 8],
            parent_span_id: None,
            parent_remote: false,
            state: None,
            name: Name::from("call add"),
            kind: crate::otel::Kind::Internal,
            start_ns: 10,
            end_ns: 20,
            attributes: Vec::new(),
            attribute_bits: 0,
            text: String::new(),
            shared: Vec::new(),
            events: Vec::new(),
            children: vec![Child {
                name: "run",
                start_ns: 11,
                end_ns: 19,
                attributes: Vec::new(),
                events: Vec::new(),
            }],
            failure: None,
        }
    }

    /// The spans' ids (first bytes) of `batch`, read with the official definitions.
    fn ids(exporter: &Exporter, mut batch: Batch) -> Vec<u8> {
        let start = exporter.head.finish(&mut batch.bytes, HEADROOM);
        let request = ExportTraceServiceRequest::decode(&batch.bytes[start..]).expect("decodes");
        request.resource_spans[0].scope_spans[0]
            .spans
            .iter()
            .map(|s| s.span_id[0])
            .collect()
    }

    #[test]
    fn a_full_batch_is_queued_at_once_and_an_open_one_when_taken() {
        let exporter = exporter(100, 2);
        let open = exporter.open_batch();
        exporter.add(&open, &record(1));
        assert!(
            exporter.take().is_none(),
            "one span of two: the batch is open"
        );
        exporter.add(&open, &record(2));
        let full = exporter.take().expect("a full batch is queued");
        assert_eq!((full.records, full.spans), (2, 4));
        let child = crate::otel::encode::child_id(&[1; 8], 0)[0];
        assert_eq!(
            ids(&exporter, full),
            [1, child, 2, crate::otel::encode::child_id(&[2; 8], 0)[0]]
        );

        exporter.add(&open, &record(3));
        assert!(exporter.take().is_none());
        exporter.take_open();
        let taken = exporter.take().expect("the open batch, taken");
        assert_eq!(taken.records, 1);
        assert_eq!(ids(&exporter, taken)[0], 3);
        exporter.take_open();
        assert!(exporter.take().is_none(), "nothing twice");
    }

    #[test]
    fn spans_past_the_queue_are_dropped_and_counted() {
        let exporter = exporter(4, 2);
        let open = exporter.open_batch();
        let dropped = || STATS.dropped_queue_full.load(Ordering::Relaxed);
        let before = dropped();
        for id in 1..=4 {
            exporter.add(&open, &record(id));
        }
        assert_eq!(dropped(), before, "four fit");
        exporter.add(&open, &record(5));
        assert_eq!(dropped(), before + 2, "the fifth and its step are dropped");
        // Sent: room again.
        assert!(exporter.take().is_some());
        exporter.add(&open, &record(6));
        assert_eq!(dropped(), before + 2);
        exporter.take_open();
        let mut left = Vec::new();
        while let Some(batch) = exporter.take() {
            // Each span, then its step.
            left.extend(ids(&exporter, batch).into_iter().step_by(2));
        }
        assert_eq!(left, [3, 4, 6]);
    }

    #[test]
    fn a_thread_that_ended_leaves_its_spans_to_be_taken() {
        let exporter = Arc::new(exporter(100, 10));
        let from_thread = exporter.clone();
        std::thread::spawn(move || {
            let open = from_thread.open_batch();
            from_thread.add(&open, &record(7));
        })
        .join()
        .unwrap();
        assert_eq!(lock(&exporter.open).len(), 1);
        exporter.take_open();
        assert_eq!(ids(&exporter, exporter.take().expect("its batch"))[0], 7);
        assert!(lock(&exporter.open).is_empty(), "forgotten once taken");
    }
}

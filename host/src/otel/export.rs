//! The exporter: finished spans wait in one bounded queue, and a thread of their own sends them
//! in batches to the collector, over OTLP/HTTP (protobuf) or OTLP/gRPC.
//!
//! A call's span is written in protobuf by the thread that recorded it and its bytes added to
//! the open batch under a lock: the exporter's thread has only bytes to send, and is woken when
//! a batch is full, else by its timer, never per span. When the queue is full a span is dropped
//! and counted (`wasmrpc_trace_spans_dropped_total{reason="queue_full"}`); a batch the collector
//! does not take is dropped and counted too (`reason="export_failed"`) with a warning at most
//! once a minute, so a collector that is down costs a warning and nothing else.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
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

/// The queue between the calls and the exporter's thread: spans already in protobuf, batch by
/// batch.
struct Exporter {
    queue: Mutex<Queue>,
    /// What goes in front of each batch's spans.
    head: Head,
    /// The room a batch keeps for it ([`Head::room`]).
    room: usize,
    /// Woken when a batch is full, or to flush.
    wake: Notify,
    /// Woken by the thread once the queue was emptied after a flush was asked for.
    flushed: Notify,
    max_queue: usize,
    max_batch: usize,
}

/// Batches waiting for the exporter's thread.
struct Queue {
    /// Full ones, oldest first.
    full: VecDeque<Batch>,
    /// The one spans are added to.
    open: Batch,
    /// Records in all of them (a span with its steps counts one).
    records: usize,
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

impl Queue {
    /// A new batch, in a spare buffer if there is one.
    fn new_batch(&mut self, room: usize) -> Batch {
        Batch::new(self.spare.pop().unwrap_or_default(), room)
    }

    /// The oldest batch with spans in it, taken to be sent.
    fn take(&mut self, room: usize) -> Option<Batch> {
        let batch = match self.full.pop_front() {
            Some(batch) => batch,
            None if self.open.records > 0 => {
                let next = self.new_batch(room);
                std::mem::replace(&mut self.open, next)
            }
            None => return None,
        };
        self.records -= batch.records;
        Some(batch)
    }
}

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
    /// Where a span is written before it is added to the queue: in this thread's cache, and
    /// not under the queue's lock.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Hand a finished span to the exporter (a no-op when none is installed): it is written in
/// protobuf here, on the thread that recorded it, and its bytes added to the open batch, so
/// that the record stays with this thread to be used again and the exporter's thread has only
/// bytes to send.
pub fn submit(record: &SpanRecord) {
    let Some(exporter) = EXPORTER.get() else {
        return;
    };
    let spans = 1 + record.children.len() as u64;
    let _ = SCRATCH.try_with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.clear();
        write_record(&mut scratch, record);
        let mut queue = exporter
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if queue.records >= exporter.max_queue {
            drop(queue);
            STATS.dropped_queue_full.fetch_add(spans, Ordering::Relaxed);
            return;
        }
        queue.records += 1;
        let open = &mut queue.open;
        open.bytes.extend_from_slice(&scratch);
        open.records += 1;
        open.spans += spans;
        let full = open.records >= exporter.max_batch;
        if full {
            let next = queue.new_batch(exporter.room);
            let batch = std::mem::replace(&mut queue.open, next);
            queue.full.push_back(batch);
        }
        drop(queue);
        if full {
            exporter.wake.notify_one();
        }
    });
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
    let head = Head::new(&origin);
    let room = head.room(HEADROOM);
    let queue = Queue {
        full: VecDeque::new(),
        open: Batch::new(Vec::new(), room),
        records: 0,
        spare: Vec::new(),
    };
    let exporter = Arc::new(Exporter {
        queue: Mutex::new(queue),
        head,
        room,
        wake: Notify::new(),
        flushed: Notify::new(),
        max_queue: settings.max_queue,
        max_batch: settings.max_batch,
    });
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
    async fn run(mut self, exporter: Arc<Exporter>) {
        loop {
            let _ = tokio::time::timeout(self.settings.delay, exporter.wake.notified()).await;
            loop {
                let batch = exporter
                    .queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(exporter.room);
                let Some(mut batch) = batch else {
                    break;
                };
                let start = exporter.head.finish(&mut batch.bytes, HEADROOM);
                let n = batch.spans;
                let (buffer, sent) = self.send(batch.bytes, start).await;
                self.keep(&exporter, buffer);
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
            exporter.flushed.notify_waiters();
        }
    }

    /// Give a sent batch's buffer (when it came back) to the queue, for a batch to come.
    fn keep(&self, exporter: &Exporter, buffer: Option<Vec<u8>>) {
        if let Some(buffer) = buffer {
            let mut queue = exporter
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // A full batch and the open one: a third is rarely needed.
            if queue.spare.len() < 2 {
                queue.spare.push(buffer);
            }
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

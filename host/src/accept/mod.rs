//! Accepting connections: HTTP/1.1 and HTTP/2 on one port (h2c prior knowledge, or h2 and
//! HTTP/1.1 over TLS by ALPN when a certificate is given), caps on open connections (in all and
//! per peer), header read timeout, idle timeout, and graceful shutdown that drains in-flight
//! requests.
//!
//! Takes an already-bound listener and a shutdown future, so tests run it on port 0. The
//! embeddable [`crate::Server`] and `wasmrpc serve` both run their app through it.

mod deadline;
mod idle;
mod peers;
mod threads;
mod tidy;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use deadline::OpeningDeadline;
use idle::{Activity, CountRequests};
use peers::Peers;
use threads::ConnectionThreads;
use tidy::TidyAfterWrites;

/// How the listener treats connections.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Time a client may take to send a request's headers (HTTP/1.1), and, from when its
    /// connection is accepted, to finish the TLS handshake and send the first bytes of HTTP
    /// (the HTTP/2 preface or the start of a request), so a silent client cannot hold a
    /// connection.
    pub header_read_timeout: Duration,
    /// A connection with no request in progress for this long is closed (HTTP/2: GOAWAY, then
    /// close); PINGs do not count (`accept/idle.rs`).
    pub idle_timeout: Duration,
    /// Connections open at once from one IP address; past it a new one from that address is
    /// refused as past `max_connections` (`accept/peers.rs`).
    pub max_connections_per_peer: usize,
    /// How long shutdown waits for in-flight requests before closing connections.
    pub drain_timeout: Duration,
    /// Serve TLS with this configuration (see `tls_config`); `None` serves cleartext.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections open at once; past it a new connection is closed at once (after a 503 on a
    /// cleartext port), so a flood of idle connections cannot use up the process's descriptors.
    pub max_connections: usize,
    /// Threads with an event loop of their own that cleartext HTTP/1.1 connections are handed
    /// to (the one with the fewest open); 0 serves every connection on the runtime that accepts
    /// it, as HTTP/2 and TLS connections always are. Why: `accept/threads.rs`.
    pub connection_threads: usize,
    /// What each connection thread runs as it starts, wakes and sleeps, and what any thread
    /// serving a connection runs after writing to it (the server's thread choreography,
    /// `threads/`; none by default).
    pub thread_hooks: ThreadHooks,
}

/// Functions the accept loop is handed to run on the threads that serve connections, so that it
/// needs to know nothing of what they do (`threads/` makes them: priority, CPU reserve, a
/// finished call's store reset after its answer).
#[derive(Clone, Default)]
pub struct ThreadHooks {
    /// Run once on a new connection thread, before it serves anything.
    pub on_start: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Run each time a connection thread wakes from waiting for work.
    pub on_unpark: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Run each time a connection thread is about to wait for work.
    pub on_park: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Run after bytes were written to a connection, on the thread that wrote them (any thread
    /// serving connections): a plain function, as it runs once a write.
    pub after_write: Option<fn()>,
}

impl std::fmt::Debug for ThreadHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadHooks")
            .field("on_start", &self.on_start.is_some())
            .field("on_unpark", &self.on_unpark.is_some())
            .field("on_park", &self.on_park.is_some())
            .field("after_write", &self.after_write.is_some())
            .finish()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            // Longer than any pause between the calls of a client at work (the SDKs keep their
            // connections between calls), short enough that a connection left open by a client
            // that went away is soon given back; hyper's own header timeout already ends an
            // idle HTTP/1.1 connection sooner (10 s).
            idle_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(30),
            tls: None,
            max_connections: 10_000,
            // Half the global cap: one machine cannot fill the server, and a local benchmark or
            // test keeps its room. Connections a client has already dropped count until the
            // server notices: 10 000 calls hung up at once from one address
            // (`clients_that_disconnect_mid_call_leave_no_busy_slot_behind`) held more than
            // 1 000, and sometimes 1 500, on a loaded 2-CPU machine.
            max_connections_per_peer: 5_000,
            connection_threads: 0,
            thread_hooks: ThreadHooks::default(),
        }
    }
}

/// HTTP/2 streams one connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// Streams a client may open and reset before the server has even accepted them (the "rapid
/// reset" pattern); past it the connection is closed with GOAWAY, so resetting streams cannot
/// cost the server more than it costs the client.
const MAX_PENDING_RESET_STREAMS: usize = 20;

/// Streams the server itself may reset (for a client's protocol errors) before closing the
/// connection.
const MAX_LOCAL_RESET_STREAMS: usize = 256;

/// Bytes of headers one request may carry, over HTTP/1.1 and HTTP/2 alike.
const MAX_HEADER_BYTES: u32 = 64 << 10;

/// HTTP/2 flow control sized for tensors of megabytes: what a client may send on one stream,
/// and on the whole connection, before the server reads it (request bodies are read whole
/// anyway, up to `--max-request-bytes`), and the largest frame it may send. hyper's defaults
/// (16 KiB frames, windows of a megabyte or less) cost a 16 MiB tensor a thousand frames and
/// many round trips of window updates.
const H2_STREAM_WINDOW: u32 = 8 << 20;
const H2_CONNECTION_WINDOW: u32 = 16 << 20;
const H2_MAX_FRAME: u32 = 1 << 20;

/// What a client past the connection cap reads before the server hangs up.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 85\r\n\r\n{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"the server has too many open connections\"}}";

/// What a client past the per-peer cap reads before the server hangs up.
fn too_many_from_this_peer() -> Vec<u8> {
    let body = "{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"this address has too many \
                connections open to the server; close some, or raise the server's \
                --max-connections-per-peer\"}}";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: \
         close\r\nretry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A TLS configuration from a PEM certificate chain (leaf first) and a PEM private key (PKCS#8,
/// PKCS#1 or SEC1), offering h2 and HTTP/1.1 by ALPN. Uses the `ring` provider explicitly, so no
/// process-wide default provider is needed.
///
/// # Errors
/// A file that cannot be read or holds no certificate or key (the message names the file), or
/// a key that does not match the certificate or is of an unsupported kind.
pub fn tls_config(cert_path: &Path, key_path: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let cert_pem = std::fs::read(cert_path)
        .map_err(|e| anyhow::anyhow!("reading the TLS certificate {}: {e}", cert_path.display()))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "the TLS certificate {} is not valid PEM: {e}",
                cert_path.display()
            )
        })?;
    if chain.is_empty() {
        anyhow::bail!(
            "the TLS certificate {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            cert_path.display()
        );
    }
    let key_pem = std::fs::read(key_path)
        .map_err(|e| anyhow::anyhow!("reading the TLS key {}: {e}", key_path.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        anyhow::anyhow!(
            "the TLS key {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
            key_path.display()
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| anyhow::anyhow!("setting up TLS: {e}"))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| {
        anyhow::anyhow!(
            "the TLS key {} cannot be used with the certificate {}: {e}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serve `app` on `listener` until `shutdown` resolves, then stop accepting and let in-flight
/// requests finish (at most `drain_timeout`).
///
/// # Errors
/// Never for a single bad connection (those are logged); only if accepting fails for good.
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send,
    options: ServeOptions,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(MAX_HEADER_BYTES as usize)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .max_pending_accept_reset_streams(MAX_PENDING_RESET_STREAMS)
        .max_local_error_reset_streams(MAX_LOCAL_RESET_STREAMS)
        .max_header_list_size(MAX_HEADER_BYTES)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_frame_size(H2_MAX_FRAME)
        .keep_alive_interval(Some(Duration::from_secs(20)));
    let connections = Arc::new(tokio::sync::Semaphore::new(options.max_connections));
    let peers = Peers::new(options.max_connections_per_peer);
    let builder = Arc::new(builder);
    let tls = options.tls.clone().map(TlsAcceptor::from);
    // Only for cleartext: a TLS connection's protocol is known only after its handshake.
    let threads = match (options.connection_threads, &tls) {
        (0, _) | (_, Some(_)) => None,
        (n, None) => Some(Arc::new(ConnectionThreads::start(
            n,
            &options.thread_hooks,
        )?)),
    };
    // Shutdown is sent to every connection, and waited for until each has let go of its
    // receiver (hyper-util's GracefulShutdown, but a connection may also end itself when idle).
    let (drain, _) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let accepted_at = tokio::time::Instant::now();
        let Some(peer_slot) = peers.admit(peer.ip()) else {
            tracing::debug!(%peer, "connection refused: at the per-peer connection cap");
            refuse(stream, tls.is_none(), too_many_from_this_peer());
            continue;
        };
        let Ok(slot) = connections.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "connection refused: at the connection cap");
            refuse(stream, tls.is_none(), TOO_MANY_CONNECTIONS.to_vec());
            continue;
        };
        // Taken before the task starts, so shutdown also waits for a connection still in its
        // TLS handshake (which the header read timeout bounds).
        let stop = drain.subscribe();
        let (builder, tls, app) = (builder.clone(), tls.clone(), app.clone());
        let opening_deadline = accepted_at + options.header_read_timeout;
        let handshake_timeout = options.header_read_timeout;
        let timing = Timing {
            opening_deadline,
            idle_timeout: options.idle_timeout,
            after_write: options.thread_hooks.after_write,
        };
        let serve = move |stream: TcpStream| async move {
            let _slots = (slot, peer_slot);
            match tls {
                None => serve_connection(&builder, stream, app, stop, peer, timing).await,
                Some(acceptor) => {
                    if let Some(stream) =
                        handshake(&acceptor, stream, opening_deadline, handshake_timeout, peer)
                            .await
                    {
                        serve_connection(&builder, stream, app, stop, peer, timing).await;
                    }
                }
            }
        };
        match &threads {
            None => {
                tokio::spawn(serve(stream));
            }
            Some(threads) => {
                let threads = threads.clone();
                tokio::spawn(async move {
                    match first_bytes(&stream, handshake_timeout).await {
                        // HTTP/2 stays here: its streams run on this runtime's workers, and a
                        // connection on another thread would cost two wake-ups a request.
                        FirstBytes::Http2 => serve(stream).await,
                        FirstBytes::Other => threads.hand_over(stream, serve),
                        FirstBytes::None => {
                            tracing::debug!(%peer, "closed: nothing sent within the header timeout");
                        }
                    }
                });
            }
        }
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    let _ = drain.send(());
    tokio::select! {
        () = drain.closed() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(options.drain_timeout) => {
            tracing::warn!("drain timeout passed; closing remaining connections");
        }
    }
    drop(threads);
    Ok(())
}

/// Answer a connection refused at a cap: `answer` on a cleartext port (a TLS client could not
/// read it), then close, without holding up the accept loop.
fn refuse(stream: TcpStream, cleartext: bool, answer: Vec<u8>) {
    tokio::spawn(async move {
        if cleartext {
            use tokio::io::AsyncWriteExt as _;
            let mut stream = stream;
            let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&answer)).await;
        }
    });
}

/// The clocks of one connection.
#[derive(Clone, Copy)]
struct Timing {
    /// When the TLS handshake (if any) and the first bytes of HTTP must have come.
    opening_deadline: tokio::time::Instant,
    /// Closed after this long without a request in progress.
    idle_timeout: Duration,
    /// Run after each write (`ThreadHooks::after_write`).
    after_write: Option<fn()>,
}

/// What a cleartext connection opens with.
enum FirstBytes {
    /// The HTTP/2 connection preface (prior knowledge), or the start of it.
    Http2,
    /// Anything else: HTTP/1.1, or bytes the HTTP stack will refuse.
    Other,
    /// Nothing within the timeout, or the connection closed.
    None,
}

/// Look at the first bytes of `stream` without reading them, for at most `timeout`.
async fn first_bytes(stream: &TcpStream, timeout: Duration) -> FirstBytes {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let mut head = [0u8; PREFACE.len()];
    match tokio::time::timeout(timeout, stream.peek(&mut head)).await {
        Ok(Ok(0)) | Ok(Err(_)) | Err(_) => FirstBytes::None,
        Ok(Ok(n)) if PREFACE.starts_with(&head[..n]) => FirstBytes::Http2,
        Ok(Ok(_)) => FirstBytes::Other,
    }
}

/// The server side of a TLS handshake, done by `deadline` (`timeout` after the connection was
/// accepted); `None` (logged) when it fails.
async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    deadline: tokio::time::Instant,
    timeout: Duration,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, ?timeout, "TLS handshake timed out");
            None
        }
    }
}

/// Serve HTTP/1.1 or HTTP/2 (whichever the client speaks) on one connection until it closes,
/// it has been idle for the idle timeout, or shutdown drains it (both of those gracefully: the
/// requests in progress finish first).
async fn serve_connection<I>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    app: Router,
    mut stop: tokio::sync::watch::Receiver<()>,
    peer: SocketAddr,
    timing: Timing,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let service = CountRequests::new(TowerToHyperService::new(app), activity.clone());
    let io = OpeningDeadline::new(io, timing.opening_deadline);
    let connection = builder
        .serve_connection_with_upgrades(
            TokioIo::new(TidyAfterWrites::new(io, timing.after_write)),
            service,
        )
        .into_owned();
    let mut connection = std::pin::pin!(connection);
    let mut stopping = false;
    let ended = loop {
        tokio::select! {
            ended = connection.as_mut() => break ended,
            _ = stop.changed(), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
            () = activity.idle_for(timing.idle_timeout), if !stopping => {
                tracing::debug!(%peer, timeout = ?timing.idle_timeout, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection closed with an error");
    }
    // Dropped only now, so shutdown waits for this connection to end.
    drop(stop);
}

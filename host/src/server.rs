//! Accepting connections: HTTP/1.1 and h2c (prior knowledge) on one port, header read timeout,
//! and graceful shutdown that drains in-flight requests.
//!
//! Takes an already-bound listener and a shutdown future, so tests run it on port 0.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How the listener treats connections.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Time a client may take to send a request's headers (HTTP/1.1).
    pub header_read_timeout: Duration,
    /// How long shutdown waits for in-flight requests before closing connections.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// Serve `app` on `listener` until `shutdown` resolves, then stop accepting and let in-flight
/// requests finish (at most `drain_timeout`).
///
/// # Errors
/// Never for a single bad connection (those are logged); only if accepting fails for good.
pub async fn serve(
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
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(1024)
        .keep_alive_interval(Some(Duration::from_secs(20)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
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
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection closed with an error");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(options.drain_timeout) => {
            tracing::warn!("drain timeout passed; closing remaining connections");
        }
    }
    Ok(())
}

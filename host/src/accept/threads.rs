//! Connection threads: event loops of their own (a thread each, tokio's current-thread
//! runtime) that accepted cleartext HTTP/1.1 connections are handed to.
//!
//! On tokio's multi-thread runtime, a request that arrives wakes one worker, and the scheduler
//! then wakes a second to look for more work (a worker leaving its search wakes another; a task
//! scheduled while others sleep wakes one). On a virtual machine each of those wake-ups costs
//! tens of microseconds, more than the call itself (docs/benchmarks.md, "One event loop a
//! connection"). Here a keep-alive connection's requests are read, called and answered on the
//! one thread that owns it, and nothing else is woken for them. Connections are spread over the
//! threads by how many each has open.
//!
//! HTTP/2 connections are not handed over (the accept loop looks for the connection preface
//! first): their streams run on the runtime's workers, so one client's many calls in flight use
//! every CPU, and a connection on a thread of its own would cost each request two wake-ups
//! between it and its streams (measured with h2load: docs/benchmarks.md, "One event loop a
//! connection"). Nor are TLS connections, whose protocol is known only after the handshake.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ThreadHooks;

/// The connection threads of one listener; they stop (dropping what they still serve) when
/// this is dropped.
pub(super) struct ConnectionThreads {
    loops: Vec<Loop>,
}

struct Loop {
    handle: tokio::runtime::Handle,
    open: Arc<AtomicUsize>,
    /// Dropped to stop the thread's loop.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// One connection counted on its thread while it lives.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ConnectionThreads {
    /// `count` threads named `wasmrpc-http<N>`, each running `hooks`.
    ///
    /// # Errors
    /// A thread or its runtime could not start.
    pub(super) fn start(count: usize, hooks: &ThreadHooks) -> std::io::Result<Self> {
        let mut loops = Vec::with_capacity(count);
        for n in 0..count {
            let (started, handle) = std::sync::mpsc::channel();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let hooks = hooks.clone();
            std::thread::Builder::new()
                .name(format!("wasmrpc-http{n}"))
                .spawn(move || {
                    if let Some(on_start) = &hooks.on_start {
                        on_start();
                    }
                    let mut builder = tokio::runtime::Builder::new_current_thread();
                    builder.enable_all();
                    if let Some(on_park) = hooks.on_park {
                        builder.on_thread_park(move || on_park());
                    }
                    if let Some(on_unpark) = hooks.on_unpark {
                        builder.on_thread_unpark(move || on_unpark());
                    }
                    match builder.build() {
                        Ok(runtime) => {
                            let _ = started.send(Ok(runtime.handle().clone()));
                            // Until the listener's threads are dropped; the connections still
                            // open then (past the drain) are dropped with the runtime.
                            runtime.block_on(async {
                                let _ = stopped.await;
                            });
                            runtime.shutdown_background();
                        }
                        Err(e) => {
                            let _ = started.send(Err(e));
                        }
                    }
                })?;
            let handle = handle
                .recv()
                .map_err(|_| std::io::Error::other("a connection thread ended as it started"))??;
            loops.push(Loop {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                _stop: stop,
            });
        }
        Ok(ConnectionThreads { loops })
    }

    /// Serve a connection on the thread with the fewest open: `serve` gets the stream, now
    /// registered with that thread's event loop, and the connection counts there until `serve`
    /// ends.
    pub(super) fn hand_over<F, Fut>(&self, stream: tokio::net::TcpStream, serve: F)
    where
        F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(target) = self
            .loops
            .iter()
            .min_by_key(|l| l.open.load(Ordering::Relaxed))
        else {
            return;
        };
        target.open.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(target.open.clone());
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(error = %e, "could not hand a connection over");
                return;
            }
        };
        target.handle.spawn(async move {
            let _counted = counted;
            match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => serve(stream).await,
                Err(e) => tracing::debug!(error = %e, "could not hand a connection over"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::super::{ServeOptions, serve_connections};

    /// Each HTTP/1.1 connection is served whole by one connection thread, and open
    /// connections are spread over the threads.
    #[tokio::test]
    async fn connections_are_spread_over_the_threads_and_stay_on_one() {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (address, server) = serve_thread_names(async {
            let _ = stopped.await;
        })
        .await;
        let mut connections = Vec::new();
        for _ in 0..4 {
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            // Answered before the next one connects, so the counts the threads are picked
            // by are settled.
            let first = ask(&mut stream).await;
            connections.push((stream, first));
        }
        let mut on = Vec::new();
        for (stream, first) in &mut connections {
            for _ in 0..3 {
                assert_eq!(&ask(stream).await, first, "a connection moved thread");
            }
            on.push(first.clone());
        }
        on.sort();
        assert_eq!(
            on,
            [
                "wasmrpc-http0",
                "wasmrpc-http0",
                "wasmrpc-http1",
                "wasmrpc-http1"
            ]
        );
        drop(connections);
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }

    /// An HTTP/2 connection (prior knowledge) is served on the runtime that accepted it, with
    /// its streams, not handed to a connection thread.
    #[tokio::test]
    async fn http2_connections_stay_on_the_accepting_runtime() {
        let (address, server) = serve_thread_names(std::future::pending()).await;
        // A bare h2 client: the host's own tests do not lean on the client SDK either.
        let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let mut client = client.ready().await.unwrap();
        let request = axum::http::Request::get(format!("http://{address}/"))
            .body(())
            .unwrap();
        let (answer, _) = client.send_request(request, true).unwrap();
        let mut body = answer.await.unwrap().into_body();
        let mut name = Vec::new();
        while let Some(chunk) = body.data().await {
            name.extend_from_slice(&chunk.unwrap());
        }
        let name = String::from_utf8(name).unwrap();
        assert!(!name.starts_with("wasmrpc-http"), "served on {name}");
        server.abort();
    }

    /// A server with two connection threads, answering `GET /` with the name of the thread
    /// that handled it, until `shutdown`; its address and task.
    async fn serve_thread_names(
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> (
        std::net::SocketAddr,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async {
                std::thread::current().name().unwrap_or("?").to_owned()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let options = ServeOptions {
            connection_threads: 2,
            drain_timeout: Duration::from_secs(5),
            ..ServeOptions::default()
        };
        let server = tokio::spawn(serve_connections(listener, app, shutdown, options));
        (address, server)
    }

    /// One keep-alive request on `stream`; the answer's body.
    async fn ask(stream: &mut tokio::net::TcpStream) -> String {
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: test\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed the connection");
            answer.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&answer);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .expect("a content-length")
                    .parse()
                    .unwrap();
                if body.len() >= length {
                    return body[..length].to_owned();
                }
            }
        }
    }
}

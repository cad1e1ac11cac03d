//! A stand-in server for unit tests: HTTP/2 with prior knowledge, recording what each request
//! carried and answering every one with an empty method list.
//!
//! It runs on a thread and runtime of its own so that blocking clients, which refuse to run
//! inside a runtime, can be tested against it too.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// One request as the server saw it.
pub(crate) struct Seen {
    pub(crate) path: String,
    headers: http::HeaderMap,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub(crate) struct RecordingServer {
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordingServer {
    pub(crate) fn start() -> RecordingServer {
        RecordingServer::start_on("127.0.0.1:0")
    }

    /// A server on `address` (a port another server just gave up, say).
    pub(crate) fn start_on(address: &str) -> RecordingServer {
        let listener = std::net::TcpListener::bind(address).unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let record = seen.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let (stream, _) = listener.accept().await.unwrap();
                        let record = record.clone();
                        let service = hyper::service::service_fn(
                            move |req: http::Request<hyper::body::Incoming>| {
                                record.lock().unwrap().push(Seen {
                                    path: req.uri().path().to_owned(),
                                    headers: req.headers().clone(),
                                });
                                let body = Full::new(Bytes::from_static(br#"{"methods":[]}"#));
                                async move { Ok::<_, Infallible>(http::Response::new(body)) }
                            },
                        );
                        tokio::spawn(
                            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(stream), service),
                        );
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        RecordingServer {
            address,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The requests seen since the last call, oldest first.
    pub(crate) fn take_requests(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

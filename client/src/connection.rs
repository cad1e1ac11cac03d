//! The client's one HTTP/2 connection to a server: opened on first use, opened again once it has
//! closed, and each request written with its body in the same turn.
//!
//! Built on the `h2` crate directly rather than hyper's client: hyper sends a request's body
//! from a task of its own, which waits for send capacity that h2 gives a new stream only once
//! its connection task has opened it, the same turn that writes the HEADERS frame. So every
//! call went out in two writes (HEADERS, then DATA), and the server woke twice for it. Here the
//! body is queued with the request, and both leave in one write (docs/benchmarks.md, "Small
//! calls from the Rust client").
//!
//! A connection whose server stops answering is found by pings: every
//! [`KEEP_ALIVE_INTERVAL`] one is sent, and a connection that has not answered within
//! [`KEEP_ALIVE_TIMEOUT`] is closed, failing its calls in flight.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::{Request, Response};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::body::Chunks;

/// How long opening the TCP connection (and the TLS handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often an open connection is pinged.
pub const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// How long a ping may go unanswered before the connection is closed.
pub const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// HTTP/2 flow control sized for tensors of megabytes (the server's are the same): a stream may
/// receive 8 MiB and the connection 16 MiB before the client reads them, in frames of up to 1 MiB.
const STREAM_WINDOW: u32 = 8 << 20;
const CONNECTION_WINDOW: u32 = 16 << 20;
const MAX_FRAME: u32 = 1 << 20;

/// Where connections go: a host and port, over TLS or not.
#[derive(Clone)]
pub struct Target {
    /// `host:port`, as `TcpStream::connect` takes it.
    pub address: String,
    /// The TLS connector and the name the certificate must carry; `None` for cleartext.
    pub tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
}

/// One shared connection to a [`Target`], opened when first needed.
pub struct Connection {
    target: Target,
    open: tokio::sync::Mutex<Option<Open>>,
}

/// An open connection: the handle requests are sent on, and which opening it was (so that a
/// caller that saw it fail replaces only that one).
struct Open {
    sender: SendRequest<Bytes>,
    generation: u64,
}

/// Why a request failed, and whether it is known not to have reached the server (so sending it
/// again on a new connection cannot run it twice).
pub struct Failure {
    pub error: Box<dyn std::error::Error + Send + Sync>,
    pub unsent: bool,
}

impl Failure {
    fn unsent(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Failure {
            error: error.into(),
            unsent: true,
        }
    }

    fn sent(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Failure {
            error: error.into(),
            unsent: false,
        }
    }
}

impl Connection {
    /// A connection to `target`, not yet opened.
    pub fn new(target: Target) -> Self {
        Connection {
            target,
            open: tokio::sync::Mutex::new(None),
        }
    }

    /// Send `request` with `body` and wait for the answer's head; the answer's body is read with
    /// [`Received`]. A request that fails before it reached the server (the connection had
    /// closed, or the server refused the stream as it went away) is sent once more, on a new
    /// connection.
    ///
    /// # Errors
    /// The connection could not be opened, or the exchange failed.
    pub async fn send(
        &self,
        request: Request<()>,
        body: &Chunks,
    ) -> Result<Response<Received>, Failure> {
        let mut seen = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (sender, generation) = self.sender(seen).await?;
            // The head is copied for each attempt: h2 takes it, and a retry needs it again.
            match send_on(sender, clone_head(&request), body).await {
                Ok(response) => return Ok(response),
                Err(failure) if failure.unsent && attempts < 2 => seen = Some(generation),
                Err(failure) => return Err(failure),
            }
        }
    }

    /// The open connection's handle, opening one when there is none or when the one there is
    /// `failed` (the generation a caller saw fail).
    async fn sender(&self, failed: Option<u64>) -> Result<(SendRequest<Bytes>, u64), Failure> {
        let mut open = self.open.lock().await;
        if let Some(current) = open.as_ref()
            && Some(current.generation) != failed
        {
            return Ok((current.sender.clone(), current.generation));
        }
        let generation = open.as_ref().map_or(0, |o| o.generation + 1);
        let sender = connect(&self.target).await.map_err(Failure::unsent)?;
        *open = Some(Open {
            sender: sender.clone(),
            generation,
        });
        Ok((sender, generation))
    }
}

/// `request` without a body, its parts copied (`http::Request` is not `Clone`).
fn clone_head(request: &Request<()>) -> Request<()> {
    let mut copy = Request::new(());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
}

/// Send one request on `sender`: its head and then every chunk of `body`, all queued in this
/// turn, so the connection writes them together.
async fn send_on(
    sender: SendRequest<Bytes>,
    request: Request<()>,
    body: &Chunks,
) -> Result<Response<Received>, Failure> {
    let mut sender = sender.ready().await.map_err(Failure::unsent)?;
    let (response, mut stream) = sender
        .send_request(request, body.is_empty())
        .map_err(Failure::unsent)?;
    let last = body.buffers().len();
    for (i, chunk) in body.buffers().enumerate() {
        if stream.send_data(chunk.clone(), i + 1 == last).is_err() {
            // The stream closed under us: the server answered (a body over its limit, say)
            // without reading the whole body, or reset the stream. Its answer says which.
            break;
        }
    }
    match response.await {
        Ok(response) => Ok(response.map(Received::new)),
        // The server went away before it took the stream: it never saw the request.
        Err(e) if e.reason() == Some(h2::Reason::REFUSED_STREAM) => Err(Failure::unsent(e)),
        Err(e) => Err(Failure::sent(e)),
    }
}

/// Open a connection to `target` and start driving it (with its pings) on this runtime.
async fn connect(
    target: &Target,
) -> Result<SendRequest<Bytes>, Box<dyn std::error::Error + Send + Sync>> {
    let opened = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let tcp = TcpStream::connect(&target.address).await?;
        tcp.set_nodelay(true)?;
        match &target.tls {
            None => handshake(tcp).await,
            Some((connector, name)) => {
                let tls = connector.connect(name.clone(), tcp).await?;
                if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err("the server did not agree to HTTP/2 over TLS (ALPN h2)".into());
                }
                handshake(tls).await
            }
        }
    })
    .await;
    match opened {
        Ok(result) => result,
        Err(_) => Err(format!("no connection within {}s", CONNECT_TIMEOUT.as_secs()).into()),
    }
}

/// The HTTP/2 handshake on `io`, and the task that drives the connection until it closes.
async fn handshake<T>(io: T) -> Result<SendRequest<Bytes>, Box<dyn std::error::Error + Send + Sync>>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, mut connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .handshake::<_, Bytes>(io)
        .await?;
    let pings = connection.ping_pong();
    tokio::spawn(async move {
        tokio::select! {
            _ = &mut connection => {}
            () = unanswered(pings) => {}
        }
        // Dropping the connection fails every call still in flight on it.
    });
    Ok(sender)
}

/// Ping every [`KEEP_ALIVE_INTERVAL`]; returns when a ping goes unanswered for
/// [`KEEP_ALIVE_TIMEOUT`] (or pings can no longer be sent).
async fn unanswered(pings: Option<h2::PingPong>) {
    let Some(mut pings) = pings else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(KEEP_ALIVE_INTERVAL).await;
        let answered = pings.ping(h2::Ping::opaque());
        match tokio::time::timeout(KEEP_ALIVE_TIMEOUT, answered).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// An answer's body as it arrives, each frame's room handed back to the server as it is taken,
/// then its trailers (where a gRPC answer carries its status).
pub struct Received {
    stream: h2::RecvStream,
    trailers_read: bool,
}

impl Received {
    fn new(stream: h2::RecvStream) -> Self {
        Received {
            stream,
            trailers_read: false,
        }
    }
}

impl http_body::Body for Received {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, h2::Error>>> {
        if self.trailers_read {
            return Poll::Ready(None);
        }
        match ready!(self.stream.poll_data(cx)) {
            Some(Ok(data)) => {
                // The caller copies the frame right away; the room can go back at once.
                let _ = self.stream.flow_control().release_capacity(data.len());
                return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
            }
            Some(Err(e)) => return Poll::Ready(Some(Err(e))),
            None => {}
        }
        let trailers = ready!(self.stream.poll_trailers(cx));
        self.trailers_read = true;
        match trailers {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.trailers_read || self.stream.is_end_stream()
    }
}

/// A TLS connector offering only HTTP/2 by ALPN.
pub fn tls_connector(mut config: rustls::ClientConfig) -> tokio_rustls::TlsConnector {
    config.alpn_protocols = vec![b"h2".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

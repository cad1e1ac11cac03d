//! A real OTLP trace receiver for the tracing tests: OTLP/HTTP (`POST /v1/traces`, protobuf) and
//! OTLP/gRPC (`TraceService/Export` over h2c) on one loopback port, decoding what arrives with
//! the official OpenTelemetry protobuf definitions (`opentelemetry-proto`) and keeping every
//! span with its resource. It can also be told to refuse exports, as a failing collector would.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// A span as it arrived, with the resource it came from and how it came.
#[derive(Debug, Clone)]
pub struct Received {
    /// The span.
    pub span: Span,
    /// Its resource's attributes, as text.
    pub resource: Vec<(String, String)>,
    /// `http` or `grpc`.
    pub protocol: &'static str,
}

impl Received {
    /// The string or number value of attribute `key`, as text.
    pub fn attr(&self, key: &str) -> Option<String> {
        attribute(&self.span.attributes, key)
    }

    /// Resource attribute `key`.
    pub fn resource(&self, key: &str) -> Option<&str> {
        self.resource
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The trace id in hex.
    pub fn trace_id(&self) -> String {
        hex::encode(&self.span.trace_id)
    }

    /// The span id in hex.
    pub fn span_id(&self) -> String {
        hex::encode(&self.span.span_id)
    }

    /// The parent span id in hex (empty for a root).
    pub fn parent_id(&self) -> String {
        hex::encode(&self.span.parent_span_id)
    }
}

/// Attribute `key` of `attributes` as text.
pub fn attribute(
    attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<String> {
    let kv = attributes.iter().find(|kv| kv.key == key)?;
    match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        Value::DoubleValue(d) => Some(d.to_string()),
        other => Some(format!("{other:?}")),
    }
}

#[derive(Default)]
struct State {
    spans: Mutex<Vec<Received>>,
    /// Each export's headers (name, value), in order.
    headers: Mutex<Vec<Vec<(String, String)>>>,
    refuse: AtomicBool,
}

/// The receiver, serving until dropped.
pub struct Receiver {
    address: SocketAddr,
    state: Arc<State>,
    _runtime: tokio::runtime::Runtime,
}

impl Receiver {
    /// A receiver on a free loopback port.
    pub fn start() -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(State::default());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let address = listener.local_addr().unwrap();
        let served = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let state = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, request).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                });
            }
        });
        Receiver {
            address,
            state,
            _runtime: runtime,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.state.spans.lock().unwrap().clone()
    }

    /// The headers of every export so far.
    pub fn export_headers(&self) -> Vec<Vec<(String, String)>> {
        self.state.headers.lock().unwrap().clone()
    }

    /// Answer exports with a failure from now on (or not).
    pub fn refuse(&self, refuse: bool) {
        self.state.refuse.store(refuse, Ordering::SeqCst);
    }

    /// Wait (at most `within`) until `check` holds of the spans received; returns them.
    pub fn wait_for(
        &self,
        within: Duration,
        what: &str,
        check: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if check(&spans) {
                return spans;
            }
            assert!(
                started.elapsed() < within,
                "not within {within:?}: {what}; received {} spans: {:#?}",
                spans.len(),
                spans
                    .iter()
                    .map(|s| (&s.span.name, s.trace_id(), s.parent_id()))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(state: &State, request: hyper::Request<Incoming>) -> hyper::Response<Body> {
    // HTTP/1.1 requests name the path alone (origin form), as servers expect of a client that is
    // not talking to a proxy: a full URL here is the exporter's mistake.
    if request.version() == hyper::Version::HTTP_11 && request.uri().scheme().is_some() {
        return plain(400, Bytes::from_static(b"absolute-form request target"));
    }
    let path = request.uri().path().to_owned();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    state.headers.lock().unwrap().push(headers);
    let refuse = state.refuse.load(Ordering::SeqCst);
    match path.as_str() {
        "/v1/traces" => {
            if refuse {
                return plain(503, Bytes::from_static(b"refused"));
            }
            keep(state, &body, "http");
            let answer = ExportTraceServiceResponse::default().encode_to_vec();
            let mut r = plain(200, Bytes::from(answer));
            r.headers_mut()
                .insert("content-type", "application/x-protobuf".parse().unwrap());
            r
        }
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export" => {
            if refuse {
                return grpc(Bytes::new(), "14");
            }
            assert_eq!(body[0], 0, "an uncompressed gRPC message");
            let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, body.len() - 5, "one whole gRPC message");
            keep(state, &body[5..], "grpc");
            let answer = ExportTraceServiceResponse::default().encode_to_vec();
            let mut framed = vec![0];
            framed.extend_from_slice(&(answer.len() as u32).to_be_bytes());
            framed.extend_from_slice(&answer);
            grpc(Bytes::from(framed), "0")
        }
        _ => plain(404, Bytes::new()),
    }
}

fn keep(state: &State, body: &[u8], protocol: &'static str) {
    let request =
        ExportTraceServiceRequest::decode(body).expect("a valid ExportTraceServiceRequest");
    let mut spans = state.spans.lock().unwrap();
    for rs in request.resource_spans {
        let resource: Vec<(String, String)> = rs
            .resource
            .map(|r| {
                r.attributes
                    .iter()
                    .filter_map(|kv| {
                        Some((
                            kv.key.clone(),
                            attribute(std::slice::from_ref(kv), &kv.key)?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for span in ss.spans {
                spans.push(Received {
                    span,
                    resource: resource.clone(),
                    protocol,
                });
            }
        }
    }
}

fn plain(status: u16, body: Bytes) -> hyper::Response<Body> {
    let mut r = hyper::Response::new(Full::new(body).boxed());
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

/// A gRPC answer: `message` (framed, or nothing) and then `grpc-status` in the trailers.
fn grpc(message: Bytes, status: &'static str) -> hyper::Response<Body> {
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", status.parse().unwrap());
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = [
        (!message.is_empty()).then(|| Ok(Frame::data(message))),
        Some(Ok(Frame::trailers(trailers))),
    ]
    .into_iter()
    .flatten()
    .collect();
    let body = StreamBody::new(futures_util::stream::iter(frames)).boxed();
    let mut r = hyper::Response::new(body);
    r.headers_mut()
        .insert("content-type", "application/grpc".parse().unwrap());
    r
}

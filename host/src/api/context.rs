//! The request's context for log lines: its method, path, client name and (once authenticated)
//! tenant, which every line logged while the request is handled carries as
//! `request{method=… path=… client=… tenant=…}`.
//!
//! A `tracing` span per request did this before, and cost about 5 µs a request of `wasmrpc
//! serve`'s time, most of it spent on requests that log nothing (docs/benchmarks.md, "The
//! request's log context"). Now the context is a task-local value, set while the request's future
//! is polled, that costs a few clones; `wasmrpc serve`'s log format (`log_format.rs`) prints it
//! only when a line is written. A program embedding the server installs a subscriber of its own,
//! which knows nothing of that task-local: there each request still gets its `request` span, so
//! any subscriber sees the same context.

use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderValue, Method, Uri};
use axum::response::Response;
use tokio::task::futures::TaskLocalFuture;
use tracing::Instrument as _;
use tracing::instrument::Instrumented;

use super::CLIENT_NAME_HEADER;

tokio::task_local! {
    static REQUEST: RequestContext;
}

/// Whether this process's log format prints [`RequestContext`] itself (set once by
/// `wasmrpc serve`); otherwise each request gets a `tracing` span.
static PRINTED_BY_THE_FORMAT: AtomicBool = AtomicBool::new(false);

/// Print the request context from the log format from now on, instead of making a span a
/// request.
pub fn printed_by_the_format() {
    PRINTED_BY_THE_FORMAT.store(true, Ordering::Relaxed);
}

/// What a log line written while a request is handled says of it.
#[derive(Debug)]
pub struct RequestContext {
    method: Method,
    uri: Uri,
    client: Option<HeaderValue>,
    tenant: OnceCell<String>,
    /// Whether a `request` span carries this context too (then the log format leaves it out).
    in_a_span: bool,
}

impl RequestContext {
    /// Whether a `request` span carries this context too.
    pub fn in_a_span(&self) -> bool {
        self.in_a_span
    }

    /// Write ` request{method=… path=… client=… tenant=…}:` as `tracing`'s default format
    /// writes a span (the tenant once known; a client name that is not text as `-`).
    pub fn write(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        write!(
            out,
            "request{{method={} path={} client={:?}",
            self.method,
            self.uri.path(),
            self.client_name()
        )?;
        if let Some(tenant) = self.tenant.get() {
            write!(out, " tenant={tenant:?}")?;
        }
        out.write_str("}:")
    }

    fn client_name(&self) -> &str {
        self.client
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
    }
}

/// Run `f` with the context of the request being handled on this thread, if any.
pub fn with_current<R>(f: impl FnOnce(&RequestContext) -> R) -> Option<R> {
    REQUEST.try_with(f).ok()
}

/// Note the tenant a request was authenticated as, for its log lines.
pub fn record_tenant(tenant: &str) {
    let in_a_span = REQUEST.try_with(|r| {
        let _ = r.tenant.set(tenant.to_owned());
        r.in_a_span
    });
    if in_a_span != Ok(false) {
        tracing::Span::current().record("tenant", tenant);
    }
}

/// What is told each request's client name (the metrics' count of requests by client).
pub type CountClient = Arc<dyn Fn(&str) + Send + Sync>;

/// The layer that gives each request its context, and tells `count_client` its client's name.
#[derive(Clone)]
pub struct RequestContextLayer {
    count_client: CountClient,
    /// Whether each request gets a `request` span too (the log format does not print the
    /// context).
    spans: bool,
}

impl RequestContextLayer {
    /// The layer, telling `count_client` each named client's requests; with a span a request
    /// unless the log format prints the context (see [`printed_by_the_format`]).
    pub fn new(count_client: CountClient) -> Self {
        Self::with_spans(count_client, !PRINTED_BY_THE_FORMAT.load(Ordering::Relaxed))
    }

    /// The layer, with a span a request or not.
    pub fn with_spans(count_client: CountClient, spans: bool) -> Self {
        RequestContextLayer {
            count_client,
            spans,
        }
    }
}

impl<S> tower::Layer<S> for RequestContextLayer {
    type Service = WithContext<S>;

    fn layer(&self, inner: S) -> WithContext<S> {
        WithContext {
            inner,
            count_client: self.count_client.clone(),
            spans: self.spans,
        }
    }
}

/// [`RequestContextLayer`]'s service.
#[derive(Clone)]
pub struct WithContext<S> {
    inner: S,
    count_client: CountClient,
    spans: bool,
}

impl<S> tower::Service<Request> for WithContext<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = TaskLocalFuture<RequestContext, TracedRequest<Timed<Instrumented<S::Future>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let client = req.headers().get(CLIENT_NAME_HEADER).cloned();
        if let Some(name) = client.as_ref().and_then(|v| v.to_str().ok()) {
            (self.count_client)(name);
        }
        let context = RequestContext {
            method: req.method().clone(),
            uri: req.uri().clone(),
            client,
            tenant: OnceCell::new(),
            in_a_span: self.spans,
        };
        let span = if !self.spans {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                "request",
                method = %context.method,
                path = %context.uri.path(),
                client = context.client_name(),
                tenant = tracing::field::Empty
            )
        };
        let started = tracing::enabled!(tracing::Level::DEBUG).then(Instant::now);
        // The request's OpenTelemetry span, if traces are exported (`otel/request.rs`).
        let trace = crate::otel::request::begin(&req);
        let inner = self.inner.call(req).instrument(span);
        REQUEST.scope(
            context,
            crate::otel::request::scope(trace, Timed { inner, started }),
        )
    }
}

/// A request's future with its trace in scope.
pub type TracedRequest<F> =
    TaskLocalFuture<std::cell::RefCell<Option<crate::otel::request::Current>>, F>;

/// The response future, which logs at `debug` how the request ended and how long it took, and
/// ends the request's span.
#[pin_project::pin_project]
pub struct Timed<F> {
    #[pin]
    inner: F,
    /// When the request started, if `debug` lines were enabled then.
    started: Option<Instant>,
}

impl<F, E> Future for Timed<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &out {
            crate::otel::request::end(response);
        }
        if let (Some(started), Ok(response)) = (this.started, &out) {
            tracing::debug!(
                status = response.status().as_u16(),
                latency_us = started.elapsed().as_micros() as u64,
                "finished processing request"
            );
        }
        Poll::Ready(out)
    }
}

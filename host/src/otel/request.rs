//! The span of the request being handled: started by the API's request layer
//! (`api/context.rs`) from the request's `traceparent`, held in a task-local value so that the
//! code handling the request (the service, which knows the tenant and the method) can add to
//! it and start its children, and ended when the response is ready (or the request dropped).

use std::cell::RefCell;
use std::future::Future;
use std::time::Instant;

use axum::extract::MatchedPath;
use http::{HeaderName, HeaderValue, Request};
use tokio::task::futures::TaskLocalFuture;

use super::context::{SpanContext, TRACEPARENT, TRACESTATE};
use super::request_attributes::{RequestAttributes, Target};
use super::span::{Kind, Name, Span};

// The headers read from every traced request, named once (a name given as text is parsed at
// each lookup).
static TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
static TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);
static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// The request's trace, recorded here or not.
#[derive(Debug)]
pub enum Current {
    /// Its span, being recorded.
    Recording(Span),
    /// Not recorded here: the context passed on (marked not sampled).
    NotRecorded(SpanContext),
}

tokio::task_local! {
    static CURRENT: RefCell<Option<Current>>;
}

/// Run `future` with `current` as its request's trace.
pub fn scope<F: Future>(
    current: Option<Current>,
    future: F,
) -> TaskLocalFuture<RefCell<Option<Current>>, F> {
    CURRENT.scope(RefCell::new(current), future)
}

/// The context a child of the request's span (here or on another worker) is given: its span's,
/// or the not-recorded one; `None` outside a traced request.
pub fn current_context() -> Option<SpanContext> {
    CURRENT
        .try_with(|c| match &*c.borrow() {
            Some(Current::Recording(span)) => Some(span.context()),
            Some(Current::NotRecorded(context)) => Some(context.clone()),
            None => None,
        })
        .ok()
        .flatten()
}

/// Whether a request's trace is in scope (`Some`), and whether it is recorded: what
/// [`current_context`] says, without copying the context.
pub fn sampled() -> Option<bool> {
    CURRENT
        .try_with(|c| match &*c.borrow() {
            Some(Current::Recording(_)) => Some(true),
            Some(Current::NotRecorded(context)) => Some(context.sampled),
            None => None,
        })
        .ok()
        .flatten()
}

/// Run `f` on the request's span, when it is being recorded.
pub fn with_span(f: impl FnOnce(&mut Span)) {
    let _ = CURRENT.try_with(|c| {
        if let Some(Current::Recording(span)) = &mut *c.borrow_mut() {
            f(span);
        }
    });
}

/// The request's span, taken to be ended.
pub fn take_span() -> Option<Span> {
    CURRENT
        .try_with(|c| match c.borrow_mut().take() {
            Some(Current::Recording(span)) => Some(span),
            _ => None,
        })
        .ok()
        .flatten()
}

/// The trace of `request` (its span, started now, or the context passed on), or `None` when
/// tracing is off or the request is not one that is traced (health checks, metrics, the
/// console's files).
pub fn begin<B>(request: &Request<B>) -> Option<Current> {
    if !super::enabled() {
        return None;
    }
    let path = request.uri().path();
    let grpc = path.strip_prefix("/inference.GRPCInferenceService/");
    let traced = match grpc {
        Some(rpc) => !matches!(rpc, "ServerLive" | "ServerReady"),
        None => {
            path.starts_with("/v1/") || (path.starts_with("/v2") && !path.starts_with("/v2/health"))
        }
    };
    if !traced {
        return None;
    }
    let headers = Headers::of(request);
    let parent = headers.traceparent.and_then(|tp| {
        SpanContext::from_headers(tp.as_bytes(), headers.tracestate.map(|s| s.as_bytes()))
    });
    let now = Instant::now();
    let route = request.extensions().get::<MatchedPath>();
    let method = method_name(request.method());
    let name = match (grpc, route, method) {
        (Some(rpc), _, _) => Name::from(format!("inference.GRPCInferenceService/{rpc}")),
        // Named with its route by `set_route_name` below.
        (None, Some(_), Some(method)) => Name::from(method),
        (None, Some(route), None) => format!("{} {}", request.method(), route.as_str()).into(),
        (None, None, _) => request.method().to_string().into(),
    };
    let Some(mut span) = super::start(parent.as_ref(), name, Kind::Server, now) else {
        return Some(Current::NotRecorded(super::not_recorded(parent.as_ref())));
    };
    let target = match grpc {
        Some(rpc) => Target::Grpc { rpc },
        None => Target::Http {
            method: request.method().as_str(),
            path,
            route: route.map(MatchedPath::as_str),
        },
    };
    if let (
        Target::Http {
            route: Some(route), ..
        },
        Some(method),
    ) = (target, method)
    {
        span.set_route_name(method, route);
    }
    RequestAttributes {
        host: request
            .uri()
            .authority()
            .map(|a| a.as_str())
            .or_else(|| headers.host.and_then(|h| h.to_str().ok())),
        version: match request.version() {
            http::Version::HTTP_2 => "2",
            http::Version::HTTP_10 => "1.0",
            _ => "1.1",
        },
        target,
        agent: headers.user_agent.and_then(|a| a.to_str().ok()),
    }
    .set_on(&mut span);
    Some(Current::Recording(span))
}

/// The headers a request's span reads, found in one pass over the request's few headers rather
/// than looked up one by one (each lookup hashes its name): the first of each, as a lookup
/// finds.
#[derive(Default)]
struct Headers<'a> {
    traceparent: Option<&'a HeaderValue>,
    tracestate: Option<&'a HeaderValue>,
    host: Option<&'a HeaderValue>,
    user_agent: Option<&'a HeaderValue>,
}

impl<'a> Headers<'a> {
    fn of<B>(request: &'a Request<B>) -> Headers<'a> {
        let mut found = Headers::default();
        for (name, value) in request.headers() {
            let slot = if *name == TRACEPARENT_HEADER {
                &mut found.traceparent
            } else if *name == TRACESTATE_HEADER {
                &mut found.tracestate
            } else if *name == http::header::HOST {
                &mut found.host
            } else if *name == http::header::USER_AGENT {
                &mut found.user_agent
            } else {
                continue;
            };
            slot.get_or_insert(value);
        }
        found
    }
}

/// End the request's span with `response`'s status.
pub fn end<B>(response: &http::Response<B>) {
    let Some(mut span) = take_span() else {
        return;
    };
    let status = response.status();
    // Every gRPC answer says `application/grpc` (tonic's and this server's own framing): only
    // those are searched for a `grpc-status` header.
    let grpc = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/grpc"));
    match grpc.then(|| response.headers().get(&GRPC_STATUS)).flatten() {
        // A gRPC answer with its status in the headers (a failure before any message).
        Some(code) => {
            let code = code
                .to_str()
                .ok()
                .and_then(|c| c.parse::<i64>().ok())
                .unwrap_or(2);
            span.set("rpc.grpc.status_code", code);
        }
        None if grpc => {
            // The status comes in the trailers, after this span ends: `wasmrpc.code` says it.
        }
        None => {
            span.set("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                span.fail(format!("HTTP {}", status.as_u16()));
            }
        }
    }
    span.end_at(Instant::now());
}

/// A request method's name, when it is one of the usual ones.
fn method_name(method: &http::Method) -> Option<&'static str> {
    Some(match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        http::Method::PATCH => "PATCH",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::Headers;

    #[test]
    fn the_first_of_each_header_is_read_as_a_lookup_reads_it() {
        let request = http::Request::builder()
            .header("accept", "*/*")
            .header("traceparent", "first")
            .header("Host", "a.example:8080")
            .header("traceparent", "second")
            .header("user-agent", "wrk")
            .body(())
            .unwrap();
        let headers = Headers::of(&request);
        let text = |v: Option<&http::HeaderValue>| v.map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(text(headers.traceparent).as_deref(), Some("first"));
        assert_eq!(
            text(headers.traceparent),
            text(request.headers().get("traceparent"))
        );
        assert_eq!(text(headers.host).as_deref(), Some("a.example:8080"));
        assert_eq!(text(headers.user_agent).as_deref(), Some("wrk"));
        assert_eq!(headers.tracestate, None);
    }
}

//! What reaches a server: the trace headers of every kind of request (the v1 call, the v2
//! infer, gRPC's `ModelInfer` metadata, the method list), from a scope, from the client's own
//! context, across spawned calls and the blocking client, and from OpenTelemetry's `Context`.

use std::time::Duration;

use super::*;
use crate::test_support::{RecordingServer, Seen};
use crate::{Client, Encoding, Tensor};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";

fn parent() -> TraceContext {
    TraceContext::parse(PARENT, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).unwrap()
}

fn other() -> TraceContext {
    OTHER.parse().unwrap()
}

fn args() -> Vec<Tensor> {
    vec![Tensor::vector(vec![1i32, 2]), Tensor::vector(vec![3i32, 4])]
}

/// Every request in `seen` (and there is one at least) carried `ctx`'s two headers.
#[track_caller]
fn assert_carried(seen: &[Seen], ctx: &TraceContext) {
    assert!(!seen.is_empty(), "no request reached the server");
    for request in seen {
        let at = &request.path;
        assert_eq!(
            request.header(TRACEPARENT),
            Some(ctx.traceparent().as_str()),
            "{at}"
        );
        assert_eq!(request.header(TRACESTATE), ctx.tracestate(), "{at}");
    }
}

#[track_caller]
fn assert_untraced(seen: &[Seen]) {
    assert!(!seen.is_empty(), "no request reached the server");
    for request in seen {
        assert_eq!(request.header(TRACEPARENT), None, "{}", request.path);
        assert_eq!(request.header(TRACESTATE), None, "{}", request.path);
    }
}

async fn connect(server: &RecordingServer, layer: &str, encoding: Encoding) -> Client {
    let client = Client::builder(layer, &server.address)
        .encoding(encoding)
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .unwrap();
    assert_untraced(&server.take_requests());
    client
}

#[tokio::test]
async fn a_scoped_context_goes_with_a_binary_v2_infer_and_its_metadata_lookup() {
    let server = RecordingServer::start();
    let client = connect(&server, "http", Encoding::Binary).await;
    // The stand-in answers the infer with no outputs: only what was sent matters here.
    let _ = scope(parent(), client.call_async("m", args(), None, None)).await;
    let seen = server.take_requests();
    assert_eq!(seen.last().unwrap().path, "/v2/models/m/infer");
    assert_carried(&seen, &parent());
    let _ = client.call_async("m", args(), None, None).await;
    assert_untraced(&server.take_requests());
}

#[tokio::test]
async fn a_scoped_context_goes_with_a_json_v1_call_and_the_method_list() {
    let server = RecordingServer::start();
    let client = connect(&server, "http", Encoding::Json).await;
    let _ = scope(parent(), async {
        let _ = client.call_async("m", args(), None, None).await;
        client.refresh().await
    })
    .await;
    let seen = server.take_requests();
    assert_eq!(seen[0].path, "/v1/methods/m/call");
    assert_eq!(seen.last().unwrap().path, "/v1/methods");
    assert_carried(&seen, &parent());
}

#[tokio::test]
async fn a_scoped_context_goes_as_grpc_metadata_of_model_infer() {
    let server = RecordingServer::start();
    let client = connect(&server, "grpc", Encoding::Binary).await;
    let out = scope(parent(), client.call_async("echo", args(), None, None))
        .await
        .unwrap();
    assert_eq!(out, args());
    let seen = server.take_requests();
    assert_eq!(
        seen.last().unwrap().path,
        "/inference.GRPCInferenceService/ModelInfer"
    );
    assert_carried(&seen, &parent());
    client.call_async("echo", args(), None, None).await.unwrap();
    assert_untraced(&server.take_requests());
}

#[tokio::test]
async fn a_call_started_in_a_scope_carries_it_though_it_runs_as_a_task_of_its_own() {
    let server = RecordingServer::start();
    let client = connect(&server, "grpc", Encoding::Binary).await;
    // Started inside, awaited outside: the context is the one where the call began.
    let pending = scope(parent(), async { client.call("echo", args(), None, None) }).await;
    assert!(pending.is_ok().await);
    assert_carried(&server.take_requests(), &parent());
}

#[tokio::test]
async fn the_innermost_scope_wins() {
    let server = RecordingServer::start();
    let client = connect(&server, "grpc", Encoding::Binary).await;
    scope(parent(), async {
        scope(other(), client.call_async("echo", args(), None, None))
            .await
            .unwrap();
        assert_carried(&server.take_requests(), &other());
        client.call_async("echo", args(), None, None).await.unwrap();
        assert_carried(&server.take_requests(), &parent());
    })
    .await;
}

#[tokio::test]
async fn a_clients_own_context_goes_with_every_request_unless_a_scope_gives_another() {
    let server = RecordingServer::start();
    let client = Client::builder("grpc", &server.address)
        .trace_context(parent())
        .connect()
        .await
        .unwrap();
    assert_carried(&server.take_requests(), &parent()); // the method list
    client.call_async("echo", args(), None, None).await.unwrap();
    assert_carried(&server.take_requests(), &parent());
    scope(other(), client.call_async("echo", args(), None, None))
        .await
        .unwrap();
    assert_carried(&server.take_requests(), &other());
}

#[test]
fn the_blocking_client_sends_the_scope_of_the_thread_that_calls() {
    let server = RecordingServer::start();
    let client = crate::blocking::Client::builder("grpc", &server.address)
        .connect()
        .unwrap();
    assert_untraced(&server.take_requests());
    // Waited for on the runtime thread...
    let call = || client.call_version("echo", 1, args(), None);
    scope_blocking(parent(), call).unwrap();
    assert_carried(&server.take_requests(), &parent());
    // ... and started in the scope, to be waited for after it.
    let pending = scope_blocking(other(), || client.call("echo", args(), None, None));
    assert!(pending.is_ok());
    assert_carried(&server.take_requests(), &other());
    call().unwrap();
    assert_untraced(&server.take_requests());
}

#[test]
fn the_blocking_builder_gives_the_client_its_own_context() {
    let server = RecordingServer::start();
    let client = crate::blocking::Client::builder("http", &server.address)
        .trace_context(parent())
        .connect()
        .unwrap();
    client.refresh().unwrap();
    assert_carried(&server.take_requests(), &parent());
}

#[cfg(feature = "opentelemetry")]
mod with_opentelemetry {
    //! With the feature: OpenTelemetry's current span, when nothing else gives a context.

    use ::opentelemetry::Context;
    use ::opentelemetry::context::FutureExt as _;
    use ::opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    };

    use super::*;

    /// A context whose current span is `OTHER`'s, with a trace state (no SDK: a remote span
    /// context is what a propagator would make of incoming headers).
    fn otel_context() -> Context {
        let ctx = other();
        let span = SpanContext::new(
            TraceId::from_bytes(ctx.trace_id()),
            SpanId::from_bytes(ctx.parent_id()),
            TraceFlags::new(ctx.flags()),
            true,
            "vendor=value".parse::<TraceState>().unwrap(),
        );
        Context::new().with_remote_span_context(span)
    }

    fn otel_trace() -> TraceContext {
        other().with_tracestate("vendor=value").unwrap()
    }

    #[tokio::test]
    async fn the_current_span_of_opentelemetry_goes_with_http_and_grpc_calls() {
        let server = RecordingServer::start();
        for layer in ["http", "grpc"] {
            let client = connect(&server, layer, Encoding::Binary).await;
            let _ = client
                .call_async("echo", args(), None, None)
                .with_context(otel_context())
                .await;
            assert_carried(&server.take_requests(), &otel_trace());
        }
    }

    #[tokio::test]
    async fn a_call_task_takes_opentelemetrys_context_from_where_it_started() {
        let server = RecordingServer::start();
        let client = connect(&server, "grpc", Encoding::Binary).await;
        let pending = {
            let _attached = otel_context().attach();
            client.call("echo", args(), None, None)
        };
        assert!(pending.is_ok().await);
        assert_carried(&server.take_requests(), &otel_trace());
    }

    #[tokio::test]
    async fn a_scope_and_a_clients_own_context_win_over_opentelemetrys() {
        let server = RecordingServer::start();
        let client = connect(&server, "grpc", Encoding::Binary).await;
        scope(parent(), client.call_async("echo", args(), None, None))
            .with_context(otel_context())
            .await
            .unwrap();
        assert_carried(&server.take_requests(), &parent());
        let own = Client::builder("grpc", &server.address)
            .trace_context(parent())
            .connect()
            .with_context(otel_context())
            .await
            .unwrap();
        assert_carried(&server.take_requests(), &parent());
        drop(own);
    }

    #[tokio::test]
    async fn no_span_in_opentelemetrys_context_sends_nothing() {
        let server = RecordingServer::start();
        let client = connect(&server, "grpc", Encoding::Binary).await;
        client
            .call_async("echo", args(), None, None)
            .with_context(Context::new())
            .await
            .unwrap();
        assert_untraced(&server.take_requests());
        assert!(!Context::current().has_active_span());
    }

    #[test]
    fn the_blocking_client_sends_the_span_current_on_the_calling_thread() {
        let server = RecordingServer::start();
        let client = crate::blocking::Client::builder("grpc", &server.address)
            .connect()
            .unwrap();
        server.take_requests();
        let call = || client.call_version("echo", 1, args(), None);
        {
            let _attached = otel_context().attach();
            call().unwrap();
        }
        assert_carried(&server.take_requests(), &otel_trace());
        call().unwrap();
        assert_untraced(&server.take_requests());
    }
}

//! OpenTelemetry traces (issue 35), against a real OTLP receiver (`support::otlp`, decoding with
//! the official protobuf definitions): a call with a `traceparent` is a child of the caller's
//! span over HTTP v1, v2 and gRPC; its spans carry the call's attributes and children; a call
//! through a second worker is one trace across both; a collector that is down or refuses costs
//! the calls nothing; no key appears in any span; export over OTLP/gRPC too.

use std::time::{Duration, Instant};

use serde_json::json;
use wasmrpc_proto::Tensor;
use wasmrpc_proto::grpc::grpc_inference_service_client::GrpcInferenceServiceClient;
use wasmrpc_proto::grpc::model_infer_request::InferInputTensor;
use wasmrpc_proto::grpc::{self as pb};

use crate::cluster::{add_args, call_on, eventually, worker};
use crate::support::nats::Nats;
use crate::support::otlp::{Received, Receiver};
use crate::support::{TestServer, outputs, register, scalar_f32, tensor};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/// A second caller's trace, in a test that makes two.
const OTHER_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const OTHER_TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const WITHIN: Duration = Duration::from_secs(10);

/// A server exporting every trace to `receiver` (batches leave within 50 ms), with `extra`
/// flags.
fn traced_server(receiver: &Receiver, extra: &[&str]) -> TestServer {
    let endpoint = receiver.endpoint();
    let mut args = vec!["--otlp-endpoint", endpoint.as_str()];
    args.extend_from_slice(extra);
    TestServer::start_with_env(&args, &[("OTEL_BSP_SCHEDULE_DELAY", "50")])
}

fn ints(a: i32, b: i32) -> serde_json::Value {
    json!({ "args": [tensor("int32", &[1], json!([a])), tensor("int32", &[1], json!([b]))] })
}

/// The spans of trace `trace` whose parent is `parent`.
fn children<'a>(spans: &'a [Received], trace: &str, parent: &str) -> Vec<&'a Received> {
    spans
        .iter()
        .filter(|s| s.trace_id() == trace && s.parent_id() == parent)
        .collect()
}

/// The one span of `spans` named `name` in trace `trace`.
fn named<'a>(spans: &'a [Received], trace: &str, name: &str) -> &'a Received {
    let found: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id() == trace && s.span.name == name)
        .collect();
    assert_eq!(found.len(), 1, "one `{name}` span in {trace}: {found:#?}");
    found[0]
}

/// A call's server span and its three children, as every transport has them.
fn assert_call_spans(spans: &[Received], server_span: &Received) {
    assert_eq!(server_span.trace_id(), TRACE_ID);
    assert_eq!(
        server_span.parent_id(),
        PARENT_ID,
        "the caller's span is the parent"
    );
    assert_eq!(server_span.span.kind, 2, "SERVER");
    // Bits 8 and 9: the parent is known to be remote.
    assert_eq!(server_span.span.flags & 0x301, 0x301);
    for (key, value) in [
        ("wasmrpc.method", "add"),
        ("wasmrpc.version", "1"),
        ("wasmrpc.tenant", "default"),
        ("wasmrpc.code", "OK"),
        ("wasmrpc.bytes_in", "8"),
        ("wasmrpc.bytes_out", "4"),
        ("server.address", "127.0.0.1"),
    ] {
        assert_eq!(server_span.attr(key).as_deref(), Some(value), "{key}");
    }
    assert!(
        server_span
            .attr("wasmrpc.digest")
            .unwrap()
            .starts_with("sha256:")
    );
    for key in [
        "wasmrpc.admission_wait_us",
        "wasmrpc.instantiate_us",
        "wasmrpc.guest_run_us",
    ] {
        assert!(server_span.attr(key).is_some(), "{key}");
    }
    let kids = children(spans, TRACE_ID, &server_span.span_id());
    let mut names: Vec<&str> = kids.iter().map(|s| s.span.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["admission", "instantiate", "run"]);
    for kid in kids {
        assert!(kid.span.start_time_unix_nano >= server_span.span.start_time_unix_nano);
        assert!(kid.span.end_time_unix_nano <= server_span.span.end_time_unix_nano);
    }
    assert_eq!(server_span.resource("service.name"), Some("wasmrpc"));
}

#[test]
fn a_call_with_a_traceparent_is_a_child_of_the_callers_span_over_v1_and_v2() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, &[]);
    register(&server.http(), "add", "example-add", Some("add"));
    let http = server
        .http()
        .with_header("traceparent", TRACEPARENT)
        .with_header("tracestate", "vendor=opaque")
        .with_header("user-agent", "traces-test/1");
    outputs(&http.post_json("/v1/methods/add/call", &ints(2, 3)));
    let spans = receiver.wait_for(WITHIN, "the v1 call's spans", |s| {
        s.iter()
            .any(|s| s.span.name == "POST /v1/methods/{name}/call")
            && children(s, TRACE_ID, PARENT_ID).len() == 1
            && s.iter().any(|s| s.span.name == "run")
    });
    let v1 = named(&spans, TRACE_ID, "POST /v1/methods/{name}/call");
    assert_call_spans(&spans, v1);
    assert_eq!(v1.span.trace_state, "vendor=opaque");
    assert_eq!(v1.attr("http.response.status_code").as_deref(), Some("200"));
    assert_eq!(
        v1.attr("http.route").as_deref(),
        Some("/v1/methods/{name}/call")
    );
    assert_eq!(v1.attr("rpc.method").as_deref(), Some("add"));
    // Text the request holds, copied into the span.
    assert_eq!(v1.attr("url.path").as_deref(), Some("/v1/methods/add/call"));
    assert_eq!(
        v1.attr("user_agent.original").as_deref(),
        Some("traces-test/1")
    );

    let v2 = json!({ "inputs": [
        { "name": "a", "datatype": "INT32", "shape": [1], "data": [2] },
        { "name": "b", "datatype": "INT32", "shape": [1], "data": [3] },
    ]});
    let r = http.post_json("/v2/models/add/infer", &v2);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let name = "POST /v2/models/{name}/infer";
    let spans = receiver.wait_for(WITHIN, "the v2 call's spans", |s| {
        s.iter().any(|s| s.span.name == name) && children(s, TRACE_ID, PARENT_ID).len() == 2
    });
    assert_call_spans(&spans, named(&spans, TRACE_ID, name));
    // Spans of the registration: it was not traced by a caller, so it is a trace of its own.
    let register = spans
        .iter()
        .find(|s| s.span.name == "PUT /v1/methods/{name}")
        .expect("the registration's span");
    assert_eq!(register.parent_id(), "");
    assert_eq!(
        register.attr("wasmrpc.compile_cache_hit").as_deref(),
        Some("false")
    );
    assert!(
        children(&spans, &register.trace_id(), &register.span_id())
            .iter()
            .any(|s| s.span.name == "compile")
    );
}

#[test]
fn a_grpc_call_with_traceparent_metadata_is_a_child_of_the_callers_span() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, &[]);
    register(&server.http(), "add", "example-add", Some("add"));
    // The receiver has a runtime of its own: the client gets another.
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client_runtime.block_on(async {
        let channel = tonic::transport::Channel::from_shared(server.url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = GrpcInferenceServiceClient::new(channel);
        let (a, b) = (Tensor::vector(vec![2i32]), Tensor::vector(vec![3i32]));
        let input = |name: &str| InferInputTensor {
            name: name.into(),
            datatype: "INT32".into(),
            shape: vec![1],
            ..Default::default()
        };
        let mut request = tonic::Request::new(pb::ModelInferRequest {
            model_name: "add".into(),
            inputs: vec![input("a"), input("b")],
            raw_input_contents: vec![a.raw_bytes().clone(), b.raw_bytes().clone()],
            ..Default::default()
        });
        request
            .metadata_mut()
            .insert("traceparent", TRACEPARENT.parse().unwrap());
        client.model_infer(request).await.unwrap();
        // A failure answered before any message: its status is in the response's headers.
        let mut unknown = tonic::Request::new(pb::ModelInferRequest {
            model_name: "no-such-model".into(),
            ..Default::default()
        });
        unknown
            .metadata_mut()
            .insert("traceparent", OTHER_TRACEPARENT.parse().unwrap());
        let status = client.model_infer(unknown).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    });
    let name = "inference.GRPCInferenceService/ModelInfer";
    let spans = receiver.wait_for(WITHIN, "the failed gRPC call's span", |s| {
        s.iter()
            .any(|s| s.span.name == name && s.trace_id() == OTHER_TRACE_ID)
    });
    let failed = named(&spans, OTHER_TRACE_ID, name);
    assert_eq!(
        failed.attr("rpc.grpc.status_code").as_deref(),
        Some("5"),
        "NOT_FOUND"
    );
    let spans = receiver.wait_for(WITHIN, "the gRPC call's spans", |s| {
        s.iter().any(|s| s.span.name == name) && s.iter().any(|s| s.span.name == "run")
    });
    let span = named(&spans, TRACE_ID, name);
    assert_call_spans(&spans, span);
    assert_eq!(span.attr("rpc.system").as_deref(), Some("grpc"));
    assert_eq!(span.attr("rpc.method").as_deref(), Some("ModelInfer"));
    assert_eq!(
        span.attr("rpc.service").as_deref(),
        Some("inference.GRPCInferenceService")
    );
}

#[test]
fn spans_can_leave_over_otlp_grpc_and_carry_the_configured_headers_and_name() {
    let receiver = Receiver::start();
    let server = traced_server(
        &receiver,
        &[
            "--otlp-protocol",
            "grpc",
            "--otlp-headers",
            "x-collector-key=s3cr%3Dt",
            "--service-name",
            "inference-eu",
        ],
    );
    register(&server.http(), "add", "example-add", Some("add"));
    let http = server.http().with_header("traceparent", TRACEPARENT);
    outputs(&http.post_json("/v1/methods/add/call", &ints(1, 1)));
    let spans = receiver.wait_for(WITHIN, "spans over gRPC", |s| {
        s.iter().any(|s| s.span.name == "run")
    });
    assert!(spans.iter().all(|s| s.protocol == "grpc"));
    let call = named(&spans, TRACE_ID, "POST /v1/methods/{name}/call");
    assert_eq!(call.resource("service.name"), Some("inference-eu"));
    assert!(receiver.export_headers().iter().all(|h| {
        h.iter()
            .any(|(k, v)| k == "x-collector-key" && v == "s3cr=t")
    }));
}

#[test]
fn an_unsampled_traceparent_records_nothing_and_a_call_without_one_starts_a_trace() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, &[]);
    register(&server.http(), "add", "example-add", Some("add"));
    let unsampled = TRACEPARENT.replace("-01", "-00");
    let http = server.http();
    outputs(
        &http
            .with_header("traceparent", &unsampled)
            .post_json("/v1/methods/add/call", &ints(1, 2)),
    );
    // A bad header is ignored, as the specification says: a trace of the call's own.
    outputs(
        &http
            .with_header("traceparent", "00-nothex-00f067aa0ba902b7-01")
            .post_json("/v1/methods/add/call", &ints(1, 2)),
    );
    let spans = receiver.wait_for(WITHIN, "the second call's spans", |s| {
        s.iter()
            .filter(|s| s.span.name == "POST /v1/methods/{name}/call")
            .count()
            == 1
            && s.iter().filter(|s| s.span.name == "run").count() == 1
    });
    assert!(
        spans.iter().all(|s| s.trace_id() != TRACE_ID),
        "nothing of the unsampled trace"
    );
    let call = spans
        .iter()
        .find(|s| s.span.name == "POST /v1/methods/{name}/call")
        .unwrap();
    assert_eq!(call.parent_id(), "", "a root");
    // Health checks and metrics are not traced.
    http.get("/healthz");
    http.get("/metrics");
    outputs(&http.post_json("/v1/methods/add/call", &ints(1, 2)));
    let spans = receiver.wait_for(WITHIN, "the third call", |s| {
        s.iter().filter(|s| s.span.name == "run").count() == 2
    });
    assert!(
        spans
            .iter()
            .all(|s| !s.span.name.contains("healthz") && !s.span.name.contains("metrics"))
    );
}

#[test]
fn guest_log_lines_become_events_and_failures_set_the_error_status() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, &[]);
    let http = server.http();
    register(&http, "flood", "guest-hostile", Some("log_flood"));
    register(&http, "trap", "guest-hostile", Some("panic"));
    let traced = http.with_header("traceparent", TRACEPARENT);
    // 100,000 lines to the log, stdout and stderr: seconds in a debug build on a busy machine.
    outputs(&traced.call("flood", json!([scalar_f32(1.0)]), 60_000));
    let spans = receiver.wait_for(WITHIN, "the flood's run span", |s| {
        s.iter().any(|s| s.span.name == "run")
    });
    let run = named(&spans, TRACE_ID, "run");
    assert!(!run.span.events.is_empty());
    assert!(run.span.events.iter().all(|e| e.name == "log"));
    let first = crate::support::otlp::attribute(&run.span.events[0].attributes, "message").unwrap();
    assert!(first.len() >= 1000, "a whole line: {}", first.len());
    assert!(
        run.attr("wasmrpc.log_dropped_bytes").is_some(),
        "the cap is said"
    );

    let other = "00-11111111111111111111111111111111-2222222222222222-01";
    let r = http
        .with_header("traceparent", other)
        .call("trap", json!([scalar_f32(1.0)]), 0);
    assert!(r.status >= 400);
    let code = r.code();
    let spans = receiver.wait_for(WITHIN, "the trap's span", |s| {
        s.iter()
            .any(|s| s.trace_id() == "11111111111111111111111111111111" && s.span.kind == 2)
    });
    let call = spans
        .iter()
        .find(|s| s.trace_id() == "11111111111111111111111111111111" && s.span.kind == 2)
        .unwrap();
    assert_eq!(call.attr("wasmrpc.code"), Some(code));
    let status = call.span.status.as_ref().expect("a status");
    assert_eq!(status.code, 2, "ERROR");
    assert!(!status.message.is_empty());
}

#[test]
fn no_key_appears_in_any_span() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("admin.key");
    let server = traced_server(&receiver, &["--admin-key-file", file.to_str().unwrap()]);
    let admin = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    let r = server
        .http()
        .with_key(&admin)
        .with_header("traceparent", TRACEPARENT)
        .post_json("/v1/tenants", &json!({ "name": "team-a" }));
    assert_eq!(r.status, 201);
    let key = r.json()["key"].as_str().unwrap().to_owned();
    let http = server
        .http()
        .with_key(&key)
        .with_header("traceparent", TRACEPARENT);
    register(&http, "add", "example-add", Some("add"));
    outputs(&http.post_json("/v1/methods/add/call", &ints(4, 5)));
    // A wrong key too: refused, and still not written down.
    let wrong = "wrk_0000000000000000000000000000000000000000";
    let r = server
        .http()
        .with_key(wrong)
        .with_header("traceparent", TRACEPARENT)
        .post_json("/v1/methods/add/call", &ints(4, 5));
    assert_eq!(r.status, 401);
    let spans = receiver.wait_for(WITHIN, "the calls' spans", |s| {
        s.iter().any(|s| s.span.name == "run")
            && s.iter()
                .filter(|s| s.span.name == "POST /v1/methods/{name}/call")
                .count()
                == 2
    });
    let call = spans
        .iter()
        .find(|s| {
            s.span.name == "POST /v1/methods/{name}/call" && s.attr("wasmrpc.tenant").is_some()
        })
        .unwrap();
    assert_eq!(call.attr("wasmrpc.tenant").as_deref(), Some("team-a"));
    let everything = format!("{spans:?}");
    for secret in [&admin, &key, &wrong.to_owned()] {
        assert!(!everything.contains(secret.as_str()), "a key in the spans");
    }
    assert!(!everything.to_lowercase().contains("bearer"));
}

#[test]
fn a_collector_that_is_down_or_refuses_costs_the_calls_nothing() {
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let server = TestServer::start_with_env(
        &["--otlp-endpoint", &format!("http://{closed}")],
        &[("OTEL_BSP_SCHEDULE_DELAY", "20")],
    );
    let http = server.http().with_header("traceparent", TRACEPARENT);
    register(&http, "add", "example-add", Some("add"));
    let started = Instant::now();
    for i in 0..200 {
        outputs(&http.post_json("/v1/methods/add/call", &ints(i, 1)));
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "200 calls took {took:?}");
    eventually(WITHIN, "failed exports counted", || {
        let metrics = String::from_utf8(http.get("/metrics").body).unwrap();
        metrics.lines().any(|l| {
            l.starts_with("wasmrpc_trace_spans_dropped_total{reason=\"export_failed\"}")
                && !l.ends_with(" 0")
        })
    });

    // A collector that answers with errors: the same, and once it takes spans again they flow.
    let receiver = Receiver::start();
    receiver.refuse(true);
    let server = traced_server(&receiver, &[]);
    let http = server.http().with_header("traceparent", TRACEPARENT);
    register(&http, "add", "example-add", Some("add"));
    for i in 0..20 {
        outputs(&http.post_json("/v1/methods/add/call", &ints(i, 1)));
    }
    eventually(WITHIN, "refused exports tried", || {
        !receiver.export_headers().is_empty()
    });
    receiver.refuse(false);
    outputs(&http.post_json("/v1/methods/add/call", &ints(0, 0)));
    receiver.wait_for(WITHIN, "spans once the collector takes them", |s| {
        s.iter().any(|s| s.span.name == "run")
    });
}

#[test]
fn a_call_through_a_second_worker_is_one_trace_across_both() {
    let Some(nats) = Nats::start() else { return };
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let traced = ["--otlp-endpoint", endpoint.as_str()];
    let env = [("OTEL_BSP_SCHEDULE_DELAY", "50")];
    let url = nats.url();
    let start = |name: &str| {
        let mut args = vec!["--cluster", url.as_str(), "--name", name];
        args.extend_from_slice(&traced);
        TestServer::start_with_env(&args, &env)
    };
    let a = start("alpha");
    let b = start("beta");
    let _ = worker;
    eventually(WITHIN, "both workers see each other", || {
        crate::cluster::names(&a).len() == 2 && crate::cluster::names(&b).len() == 2
    });
    register(&a.http(), "add", "example-add", Some("add"));
    let r = a.http().with_header("traceparent", TRACEPARENT).post_json(
        "/v1/methods/add/call?worker=beta",
        &json!({ "args": add_args(2, 3) }),
    );
    assert_eq!(outputs(&r)[0]["data"], json!([5]));
    let _ = call_on;
    let spans = receiver.wait_for(WITHIN, "spans from both workers", |s| {
        s.iter()
            .any(|s| s.span.name == "call add" && s.resource("service.instance.id") == Some("beta"))
            && s.iter().any(|s| s.span.name == "forward add")
            && s.iter()
                .any(|s| s.span.name == "run" && s.resource("service.instance.id") == Some("beta"))
    });
    let first = named(&spans, TRACE_ID, "POST /v1/methods/{name}/call");
    assert_eq!(first.parent_id(), PARENT_ID);
    assert_eq!(first.resource("service.instance.id"), Some("alpha"));
    assert_eq!(first.attr("wasmrpc.worker").as_deref(), Some("alpha"));
    let forward = named(&spans, TRACE_ID, "forward add");
    assert_eq!(forward.parent_id(), first.span_id());
    assert_eq!(forward.span.kind, 3, "CLIENT");
    assert_eq!(forward.attr("wasmrpc.worker").as_deref(), Some("beta"));
    assert_eq!(forward.attr("messaging.system").as_deref(), Some("nats"));
    let there = named(&spans, TRACE_ID, "call add");
    assert_eq!(
        there.parent_id(),
        forward.span_id(),
        "beta's span is the forward's child"
    );
    assert_eq!(there.span.kind, 2, "SERVER");
    assert_eq!(there.resource("service.instance.id"), Some("beta"));
    assert_eq!(there.attr("wasmrpc.worker").as_deref(), Some("beta"));
    assert_eq!(there.attr("wasmrpc.code").as_deref(), Some("OK"));
    let run = named(&spans, TRACE_ID, "run");
    assert_eq!(run.parent_id(), there.span_id());
    assert!(first.span.start_time_unix_nano <= forward.span.start_time_unix_nano);
    assert!(forward.span.end_time_unix_nano <= first.span.end_time_unix_nano);
}

//! What a call and a registration add to their trace (`otel/`): the attributes of the span of
//! the request that carries them (or of a span of their own, for the embedded server and for
//! calls from other workers), and their child spans. Every function here returns at once when
//! tracing is off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmrpc_proto::Tensor;

use crate::error::ServiceError;
use crate::otel::{self, Kind, Shared, Span, Value, ValueRef, request};
use crate::registry::Registration;
use crate::runtime::Phases;

/// The bytes of tensor data in `tensors`.
pub fn tensor_bytes(tensors: &[Tensor]) -> u64 {
    tensors.iter().map(|t| t.raw_data().len() as u64).sum()
}

/// A span of a call's own, when no request carries it (a call of the embedded server): `None`
/// when tracing is off or a request span is there already.
pub fn own_call_span(name: &str) -> Option<request::Current> {
    if !otel::enabled() || request::sampled().is_some() {
        return None;
    }
    Some(
        match otel::start(None, format!("call {name}"), Kind::Internal, Instant::now()) {
            Some(span) => request::Current::Recording(span),
            None => request::Current::NotRecorded(otel::not_recorded(None)),
        },
    )
}

/// The span of a call another worker sent here, a child of its `forward` span there.
pub fn peer_call_span(
    parent: Option<&otel::SpanContext>,
    name: &str,
    worker: Option<&str>,
) -> Option<request::Current> {
    if !otel::enabled() {
        return None;
    }
    Some(
        match otel::start(parent, format!("call {name}"), Kind::Server, Instant::now()) {
            Some(mut span) => {
                span.set("rpc.system", "wasmrpc");
                span.set("messaging.system", "nats");
                if let Some(w) = worker {
                    span.set("wasmrpc.worker", w.to_owned());
                }
                request::Current::Recording(span)
            }
            None => request::Current::NotRecorded(otel::not_recorded(parent)),
        },
    )
}

/// The admission of a call, from `started` for `waited`: a step, and its wait.
pub fn admission(started: Instant, waited: Duration) {
    if !otel::enabled() {
        return;
    }
    request::with_span(|span| {
        span.set("wasmrpc.admission_wait_us", waited.as_micros() as u64);
        span.child("admission", started, started + waited);
    });
}

/// What a call's span says once it has ended: who called what, how much went in and out, and
/// how it ended.
pub fn call_ended(
    registration: &Arc<Registration>,
    worker: Option<&str>,
    bytes_in: u64,
    result: &Result<Vec<Tensor>, ServiceError>,
) {
    request::with_span(|span| {
        span.set_if_absent("rpc.system", "wasmrpc");
        // The method's identity and `rpc.method` (unless the gRPC request's span set it), as
        // this thread wrote them for the method's last call (`Span::share`).
        span.share(registration);
        if let Some(w) = worker {
            span.set_if_absent("wasmrpc.worker", w.to_owned());
        }
        span.set("wasmrpc.bytes_in", bytes_in);
        match result {
            Ok(outputs) => {
                span.set("wasmrpc.bytes_out", tensor_bytes(outputs));
                span.set("wasmrpc.code", "OK");
            }
            Err(e) => {
                span.set("wasmrpc.bytes_out", 0u64);
                span.set("wasmrpc.code", e.code().as_str());
                span.fail(
                    e.public_message()
                        .unwrap_or_else(|| e.code().as_str().to_owned()),
                );
            }
        }
    });
}

/// A called method's identity, as its call's span says it: the name (as `rpc.method` too), the
/// tenant id (never a key), the version and the digest.
impl Shared for Registration {
    fn attributes(&self, out: &mut dyn FnMut(&'static str, ValueRef<'_>)) {
        out("rpc.method", ValueRef::Str(&self.name));
        out("wasmrpc.tenant", ValueRef::Str(self.tenant.as_str()));
        out("wasmrpc.method", ValueRef::Str(&self.name));
        out("wasmrpc.version", ValueRef::Int(i64::from(self.version)));
        out("wasmrpc.digest", ValueRef::Digest(&self.digest.0));
    }
}

/// A registered method's identity: tenant id (never a key), name, version, digest.
fn describe(span: &mut Span, registration: &Registration) {
    span.set("wasmrpc.tenant", registration.tenant.as_str().to_owned());
    span.set("wasmrpc.method", registration.name.clone());
    span.set("wasmrpc.version", registration.version);
    span.set("wasmrpc.digest", Value::Digest(registration.digest.0));
}

/// A component loaded (compiled, or read from its artifact) for a call, from `started` until
/// now: a step.
pub fn loaded(started: Instant, registration: &Registration) {
    request::with_span(|span| {
        if let Some(load) = span.child("load", started, Instant::now()) {
            load.attributes
                .push(("wasmrpc.digest", Value::Digest(registration.digest.0)));
        }
    });
}

/// A call run here: its wait for a call slot (from `queued` until it began on its thread), its
/// instance and its guest (`phases`), as steps and attributes; the guest's log lines become
/// events of the `run` step.
pub fn ran(queued: Instant, phases: &mut Phases) {
    let finished = phases.finished.unwrap_or_else(Instant::now);
    let admitted = phases.began.unwrap_or(queued);
    let instantiated = phases.instantiated.unwrap_or(finished);
    let log = phases.log.take();
    request::with_span(|span| {
        span.set(
            "wasmrpc.slot_wait_us",
            admitted.saturating_duration_since(queued).as_micros() as u64,
        );
        span.set(
            "wasmrpc.instantiate_us",
            instantiated.saturating_duration_since(admitted).as_micros() as u64,
        );
        span.set(
            "wasmrpc.guest_run_us",
            finished.saturating_duration_since(instantiated).as_micros() as u64,
        );
        span.child("instantiate", admitted, instantiated);
        let Some(run) = span.child("run", instantiated, finished) else {
            return;
        };
        if let Some((text, dropped)) = log {
            let at = run.end_ns;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                run.events.push(otel::span::Event {
                    time_ns: at,
                    name: "log",
                    attributes: vec![("message", line.to_owned().into())],
                });
            }
            if dropped > 0 {
                run.attributes
                    .push(("wasmrpc.log_dropped_bytes", dropped.into()));
            }
        }
    });
}

/// Whether the guest's log is wanted for the trace.
pub fn wants_log() -> bool {
    otel::enabled() && request::sampled() == Some(true)
}

/// A registration: what was registered, and whether it was compiled (a step from `started` to
/// `compiled`) or known already.
pub fn registered(registration: &Registration, compiled: Option<(Instant, Instant)>) {
    if !otel::enabled() {
        return;
    }
    request::with_span(|span| {
        describe(span, registration);
        span.set("wasmrpc.size", registration.size);
        span.set("wasmrpc.compile_cache_hit", compiled.is_none());
        if let Some((start, end)) = compiled {
            span.set("wasmrpc.compile_ms", (end - start).as_millis() as u64);
            span.child("compile", start, end);
        }
    });
}

//! OpenTelemetry traces: each call's spans, children of the caller's W3C `traceparent`, exported
//! over OTLP to a collector (docs/operations.md, "Traces").
//!
//! The parts: [`context`] (the W3C headers and identifiers), [`span`] (spans being recorded and
//! finished), [`request`] (the span of each HTTP or gRPC request, held where the code handling
//! it can reach it), [`request_attributes`] (what that span says of its request, written once a
//! thread for requests alike), [`settings`] (flags and `OTEL_*` variables), [`encode`] (OTLP protobuf) and
//! [`export`] (the queue and the thread that sends it).
//!
//! Spans are recorded by this module, not through the `tracing` crate: a span's attributes are
//! written in protobuf as they are set (a request's, once a thread for requests alike), into a
//! record the thread keeps for its next span, and the span is written into that thread's own
//! open batch when it ends, which keeps a server that samples every call close to one that
//! traces nothing (docs/benchmarks.md, "Tracing"). With no endpoint configured every entry
//! point returns at the first check.

pub mod context;
pub mod encode;
pub mod export;
pub mod request;
pub mod request_attributes;
pub mod settings;
pub mod span;

use std::sync::OnceLock;
use std::time::Instant;

pub use context::SpanContext;
pub use settings::{TraceFlags, TraceSettings};
pub use span::{Kind, Shared, Span, Value, ValueRef};

/// The instrumentation scope's name.
const SCOPE: &str = "wasmrpc";

/// What decides whether a trace is recorded, once installed.
static SAMPLER: OnceLock<settings::Sampler> = OnceLock::new();

/// Whether spans are recorded in this process.
#[inline]
pub fn enabled() -> bool {
    SAMPLER.get().is_some()
}

/// Record spans from now on, as `settings` say: `worker` (a cluster worker's name) becomes
/// `service.instance.id`. Returns false when an exporter was installed already (a second
/// embedded server in one process shares the first one's).
///
/// # Errors
/// The exporter could not start.
pub fn install(settings: &TraceSettings, worker: Option<&str>) -> anyhow::Result<bool> {
    let mut resource = settings.resource.clone();
    resource.push((
        "service.version".to_owned(),
        env!("CARGO_PKG_VERSION").to_owned(),
    ));
    if !resource.iter().any(|(k, _)| k == "service.instance.id") {
        let instance = match worker {
            Some(name) => name.to_owned(),
            None => hex::encode(context::new_span_id()),
        };
        resource.push(("service.instance.id".to_owned(), instance));
    }
    if let Ok(host) = hostname() {
        resource.push(("host.name".to_owned(), host));
    }
    let origin = encode::Origin {
        resource,
        scope: SCOPE,
        version: env!("CARGO_PKG_VERSION"),
    };
    let installed = export::install(settings, origin)?;
    if installed {
        let _ = SAMPLER.set(settings.sampler);
        tracing::info!(
            endpoint = %settings.endpoint_for_display(),
            protocol = ?settings.protocol,
            sampler = ?settings.sampler,
            "exporting traces"
        );
    }
    Ok(installed)
}

fn hostname() -> std::io::Result<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned())
}

/// A span starting at `at`, as a child of `parent` (its context, here or from a caller) or the
/// root of a new trace; `None` when tracing is off or the trace is not recorded.
///
/// A child of a span of this process is recorded when its parent is; a caller's context and a
/// new trace are put to the sampler.
pub fn start(
    parent: Option<&SpanContext>,
    name: impl Into<span::Name>,
    kind: Kind,
    at: Instant,
) -> Option<Span> {
    let sampler = SAMPLER.get()?;
    let (trace_id, recorded) = match parent {
        Some(p) if !p.remote => (p.trace_id, p.sampled),
        Some(p) => (p.trace_id, sampler.records(&p.trace_id, Some(p.sampled))),
        None => {
            let id = context::new_trace_id();
            (id, sampler.records(&id, None))
        }
    };
    recorded.then(|| Span::start(parent, trace_id, name.into(), kind, at))
}

/// The context passed on when a trace is not recorded here: the caller's, or a new trace's,
/// marked not sampled, so that the workers after this one do not record it either.
pub fn not_recorded(parent: Option<&SpanContext>) -> SpanContext {
    match parent {
        Some(p) => SpanContext {
            sampled: false,
            ..p.clone()
        },
        None => SpanContext {
            trace_id: context::new_trace_id(),
            span_id: context::new_span_id(),
            sampled: false,
            state: None,
            remote: false,
        },
    }
}

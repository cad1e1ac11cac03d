//! Call counts and latency histograms per method, rendered in the Prometheus text format; and
//! per-version success and failure counts with their queue and compute time, which the KServe v2
//! statistics routes show and Triton's `nv_inference_*` metric names are rendered from.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmrpc_proto::Code;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

#[derive(Default)]
struct MethodStats {
    /// Calls by result: `OK` or the canonical code name.
    results: BTreeMap<&'static str, u64>,
    /// Cumulative counts per bucket, plus the `+Inf` bucket at the end.
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
    /// Per registered version, since it was registered (or since start); forgotten when the
    /// method is deleted, so a name registered again starts from zero, as Triton's statistics do
    /// for a model loaded again. The Prometheus counters above are never reset.
    versions: BTreeMap<u32, VersionStats>,
}

/// Calls of one version of a method: how many succeeded and failed, and how long they took (from
/// the arguments' check to the last output: queueing and the guest included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VersionStats {
    /// Calls that succeeded.
    pub success_count: u64,
    /// Their summed duration, in nanoseconds.
    pub success_ns: u64,
    /// Calls that failed (refused arguments, quota, admission, the guest's failure, cancelled).
    pub fail_count: u64,
    /// Their summed duration, in nanoseconds.
    pub fail_ns: u64,
    /// When the last call ended, in milliseconds since the Unix epoch; 0 for none.
    pub last_call_ms: u64,
    /// The successful calls' time waiting for admission (a call slot), in nanoseconds.
    pub queue_ns: u64,
    /// The successful calls' time after admission (instantiating and running the guest), in
    /// nanoseconds.
    pub compute_ns: u64,
}

/// How long a call took: in all, and waiting for admission (zero for a call that was not
/// admitted here, or never reached admission).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallTimes {
    /// From the arguments' check to the last output.
    pub total: Duration,
    /// Waiting for a call slot.
    pub queued: Duration,
}

impl From<Duration> for CallTimes {
    fn from(total: Duration) -> Self {
        CallTimes {
            total,
            queued: Duration::ZERO,
        }
    }
}

/// The server's metrics.
#[derive(Default)]
pub struct Metrics {
    /// Tenant, then method: nested so a call looks its entry up without allocating.
    methods: Mutex<BTreeMap<String, BTreeMap<String, MethodStats>>>,
    registrations: Mutex<BTreeMap<String, u64>>,
    clients: Mutex<BTreeMap<String, u64>>,
}

/// Distinct client names kept as labels; later names count as `other`, so a client cannot grow
/// the metrics without bound by inventing names.
pub const MAX_CLIENT_LABELS: usize = 100;

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Escape a label value for the text format.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// Count one call of `version` of `method` with its result (`None` = OK) and latency.
    pub fn record_call(
        &self,
        tenant: &str,
        method: &str,
        version: u32,
        error: Option<Code>,
        times: impl Into<CallTimes>,
    ) {
        let times = times.into();
        let latency = times.total;
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        if !methods.contains_key(tenant) {
            methods.insert(tenant.to_owned(), BTreeMap::new());
        }
        let per_tenant = methods.get_mut(tenant).expect("inserted above");
        if !per_tenant.contains_key(method) {
            per_tenant.insert(method.to_owned(), MethodStats::default());
        }
        let stats = per_tenant.get_mut(method).expect("inserted above");
        *stats
            .results
            .entry(error.map_or("OK", Code::as_str))
            .or_default() += 1;
        let secs = latency.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        stats.buckets[bucket] += 1;
        stats.sum_seconds += secs;
        let of_version = stats.versions.entry(version).or_default();
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        if error.is_none() {
            of_version.success_count += 1;
            of_version.success_ns = of_version.success_ns.saturating_add(nanos);
            let queued = u64::try_from(times.queued.as_nanos()).unwrap_or(u64::MAX);
            of_version.queue_ns = of_version.queue_ns.saturating_add(queued);
            of_version.compute_ns = of_version
                .compute_ns
                .saturating_add(nanos.saturating_sub(queued));
        } else {
            of_version.fail_count += 1;
            of_version.fail_ns = of_version.fail_ns.saturating_add(nanos);
        }
        of_version.last_call_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    }

    /// The calls of each version of `method` counted since it was registered (versions without
    /// a call are absent).
    pub fn version_stats(&self, tenant: &str, method: &str) -> BTreeMap<u32, VersionStats> {
        let methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        methods
            .get(tenant)
            .and_then(|m| m.get(method))
            .map(|s| s.versions.clone())
            .unwrap_or_default()
    }

    /// Forget the per-version counts of `method` (it was deleted); its Prometheus counters stay.
    pub fn forget_versions(&self, tenant: &str, method: &str) {
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stats) = methods.get_mut(tenant).and_then(|m| m.get_mut(method)) {
            stats.versions.clear();
        }
    }

    /// Forget the statistics of one version of a method (that version was unregistered).
    pub fn forget_version(&self, tenant: &str, method: &str, version: u32) {
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stats) = methods.get_mut(tenant).and_then(|m| m.get_mut(method)) {
            stats.versions.remove(&version);
        }
    }

    /// Count one request from a client that named itself (`x-wasmrpc-client`).
    pub fn record_client(&self, name: &str) {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let label = if !valid {
            "invalid"
        } else if clients.contains_key(name) || clients.len() < MAX_CLIENT_LABELS {
            name
        } else {
            "other"
        };
        if let Some(n) = clients.get_mut(label) {
            *n += 1;
        } else {
            clients.insert(label.to_owned(), 1);
        }
    }

    /// Count one registration.
    pub fn record_registration(&self, tenant: &str) {
        let mut r = self.registrations.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry(tenant.to_owned()).or_default() += 1;
    }

    /// Calls counted so far for `method`, all results together.
    #[cfg(test)]
    pub fn calls(&self, tenant: &str, method: &str) -> u64 {
        let methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        methods
            .get(tenant)
            .and_then(|m| m.get(method))
            .map_or(0, |s| s.results.values().sum())
    }

    /// Everything, in the Prometheus text exposition format.
    pub fn render(&self) -> String {
        self.render_scoped(None)
    }

    /// What `tenant` may see: the series labelled with it alone, none of the process-wide ones
    /// (which clients call, how many compiles) that would tell of other tenants' activity.
    pub fn render_for_tenant(&self, tenant: &str) -> String {
        self.render_scoped(Some(tenant))
    }

    fn render_scoped(&self, only: Option<&str>) -> String {
        let mut out = String::new();
        let shown = |tenant: &str| only.is_none_or(|t| t == tenant);
        let methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str("# HELP wasmrpc_calls_total Method calls by result code.\n");
        out.push_str("# TYPE wasmrpc_calls_total counter\n");
        let all = || {
            methods
                .iter()
                .filter(|(t, _)| shown(t))
                .flat_map(|(t, ms)| ms.iter().map(move |(m, s)| (t, m, s)))
        };
        for (tenant, method, stats) in all() {
            for (code, n) in &stats.results {
                let _ = writeln!(
                    out,
                    "wasmrpc_calls_total{{tenant=\"{}\",method=\"{}\",code=\"{code}\"}} {n}",
                    label(tenant),
                    label(method)
                );
            }
        }
        out.push_str("# HELP wasmrpc_call_duration_seconds Latency of calls that reached a method: argument checks, queueing and the guest.\n");
        out.push_str("# TYPE wasmrpc_call_duration_seconds histogram\n");
        for (tenant, method, stats) in all() {
            let labels = format!("tenant=\"{}\",method=\"{}\"", label(tenant), label(method));
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += stats.buckets[i];
                let _ = writeln!(
                    out,
                    "wasmrpc_call_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += stats.buckets[BUCKETS.len()];
            let _ = writeln!(
                out,
                "wasmrpc_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                out,
                "wasmrpc_call_duration_seconds_sum{{{labels}}} {}",
                stats.sum_seconds
            );
            let _ = writeln!(
                out,
                "wasmrpc_call_duration_seconds_count{{{labels}}} {cumulative}"
            );
        }
        triton_metrics(&mut out, all());
        drop(methods);
        let registrations = self.registrations.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str("# HELP wasmrpc_registrations_total Components registered since start.\n");
        out.push_str("# TYPE wasmrpc_registrations_total counter\n");
        for (tenant, n) in registrations.iter().filter(|(t, _)| shown(t)) {
            let _ = writeln!(
                out,
                "wasmrpc_registrations_total{{tenant=\"{}\"}} {n}",
                label(tenant)
            );
        }
        drop(registrations);
        if only.is_some() {
            return out;
        }
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        out.push_str("# HELP wasmrpc_client_requests_total Requests by the name clients give in x-wasmrpc-client.\n");
        out.push_str("# TYPE wasmrpc_client_requests_total counter\n");
        for (client, n) in clients.iter() {
            let _ = writeln!(
                out,
                "wasmrpc_client_requests_total{{client=\"{}\"}} {n}",
                label(client)
            );
        }
        out.push_str("# HELP wasmrpc_calls_in_instances_made_ahead_total Calls in this process that started in an instance made while their thread was idle.\n");
        out.push_str("# TYPE wasmrpc_calls_in_instances_made_ahead_total counter\n");
        let _ = writeln!(
            out,
            "wasmrpc_calls_in_instances_made_ahead_total {}",
            crate::runtime::calls_in_ready_instances()
        );
        out.push_str("# HELP wasmrpc_compiles_total Components compiled by this process (loads of a stored artifact are not counted).\n");
        out.push_str("# TYPE wasmrpc_compiles_total counter\n");
        let _ = writeln!(
            out,
            "wasmrpc_compiles_total {}",
            crate::runtime::compiles_started()
        );
        out.push_str("# HELP wasmrpc_idle_code_releases_total Times an idle component's code pages were handed back to the kernel.\n");
        out.push_str("# TYPE wasmrpc_idle_code_releases_total counter\n");
        let _ = writeln!(
            out,
            "wasmrpc_idle_code_releases_total {}",
            crate::runtime::idle_code_releases()
        );
        let spans = crate::otel::export::stats();
        out.push_str("# HELP wasmrpc_trace_spans_exported_total Spans the OTLP collector took.\n");
        out.push_str("# TYPE wasmrpc_trace_spans_exported_total counter\n");
        let _ = writeln!(
            out,
            "wasmrpc_trace_spans_exported_total {}",
            spans.exported.load(Ordering::Relaxed)
        );
        out.push_str("# HELP wasmrpc_trace_spans_dropped_total Spans not exported: queue_full (more than the exporter's queue holds), export_failed (the collector did not take them).\n");
        out.push_str("# TYPE wasmrpc_trace_spans_dropped_total counter\n");
        for (reason, n) in [
            ("queue_full", &spans.dropped_queue_full),
            ("export_failed", &spans.dropped_export_failed),
        ] {
            let _ = writeln!(
                out,
                "wasmrpc_trace_spans_dropped_total{{reason=\"{reason}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out
    }
}

/// Triton's metric names (`nv_inference_*`), from the per-version counts, so that dashboards and
/// autoscaling rules written for Triton read wasmrpc: labelled by `model` and `version` as
/// Triton's are, and by `tenant` too (the same model name in two tenants is two models). A
/// wasmrpc call is one inference and one execution (no batching). Like Triton's, a model's series
/// go when it is unloaded (deleted).
fn triton_metrics<'m>(
    out: &mut String,
    all: impl Iterator<Item = (&'m String, &'m String, &'m MethodStats)> + Clone,
) {
    type Value = fn(&VersionStats) -> u64;
    const SERIES: [(&str, &str, Value); 7] = [
        (
            "nv_inference_request_success",
            "Number of successful inference requests, all batch sizes",
            |v| v.success_count,
        ),
        (
            "nv_inference_request_failure",
            "Number of failed inference requests, all batch sizes",
            |v| v.fail_count,
        ),
        (
            "nv_inference_count",
            "Number of inferences performed (one per successful call)",
            |v| v.success_count,
        ),
        (
            "nv_inference_exec_count",
            "Number of model executions performed (one per successful call)",
            |v| v.success_count,
        ),
        (
            "nv_inference_request_duration_us",
            "Cumulative inference request duration in microseconds",
            |v| v.success_ns.saturating_add(v.fail_ns) / 1000,
        ),
        (
            "nv_inference_queue_duration_us",
            "Cumulative inference queuing duration in microseconds",
            |v| v.queue_ns / 1000,
        ),
        (
            "nv_inference_compute_infer_duration_us",
            "Cumulative compute inference duration in microseconds",
            |v| v.compute_ns / 1000,
        ),
    ];
    for (name, help, value) in SERIES {
        let _ = writeln!(out, "# HELP {name} {help} (Triton's name).");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (tenant, method, stats) in all.clone() {
            for (version, counts) in &stats.versions {
                let _ = writeln!(
                    out,
                    "{name}{{model=\"{}\",version=\"{version}\",tenant=\"{}\"}} {}",
                    label(method),
                    label(tenant),
                    value(counts)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_code_and_bucketed() {
        let m = Metrics::default();
        m.record_call("t", "add", 1, None, Duration::from_micros(50));
        m.record_call(
            "t",
            "add",
            2,
            Some(Code::DeadlineExceeded),
            Duration::from_secs(2),
        );
        let text = m.render();
        assert!(text.contains(r#"wasmrpc_calls_total{tenant="t",method="add",code="OK"} 1"#));
        assert!(text.contains(r#"code="DEADLINE_EXCEEDED"} 1"#));
        assert!(text.contains(r#"method="add",le="0.0001"} 1"#));
        assert!(text.contains(r#"method="add",le="+Inf"} 2"#));
        assert_eq!(m.calls("t", "add"), 2);
    }

    #[test]
    fn tritons_metric_names_count_each_version_with_its_queue_and_compute_time() {
        let m = Metrics::default();
        let times = |total_us, queued_us| CallTimes {
            total: Duration::from_micros(total_us),
            queued: Duration::from_micros(queued_us),
        };
        m.record_call("t", "add", 1, None, times(300, 100));
        m.record_call("t", "add", 1, None, times(500, 0));
        m.record_call("t", "add", 1, Some(Code::InvalidArgument), times(40, 0));
        m.record_call("t", "add", 2, None, times(10, 0));
        let text = m.render();
        for line in [
            r#"nv_inference_request_success{model="add",version="1",tenant="t"} 2"#,
            r#"nv_inference_request_failure{model="add",version="1",tenant="t"} 1"#,
            r#"nv_inference_count{model="add",version="1",tenant="t"} 2"#,
            r#"nv_inference_exec_count{model="add",version="1",tenant="t"} 2"#,
            r#"nv_inference_request_duration_us{model="add",version="1",tenant="t"} 840"#,
            r#"nv_inference_queue_duration_us{model="add",version="1",tenant="t"} 100"#,
            r#"nv_inference_compute_infer_duration_us{model="add",version="1",tenant="t"} 700"#,
            r#"nv_inference_request_success{model="add",version="2",tenant="t"} 1"#,
            "# TYPE nv_inference_queue_duration_us counter",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        m.forget_versions("t", "add");
        assert!(!m.render().contains("nv_inference_request_success{"));
    }

    #[test]
    fn a_tenant_sees_only_its_own_series() {
        let m = Metrics::default();
        m.record_call("a", "mine", 1, None, Duration::from_micros(50));
        m.record_call("b", "theirs", 1, None, Duration::from_micros(50));
        m.record_registration("b");
        m.record_client("someone");
        let text = m.render_for_tenant("a");
        assert!(text.contains(r#"wasmrpc_calls_total{tenant="a",method="mine",code="OK"} 1"#));
        assert!(text.contains(r#"tenant="a",method="mine",le="+Inf"} 1"#));
        for hidden in [
            "theirs",
            r#"tenant="b""#,
            "someone",
            "wasmrpc_compiles_total ",
        ] {
            assert!(
                !text.contains(hidden),
                "{hidden} shown to tenant a:\n{text}"
            );
        }
        assert!(m.render().contains("theirs"));
    }

    #[test]
    fn versions_count_successes_and_failures_until_the_method_is_deleted() {
        let m = Metrics::default();
        m.record_call("t", "add", 1, None, Duration::from_micros(50));
        m.record_call("t", "add", 1, None, Duration::from_micros(70));
        m.record_call(
            "t",
            "add",
            2,
            Some(Code::Internal),
            Duration::from_millis(3),
        );
        m.record_call("u", "add", 1, None, Duration::from_micros(10));
        let versions = m.version_stats("t", "add");
        let one = versions[&1];
        assert_eq!((one.success_count, one.success_ns), (2, 120_000));
        assert_eq!((one.fail_count, one.fail_ns), (0, 0));
        assert!(one.last_call_ms > 0);
        let two = versions[&2];
        assert_eq!(
            (two.success_count, two.fail_count, two.fail_ns),
            (0, 1, 3_000_000)
        );
        m.forget_versions("t", "add");
        assert!(m.version_stats("t", "add").is_empty());
        assert_eq!(
            m.version_stats("u", "add")[&1].success_count,
            1,
            "per tenant"
        );
        assert_eq!(m.calls("t", "add"), 3, "the Prometheus counters stay");
    }

    #[test]
    fn client_names_are_bounded_labels() {
        let m = Metrics::default();
        m.record_client("trainer-1");
        m.record_client("trainer-1");
        m.record_client("bad name\"");
        for i in 0..MAX_CLIENT_LABELS + 5 {
            m.record_client(&format!("c{i}"));
        }
        let text = m.render();
        assert!(text.contains(r#"wasmrpc_client_requests_total{client="trainer-1"} 2"#));
        assert!(text.contains(r#"wasmrpc_client_requests_total{client="invalid"} 1"#));
        assert!(text.contains(r#"wasmrpc_client_requests_total{client="other"}"#));
    }
}

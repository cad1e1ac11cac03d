//! Where traces go and which are recorded, resolved from `wasmrpc serve`'s flags (each with the
//! standard `OTEL_*` variable behind it) and the other standard variables OpenTelemetry's SDKs
//! read: tracing is off unless an OTLP endpoint is configured.
//!
//! | setting | flag | variable | default |
//! |---|---|---|---|
//! | endpoint | `--otlp-endpoint` | `OTEL_EXPORTER_OTLP_ENDPOINT` (`…_TRACES_ENDPOINT` as is) | off |
//! | protocol | `--otlp-protocol` | `OTEL_EXPORTER_OTLP_PROTOCOL` (`…_TRACES_PROTOCOL`) | `http/protobuf` |
//! | headers | `--otlp-headers` | `OTEL_EXPORTER_OTLP_HEADERS` (`…_TRACES_HEADERS`) | none |
//! | service name | `--service-name` | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | `wasmrpc` |
//! | sampler | `--traces-sampler` | `OTEL_TRACES_SAMPLER` | `parentbased_always_on` |
//! | its argument | `--traces-sampler-arg` | `OTEL_TRACES_SAMPLER_ARG` | `1.0` |
//! | export timeout | | `OTEL_EXPORTER_OTLP_TIMEOUT` (`…_TRACES_TIMEOUT`), ms | 10000 |
//! | CA certificates | | `OTEL_EXPORTER_OTLP_CERTIFICATE` (`…_TRACES_CERTIFICATE`) | the web PKI's roots |
//! | queue, batch, delay | | `OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_SCHEDULE_DELAY` (ms) | 2048, 512, 5000 |
//!
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// How spans leave: OTLP over HTTP with protobuf bodies, or over gRPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`: `POST …/v1/traces`.
    HttpProtobuf,
    /// `grpc`: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.
    Grpc,
}

/// Which traces are recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampler {
    /// Every trace.
    AlwaysOn,
    /// None.
    AlwaysOff,
    /// This share of traces, by trace id (so every worker decides the same for a trace).
    Ratio(f64),
    /// As the caller's `traceparent` says when there is one; else as the inner sampler says.
    ParentBased(Root),
}

/// A parent-based sampler's decision for a trace that starts here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    /// Record it.
    AlwaysOn,
    /// Do not.
    AlwaysOff,
    /// Record this share.
    Ratio(f64),
}

/// The resolved settings of trace export.
#[derive(Clone, PartialEq)]
pub struct TraceSettings {
    /// The URL spans are sent to (with `/v1/traces` for HTTP).
    pub endpoint: String,
    /// How.
    pub protocol: Protocol,
    /// Headers sent with every export (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
    /// Which traces are recorded.
    pub sampler: Sampler,
    /// How long one export may take.
    pub timeout: Duration,
    /// A PEM file of CA certificates to trust for an `https` endpoint.
    pub certificate: Option<PathBuf>,
    /// Spans held waiting for export; past it new ones are dropped (and counted).
    pub max_queue: usize,
    /// Spans sent in one export at most.
    pub max_batch: usize,
    /// How long a span waits at most before its batch is sent.
    pub delay: Duration,
}

/// What the flags (or the config file) say; the rest comes from the environment.
#[derive(Debug, Clone, Default)]
pub struct TraceFlags {
    /// `--otlp-endpoint`.
    pub endpoint: Option<String>,
    /// `--otlp-protocol`.
    pub protocol: Option<String>,
    /// `--otlp-headers`.
    pub headers: Option<String>,
    /// `--service-name`.
    pub service_name: Option<String>,
    /// `--traces-sampler`.
    pub sampler: Option<String>,
    /// `--traces-sampler-arg`.
    pub sampler_arg: Option<String>,
}

impl TraceFlags {
    /// The settings, with the process's environment; `None` when tracing is off.
    ///
    /// # Errors
    /// A setting that is not understood (the message names it).
    pub fn resolve(&self) -> anyhow::Result<Option<TraceSettings>> {
        self.resolve_with(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
    }

    /// [`TraceFlags::resolve`] with the variables `env` gives.
    pub fn resolve_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Option<TraceSettings>> {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none")
        {
            return Ok(None);
        }
        let protocol = match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| self.protocol.clone())
            .as_deref()
            .map(str::trim)
        {
            None | Some("http/protobuf") => Protocol::HttpProtobuf,
            Some("grpc") => Protocol::Grpc,
            Some(other) => bail!(
                "--otlp-protocol (OTEL_EXPORTER_OTLP_PROTOCOL) is http/protobuf or grpc, not \
                 `{other}` (http/json is not supported)"
            ),
        };
        let endpoint = match (env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), &self.endpoint) {
            (Some(traces), _) => traces.trim().to_owned(),
            (None, Some(base)) => signal_url(base.trim(), protocol),
            // An exporter asked for by name, with no endpoint: the standard local collector.
            (None, None) if env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "otlp") => {
                match protocol {
                    Protocol::HttpProtobuf => "http://localhost:4318/v1/traces".to_owned(),
                    Protocol::Grpc => "http://localhost:4317".to_owned(),
                }
            }
            (None, None) => return Ok(None),
        };
        check_url(&endpoint)?;
        let mut headers = match &self.headers {
            Some(h) => parse_pairs(h, "--otlp-headers (OTEL_EXPORTER_OTLP_HEADERS)")?,
            None => Vec::new(),
        };
        if let Some(h) = env("OTEL_EXPORTER_OTLP_TRACES_HEADERS") {
            for (k, v) in parse_pairs(&h, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")? {
                headers.retain(|(name, _)| *name != k);
                headers.push((k, v));
            }
        }
        for (name, _) in &mut headers {
            *name = name.to_ascii_lowercase();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                bail!("--otlp-headers: `{name}` is not a header name");
            }
        }
        let mut resource = match env("OTEL_RESOURCE_ATTRIBUTES") {
            Some(r) => parse_pairs(&r, "OTEL_RESOURCE_ATTRIBUTES")?,
            None => Vec::new(),
        };
        let service = self
            .service_name
            .clone()
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "wasmrpc".to_owned());
        resource.retain(|(k, _)| k != "service.name");
        resource.insert(0, ("service.name".to_owned(), service));
        let ms = |name: &str, default: u64| -> anyhow::Result<Duration> {
            match env(name) {
                None => Ok(Duration::from_millis(default)),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Duration::from_millis)
                    .with_context(|| format!("{name} is a number of milliseconds, not `{v}`")),
            }
        };
        let count = |name: &str, default: usize| -> anyhow::Result<usize> {
            match env(name) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .with_context(|| format!("{name} is a positive whole number, not `{v}`")),
            }
        };
        let timeout = match env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(_) => ms("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10_000)?,
            None => ms("OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)?,
        };
        let max_queue = count("OTEL_BSP_MAX_QUEUE_SIZE", 2048)?;
        Ok(Some(TraceSettings {
            endpoint,
            protocol,
            headers,
            resource,
            sampler: sampler(self.sampler.as_deref(), self.sampler_arg.as_deref())?,
            timeout: timeout.max(Duration::from_millis(1)),
            certificate: env("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
                .or_else(|| env("OTEL_EXPORTER_OTLP_CERTIFICATE"))
                .map(PathBuf::from),
            max_queue,
            max_batch: count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)?.min(max_queue),
            delay: ms("OTEL_BSP_SCHEDULE_DELAY", 5000)?,
        }))
    }
}

/// Without the headers' values (a collector's key) or a password in the endpoint.
impl std::fmt::Debug for TraceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("TraceSettings")
            .field("endpoint", &self.endpoint_for_display())
            .field("protocol", &self.protocol)
            .field("headers", &header_names)
            .field("resource", &self.resource)
            .field("sampler", &self.sampler)
            .field("timeout", &self.timeout)
            .field("certificate", &self.certificate)
            .field("max_queue", &self.max_queue)
            .field("max_batch", &self.max_batch)
            .field("delay", &self.delay)
            .finish()
    }
}

impl TraceSettings {
    /// The endpoint for a log line, a user and password in it (`https://user:pass@host/`)
    /// shown as `***` (`crate::redact`).
    pub fn endpoint_for_display(&self) -> String {
        crate::redact::redact_url(&self.endpoint)
    }
}

/// The traces URL of a base endpoint: `…/v1/traces` for HTTP, the base itself for gRPC.
fn signal_url(base: &str, protocol: Protocol) -> String {
    match protocol {
        Protocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
        Protocol::Grpc => base.to_owned(),
    }
}

fn check_url(url: &str) -> anyhow::Result<()> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("the OTLP endpoint `{url}` is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        _ => bail!("the OTLP endpoint `{url}` is not an http:// or https:// URL with a host"),
    }
}

/// `key=value,key2=value2`, each part percent-decoded (the W3C Baggage format the OTLP
/// variables use).
fn parse_pairs(text: &str, what: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            bail!("{what}: `{}` is not key=value", first_chars(part));
        };
        let k = percent_decode(k.trim());
        if k.is_empty() {
            bail!("{what}: a pair has no key");
        }
        pairs.push((k, percent_decode(v.trim())));
    }
    Ok(pairs)
}

/// A value's first characters, for an error message (a header's value may be a secret).
fn first_chars(s: &str) -> String {
    let head: String = s.chars().take(12).collect();
    if head.len() < s.len() {
        format!("{head}…")
    } else {
        head
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2]))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn sampler(name: Option<&str>, arg: Option<&str>) -> anyhow::Result<Sampler> {
    let ratio = || -> anyhow::Result<f64> {
        match arg.map(str::trim) {
            None => Ok(1.0),
            Some(a) => a
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .with_context(|| {
                    format!(
                        "--traces-sampler-arg (OTEL_TRACES_SAMPLER_ARG) is a ratio from 0 to 1, \
                         not `{a}`"
                    )
                }),
        }
    };
    Ok(
        match name.map(str::trim).unwrap_or("parentbased_always_on") {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::Ratio(ratio()?),
            "parentbased_always_on" => Sampler::ParentBased(Root::AlwaysOn),
            "parentbased_always_off" => Sampler::ParentBased(Root::AlwaysOff),
            "parentbased_traceidratio" => Sampler::ParentBased(Root::Ratio(ratio()?)),
            other => bail!(
                "--traces-sampler (OTEL_TRACES_SAMPLER) is one of always_on, always_off, \
             traceidratio, parentbased_always_on, parentbased_always_off, \
             parentbased_traceidratio; not `{other}`"
            ),
        },
    )
}

impl Sampler {
    /// Whether to record a trace with id `trace_id` whose caller's span, if any, was recorded
    /// (`Some(true)`) or not.
    pub fn records(&self, trace_id: &[u8; 16], parent_sampled: Option<bool>) -> bool {
        match (self, parent_sampled) {
            (Sampler::AlwaysOn, _) => true,
            (Sampler::AlwaysOff, _) => false,
            (Sampler::Ratio(r), _) => by_ratio(*r, trace_id),
            (Sampler::ParentBased(_), Some(sampled)) => sampled,
            (Sampler::ParentBased(Root::AlwaysOn), None) => true,
            (Sampler::ParentBased(Root::AlwaysOff), None) => false,
            (Sampler::ParentBased(Root::Ratio(r)), None) => by_ratio(*r, trace_id),
        }
    }
}

/// The trace's last 8 bytes as a number against the ratio's share of the range: every worker
/// that sees the trace decides the same.
fn by_ratio(ratio: f64, trace_id: &[u8; 16]) -> bool {
    let mut low = [0u8; 8];
    low.copy_from_slice(&trace_id[8..]);
    // 63 bits, so that a ratio of 1 (2^63 as a bound) takes every id.
    let x = u64::from_be_bytes(low) >> 1;
    let bound = (ratio * (1u64 << 63) as f64) as u64;
    x < bound
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(flags: &TraceFlags, vars: &[(&str, &str)]) -> anyhow::Result<Option<TraceSettings>> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        flags.resolve_with(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn off_without_an_endpoint() {
        assert_eq!(resolve(&TraceFlags::default(), &[]).unwrap(), None);
        let flags = TraceFlags {
            endpoint: Some("http://c:4318".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve(&flags, &[("OTEL_SDK_DISABLED", "true")]).unwrap(),
            None
        );
        assert_eq!(
            resolve(&flags, &[("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
    }

    #[test]
    fn the_endpoint_gets_the_signal_path_for_http_only() {
        let mut flags = TraceFlags {
            endpoint: Some("http://c:4318/".into()),
            ..Default::default()
        };
        let s = resolve(&flags, &[]).unwrap().unwrap();
        assert_eq!(s.endpoint, "http://c:4318/v1/traces");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.sampler, Sampler::ParentBased(Root::AlwaysOn));
        assert_eq!(s.resource[0], ("service.name".into(), "wasmrpc".into()));
        flags.protocol = Some("grpc".into());
        flags.endpoint = Some("http://c:4317".into());
        assert_eq!(
            resolve(&flags, &[]).unwrap().unwrap().endpoint,
            "http://c:4317"
        );
        let s = resolve(
            &flags,
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://t/x")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "https://t/x");
        flags.protocol = Some("http/json".into());
        assert!(
            resolve(&flags, &[])
                .unwrap_err()
                .to_string()
                .contains("http/json")
        );
    }

    #[test]
    fn headers_and_resource_attributes_are_percent_decoded_pairs() {
        let flags = TraceFlags {
            endpoint: Some("http://c:4318".into()),
            headers: Some("Api-Key=a%20b%3D, x=1".into()),
            ..Default::default()
        };
        let s = resolve(
            &flags,
            &[(
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=svc,deployment.environment=prod",
            )],
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            s.headers,
            vec![("api-key".into(), "a b=".into()), ("x".into(), "1".into())]
        );
        assert_eq!(s.resource[0].1, "svc");
        assert_eq!(s.resource[1].0, "deployment.environment");
        let bad = TraceFlags {
            headers: Some("secret-value-without-equals".into()),
            ..flags
        };
        let e = resolve(&bad, &[]).unwrap_err().to_string();
        assert!(!e.contains("secret-value-without-equals"), "{e}");
        assert!(
            !format!("{s:?}").contains("a b="),
            "a header's value in {s:?}"
        );
    }

    #[test]
    fn a_password_in_the_endpoint_is_not_shown() {
        let flags = TraceFlags {
            endpoint: Some("https://user:s3cret@collector.example:4318".into()),
            ..Default::default()
        };
        let s = resolve(&flags, &[]).unwrap().unwrap();
        assert_eq!(
            s.endpoint_for_display(),
            "https://***@collector.example:4318/v1/traces"
        );
        let plain = TraceFlags {
            endpoint: Some("http://c:4318".into()),
            ..Default::default()
        };
        let s = resolve(&plain, &[]).unwrap().unwrap();
        assert_eq!(s.endpoint_for_display(), "http://c:4318/v1/traces");
    }

    #[test]
    fn samplers_by_name() {
        let on = sampler(Some("traceidratio"), Some("0.25")).unwrap();
        assert_eq!(on, Sampler::Ratio(0.25));
        assert!(sampler(Some("traceidratio"), Some("2")).is_err());
        assert!(sampler(Some("sometimes"), None).is_err());
        let pb = Sampler::ParentBased(Root::AlwaysOff);
        assert!(pb.records(&[1; 16], Some(true)));
        assert!(!pb.records(&[1; 16], None));
        assert!(!Sampler::Ratio(0.0).records(&[0xff; 16], None));
        assert!(Sampler::Ratio(1.0).records(&[0xff; 16], None));
        let recorded = (0..1000u32)
            .filter(|i| {
                let mut id = [0u8; 16];
                id[8..12].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
                Sampler::Ratio(0.5).records(&id, None)
            })
            .count();
        assert!((400..600).contains(&recorded), "{recorded}");
    }
}

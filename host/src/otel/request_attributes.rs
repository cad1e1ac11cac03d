//! What a request's span says of the request: `server.address` and `server.port`,
//! `network.protocol.version`, the HTTP method, path and route (or gRPC's system, service and
//! method) and `user_agent.original`. A client sends the same host, path and agent request
//! after request, so a thread writes these in protobuf once and copies the bytes into each span
//! while the requests it answers say the same: writing them one by one for every request was a
//! third of writing a call's spans (docs/benchmarks.md, "Tracing").

use std::cell::RefCell;

use super::encode::write_attribute;
use super::span::{Span, ValueRef, key_bit};

/// What a request says that its span records.
#[derive(Debug, Clone, Copy)]
pub struct RequestAttributes<'a> {
    /// The host it was sent to, `host[:port]` (`[v6]:port`), from its URL or `Host`.
    pub host: Option<&'a str>,
    /// Its HTTP version: `1.0`, `1.1` or `2`.
    pub version: &'static str,
    /// What it asks for.
    pub target: Target<'a>,
    /// Its `User-Agent`.
    pub agent: Option<&'a str>,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A method of KServe's gRPC service.
    Grpc {
        /// The method (`ModelInfer`).
        rpc: &'a str,
    },
    /// An HTTP request.
    Http {
        /// Its method (`POST`).
        method: &'a str,
        /// Its path.
        path: &'a str,
        /// The route the router matched, if it matched one.
        route: Option<&'a str>,
    },
}

/// Every key these attributes may have, in the order they are written.
const KEYS: [&str; 10] = [
    "server.address",
    "server.port",
    "network.protocol.version",
    "rpc.system",
    "rpc.service",
    "rpc.method",
    "http.request.method",
    "url.path",
    "http.route",
    "user_agent.original",
];

/// How many texts the attributes are made from ([`RequestAttributes::texts`]).
const TEXTS: usize = 7;

impl RequestAttributes<'_> {
    /// Give `span` these attributes: copied as this thread wrote them for its last request
    /// when that one said the same, written (and kept for the next) when not.
    pub fn set_on(&self, span: &mut Span) {
        let copied = LAST.try_with(|last| {
            let mut last = last.borrow_mut();
            if !last.says(self) {
                last.write(self);
            }
            span.set_written(&last.bytes, last.bits);
        });
        if copied.is_err() {
            // The thread is ending: written for this span alone.
            let mut last = Last::default();
            last.write(self);
            span.set_written(&last.bytes, last.bits);
        }
    }

    /// Each attribute: its key's place in [`KEYS`] and its value.
    fn each(&self, out: &mut dyn FnMut(usize, ValueRef<'_>)) {
        if let Some(host) = self.host {
            let (name, port) = split_host(host);
            out(0, ValueRef::Str(name));
            if let Some(port) = port {
                out(1, ValueRef::Int(i64::from(port)));
            }
        }
        out(2, ValueRef::Str(self.version));
        match self.target {
            Target::Grpc { rpc } => {
                out(3, ValueRef::Str("grpc"));
                out(4, ValueRef::Str("inference.GRPCInferenceService"));
                out(5, ValueRef::Str(rpc));
            }
            Target::Http {
                method,
                path,
                route,
            } => {
                out(6, ValueRef::Str(method));
                out(7, ValueRef::Str(path));
                if let Some(route) = route {
                    out(8, ValueRef::Str(route));
                }
            }
        }
        if let Some(agent) = self.agent {
            out(9, ValueRef::Str(agent));
        }
    }

    /// The texts every attribute is made from: two requests whose texts are the same have the
    /// same attributes.
    fn texts(&self) -> [Option<&str>; TEXTS] {
        let (rpc, method, path, route) = match self.target {
            Target::Grpc { rpc } => (Some(rpc), None, None, None),
            Target::Http {
                method,
                path,
                route,
            } => (None, Some(method), Some(path), route),
        };
        [
            self.host,
            Some(self.version),
            rpc,
            method,
            path,
            route,
            self.agent,
        ]
    }
}

/// The attributes a thread wrote last, and the texts they were made from.
#[derive(Default)]
struct Last {
    /// The texts, one after the other.
    text: String,
    /// Where each text is in `text`, if the request had it.
    texts: [Option<(usize, usize)>; TEXTS],
    /// The attributes, as a span's field 9.
    bytes: Vec<u8>,
    /// Their keys' [`key_bit`]s.
    bits: u64,
}

thread_local! {
    static LAST: RefCell<Last> = RefCell::new(Last::default());
}

impl Last {
    /// Whether `request`'s attributes are these.
    fn says(&self, request: &RequestAttributes<'_>) -> bool {
        // Nothing written yet: no texts at all, which no request has (its version is always
        // there).
        self.texts[1].is_some()
            && request
                .texts()
                .iter()
                .zip(&self.texts)
                .all(|(new, old)| match (new, old) {
                    (None, None) => true,
                    (Some(new), Some((start, end))) => {
                        new.as_bytes() == &self.text.as_bytes()[*start..*end]
                    }
                    _ => false,
                })
    }

    /// Write `request`'s attributes, and keep its texts.
    fn write(&mut self, request: &RequestAttributes<'_>) {
        self.text.clear();
        for (place, text) in self.texts.iter_mut().zip(request.texts()) {
            *place = text.map(|t| {
                let start = self.text.len();
                self.text.push_str(t);
                (start, self.text.len())
            });
        }
        self.bytes.clear();
        self.bits = 0;
        request.each(&mut |key, value| {
            write_attribute(&mut self.bytes, 9, KEYS[key], value);
            self.bits |= key_bit(KEYS[key]);
        });
    }
}

/// `host[:port]` (or `[v6]:port`) split.
fn split_host(host: &str) -> (&str, Option<u16>) {
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (name, after.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, port.parse().ok()),
        None => (host, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    use prost::Message as _;

    #[test]
    fn hosts_and_ports() {
        assert_eq!(split_host("a.example:8080"), ("a.example", Some(8080)));
        assert_eq!(split_host("[::1]:9"), ("::1", Some(9)));
        assert_eq!(split_host("localhost"), ("localhost", None));
    }

    /// The attributes in `bytes` (a span's field 9, one after the other), as text.
    fn decoded(mut bytes: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            assert_eq!(bytes[0], 9 << 3 | 2, "field 9, length-delimited");
            let len = usize::from(bytes[1]);
            assert!(len < 128, "a short attribute");
            let kv = KeyValue::decode(&bytes[2..2 + len]).expect("a KeyValue");
            let value = match kv.value.and_then(|v| v.value) {
                Some(V::StringValue(s)) => s,
                Some(V::IntValue(i)) => i.to_string(),
                other => panic!("{other:?}"),
            };
            out.push((kv.key, value));
            bytes = &bytes[2 + len..];
        }
        out
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn http<'a>(
        host: Option<&'a str>,
        path: &'a str,
        agent: Option<&'a str>,
    ) -> RequestAttributes<'a> {
        RequestAttributes {
            host,
            version: "1.1",
            target: Target::Http {
                method: "POST",
                path,
                route: Some("/v1/methods/{name}/call"),
            },
            agent,
        }
    }

    /// What the thread's kept attributes say after `request`'s were set (its own, whether
    /// copied or written), and their keys' bits.
    fn after(request: &RequestAttributes<'_>) -> (Vec<(String, String)>, u64) {
        let mut last = LAST.with_borrow_mut(std::mem::take);
        if !last.says(request) {
            last.write(request);
        }
        let result = (decoded(&last.bytes), last.bits);
        LAST.set(last);
        result
    }

    #[test]
    fn an_http_request_says_its_host_port_method_path_route_and_agent() {
        let (attributes, bits) = after(&http(
            Some("a.example:8080"),
            "/v1/methods/add/call",
            Some("wrk"),
        ));
        assert_eq!(
            attributes,
            pairs(&[
                ("server.address", "a.example"),
                ("server.port", "8080"),
                ("network.protocol.version", "1.1"),
                ("http.request.method", "POST"),
                ("url.path", "/v1/methods/add/call"),
                ("http.route", "/v1/methods/{name}/call"),
                ("user_agent.original", "wrk"),
            ])
        );
        let written = attributes.iter().fold(0, |b, (k, _)| b | key_bit(k));
        assert_eq!(
            bits, written,
            "the keys' bits are those of the keys written"
        );
    }

    #[test]
    fn a_grpc_request_says_its_service_and_method() {
        let request = RequestAttributes {
            host: Some("[::1]:9"),
            version: "2",
            target: Target::Grpc { rpc: "ModelInfer" },
            agent: None,
        };
        let (attributes, bits) = after(&request);
        assert_eq!(
            attributes,
            pairs(&[
                ("server.address", "::1"),
                ("server.port", "9"),
                ("network.protocol.version", "2"),
                ("rpc.system", "grpc"),
                ("rpc.service", "inference.GRPCInferenceService"),
                ("rpc.method", "ModelInfer"),
            ])
        );
        let written = attributes.iter().fold(0, |b, (k, _)| b | key_bit(k));
        assert_eq!(bits, written);
    }

    /// A thread answering requests that differ in each text in turn never copies another
    /// request's attributes: each request's are what writing them afresh gives.
    #[test]
    fn requests_that_differ_in_any_text_get_their_own_attributes() {
        let requests = [
            http(Some("a:1"), "/v1/methods/add/call", Some("wrk")),
            http(Some("a:1"), "/v1/methods/add/call", Some("wrk")),
            http(Some("a:2"), "/v1/methods/add/call", Some("wrk")),
            http(Some("a:2"), "/v1/methods/mul/call", Some("wrk")),
            http(Some("a:2"), "/v1/methods/mul/call", None),
            http(None, "/v1/methods/mul/call", None),
            http(None, "/v1/methods/mul/call", Some("")),
            http(None, "/v1/methods/mul/cal", Some("l")),
            RequestAttributes {
                version: "2",
                ..http(None, "/v1/methods/mul/cal", Some("l"))
            },
            RequestAttributes {
                target: Target::Http {
                    method: "POST",
                    path: "/v1/methods/mul/cal",
                    route: None,
                },
                ..http(None, "/v1/methods/mul/cal", Some("l"))
            },
            RequestAttributes {
                target: Target::Grpc { rpc: "POST" },
                ..http(None, "/v1/methods/mul/cal", Some("l"))
            },
            http(Some("a:1"), "/v1/methods/add/call", Some("wrk")),
        ];
        for request in &requests {
            let mut fresh = Last::default();
            fresh.write(request);
            let (attributes, _) = after(request);
            assert_eq!(attributes, decoded(&fresh.bytes), "{request:?}");
        }
    }
}

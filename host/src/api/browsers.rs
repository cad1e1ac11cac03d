//! What a web browser may ask of the server: the layer in front of every route that keeps a web
//! page the user happens to visit from driving a server on their machine.
//!
//! A browser sends requests for any page it shows, to any address, including `127.0.0.1`: a
//! "simple" cross-site request (a form POST of `text/plain`, `multipart/form-data` or
//! `application/x-www-form-urlencoded`) goes out without asking the server first, and a page
//! whose name was re-pointed at `127.0.0.1` (DNS rebinding) reads the answers as its own. A
//! keyless server (loopback only, `docs/limits.md`) has nothing else between such a page and its
//! methods, so three checks run before any handler:
//!
//! - **Host**: without keys, only a loopback name (`localhost`, `*.localhost`, `127.0.0.0/8`,
//!   `[::1]`) is answered. A rebound page sends its own name, so it is refused; curl, the SDKs
//!   and tritonclient send the address they connected to. A request with no Host (HTTP/1.0)
//!   passes: browsers always send one.
//! - **Origin**: browsers name the page that made a request in `Origin`; other clients send
//!   none. A request with an `Origin` is answered only when it is the server's own (a console
//!   served from this address) or listed with `--allow-origin`; allowed cross-origin requests
//!   get CORS headers, so a listed page may call the API from script.
//! - **Content-Type** of a request that carries a body (POST, PUT, PATCH): JSON, wasm,
//!   octet-stream, url-encoded, or none. `text/plain` and `multipart/form-data` are what a form
//!   sends raw, so they are refused. url-encoded is accepted because curl's `-d` and
//!   `--data-binary` send it for the JSON and wasm bodies the docs show, and it is safe: a
//!   browser form encodes its fields, so its body cannot start with a raw `{` (a JSON object)
//!   or the `\0asm` preamble of a component, and the server reads neither form as anything else.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::Code;

use super::AppState;
use super::error::ApiError;

/// Request headers a page allowed by `--allow-origin` may send (answered to a CORS preflight).
const ALLOWED_HEADERS: &str = "authorization, content-type, x-wasmrpc-client, \
                               inference-header-content-length";

/// Methods a page allowed by `--allow-origin` may use (answered to a CORS preflight).
const ALLOWED_METHODS: &str = "GET, HEAD, POST, PUT, DELETE";

/// Response headers such a page may read.
const EXPOSED_HEADERS: &str = "x-request-id, x-wasmrpc-code, inference-header-content-length, \
                               retry-after";

/// How long a browser may keep a preflight's answer, in seconds.
const PREFLIGHT_MAX_AGE_S: &str = "600";

/// Media types a request body may be sent as (anything else, with a type given, is 415).
const BODY_TYPES: &[&str] = &[
    "application/json",
    "application/wasm",
    "application/octet-stream",
    // curl's `-d` / `--data-binary` default; see the module's comment for why it is safe.
    "application/x-www-form-urlencoded",
    // gRPC on the main port (contract.md, "gRPC"): no form can send these.
    "application/grpc",
    "application/grpc+proto",
];

/// The layer of `--metrics-listen` on a loopback address: answer only requests addressed to a
/// loopback name. `/metrics` there takes no key and names every tenant's methods, so a page
/// re-pointed at 127.0.0.1 (DNS rebinding) must not read it.
pub async fn loopback_names_only(req: Request, next: Next) -> Response {
    match authority(&req) {
        Some(host) if !is_loopback_authority(&host) => ApiError::new(
            Code::PermissionDenied,
            format!(
                "this metrics address is on loopback, so it answers only requests addressed to a \
                 loopback name (localhost, 127.0.0.1, [::1]), and this one was addressed to \
                 `{host}`"
            ),
        )
        .into_response(),
        _ => next.run(req).await,
    }
}

/// The layer: refuse what a browser page must not do, answer allowed CORS preflights, and
/// mark the answers to allowed cross-origin requests.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let keyless = state.access.directory().is_none();
    let authority = authority(&req);
    if keyless
        && let Some(host) = &authority
        && !is_loopback_authority(host)
    {
        return ApiError::new(
            Code::PermissionDenied,
            format!(
                "this server has no keys, so it answers only requests addressed to a loopback \
                 name (localhost, 127.0.0.1, [::1]), and this one was addressed to `{host}`; \
                 reach it as localhost, or configure keys with --admin-key-file FILE"
            ),
        )
        .into_response();
    }
    let cross_origin = match req.headers().get(header::ORIGIN) {
        None => None,
        Some(origin) => {
            let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
            if authority
                .as_deref()
                .is_some_and(|host| is_same_origin(&origin, host))
            {
                None
            } else if state.limits.allowed_origins.contains(&origin) {
                Some(origin)
            } else {
                return ApiError::new(
                    Code::PermissionDenied,
                    format!(
                        "requests from web pages of origin `{origin}` are refused; start the \
                         server with --allow-origin {origin} (WASMRPC_ALLOW_ORIGINS) to let \
                         that page use it"
                    ),
                )
                .into_response();
            }
        }
    };
    if let Some(origin) = &cross_origin
        && req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return preflight(origin);
    }
    if let Some(refusal) = refuse_body_type(req.method(), req.headers()) {
        return refusal.into_response();
    }
    let mut response = next.run(req).await;
    if let Some(origin) = cross_origin {
        mark_cross_origin(response.headers_mut(), &origin);
    }
    response
}

/// The name the request was addressed to: HTTP/2's `:authority`, else the `Host` header.
fn authority(req: &Request) -> Option<String> {
    if let Some(authority) = req.uri().authority() {
        return Some(authority.as_str().to_ascii_lowercase());
    }
    req.headers().get(header::HOST).map(|h| {
        String::from_utf8_lossy(h.as_bytes())
            .trim()
            .to_ascii_lowercase()
    })
}

/// Whether `authority` (`host[:port]`, lower case) names this machine's loopback: `localhost`,
/// a name under `.localhost` (which resolvers keep on loopback, RFC 6761), `127.0.0.0/8` or
/// `[::1]`.
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => {
                return v6
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|ip| ip.is_loopback());
            }
            _ => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return false,
            None => authority,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::Ipv4Addr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// A port after a host's `:`: digits only.
fn is_port(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `origin` (lower case) is a page served from the address the request went to.
fn is_same_origin(origin: &str, authority: &str) -> bool {
    ["http://", "https://"]
        .iter()
        .any(|scheme| origin.strip_prefix(scheme) == Some(authority))
}

/// A 415 for a body type a browser form can send raw, or any other the API does not read.
fn refuse_body_type(method: &Method, headers: &HeaderMap) -> Option<ApiError> {
    if ![Method::POST, Method::PUT, Method::PATCH].contains(method) {
        return None;
    }
    let content_type = headers.get(header::CONTENT_TYPE)?;
    let media_type = String::from_utf8_lossy(content_type.as_bytes())
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if BODY_TYPES.contains(&media_type.as_str()) {
        return None;
    }
    Some(ApiError::with_http(
        Code::InvalidArgument,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "a request body of type `{media_type}` is not accepted (a web form sends text/plain \
             and multipart/form-data); send application/json, application/wasm or \
             application/octet-stream, or no Content-Type"
        ),
    ))
}

/// The answer to a CORS preflight from an allowed origin.
fn preflight(origin: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    mark_cross_origin(headers, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOWED_METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(PREFLIGHT_MAX_AGE_S),
    );
    response
}

/// Let the allowed page `origin` read this answer. No credentials header: the API's
/// credential is a bearer key the page sends itself, never a cookie.
fn mark_cross_origin(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED_HEADERS),
        );
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
}

/// An `--allow-origin` value in the form it is compared in (`scheme://host[:port]`, lower case).
///
/// # Errors
/// Not of that form (a path, a trailing slash, no scheme, `*`).
pub fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim().to_ascii_lowercase();
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ', '*']) => {
            Ok(origin)
        }
        _ => Err(format!(
            "`{text}` is not an origin: give scheme://host[:port] as a browser sends it in \
             `Origin`, like https://console.example:8443 (no path, no trailing slash)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_with_any_port() {
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.:1".to_ascii_lowercase().as_str(),
            "console.localhost:9",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example:80",
            "10.0.0.1:8080",
            "[::2]:80",
            "[::1]x",
            "localhost:80:80",
            "localhost:x",
            "",
        ] {
            assert!(!is_loopback_authority(refused), "{refused}");
        }
    }

    #[test]
    fn same_origin_is_either_scheme_and_the_exact_authority() {
        assert!(is_same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(is_same_origin("https://localhost:8443", "localhost:8443"));
        assert!(!is_same_origin("http://127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!is_same_origin("null", "127.0.0.1:8080"));
    }

    #[test]
    fn form_types_are_refused_and_api_types_pass() {
        let with = |t: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(t).unwrap());
            refuse_body_type(&Method::POST, &headers).is_some()
        };
        assert!(with("text/plain"));
        assert!(with("text/plain;charset=UTF-8"));
        assert!(with("multipart/form-data; boundary=x"));
        assert!(with("text/html"));
        assert!(!with("application/json; charset=utf-8"));
        assert!(!with("Application/WASM"));
        assert!(!with("application/octet-stream"));
        assert!(!with("application/x-www-form-urlencoded"));
        assert!(!with("application/grpc"));
        assert!(refuse_body_type(&Method::POST, &HeaderMap::new()).is_none());
        let mut plain = HeaderMap::new();
        plain.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(refuse_body_type(&Method::GET, &plain).is_none());
    }

    #[test]
    fn origins_must_be_scheme_host_and_port() {
        assert_eq!(
            parse_origin("HTTPS://Console.Example:8443").unwrap(),
            "https://console.example:8443"
        );
        for bad in [
            "*",
            "console.example",
            "https://c.example/",
            "ftp://x",
            "https://",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}

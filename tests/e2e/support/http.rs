//! A plain HTTP/1.1 client over `TcpStream`, as curl would speak: one request per connection.
//!
//! Written by hand so tests can also send what a well-behaved client would not (no
//! `Content-Length`, trickled bodies, huge declared lengths).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// Requests to one server.
#[derive(Clone)]
pub struct Http {
    authority: String,
    /// Sent with every request (an `Authorization` header, say).
    headers: Vec<(String, String)>,
}

/// A response: status, headers (lower-cased names) and body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The canonical code of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.json()))
            .to_owned()
    }

    /// The value of a header (names are lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The message of an error body.
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl Http {
    /// A client for `http://host:port`.
    pub fn new(url: &str) -> Http {
        Http {
            authority: url
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
            headers: Vec::new(),
        }
    }

    /// The same client, sending `name: value` with every request.
    pub fn with_header(&self, name: &str, value: &str) -> Http {
        let mut http = self.clone();
        http.headers.push((name.to_owned(), value.to_owned()));
        http
    }

    /// The same client, sending `Authorization: Bearer <key>`.
    pub fn with_key(&self, key: &str) -> Http {
        self.with_header("Authorization", &format!("Bearer {key}"))
    }

    /// Open a raw connection (for tests that misbehave on purpose).
    pub fn connect(&self) -> TcpStream {
        self.try_connect().expect("connecting to the server")
    }

    /// As [`Http::connect`], returning the error (a server being killed refuses connections).
    pub fn try_connect(&self) -> std::io::Result<TcpStream> {
        let s = TcpStream::connect(&self.authority)?;
        s.set_read_timeout(Some(Duration::from_secs(120))).ok();
        Ok(s)
    }

    /// Send a request with an optional body (with `Content-Length`) and read the response.
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Response {
        self.try_request(method, path, body)
            .expect("HTTP request failed")
    }

    /// As [`Http::request`], returning I/O errors instead of panicking.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<Response> {
        let mut s = self.try_connect()?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.authority
        );
        if let Some(b) = body {
            head.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes())?;
        if let Some(b) = body {
            s.write_all(b)?;
        }
        read_response(&mut s)
    }

    /// GET and return (status, body).
    pub fn get_status(&self, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
        self.try_request("GET", path, None)
            .map(|r| (r.status, r.body))
    }

    /// GET.
    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, None)
    }

    /// PUT a component.
    pub fn put(&self, path: &str, body: &[u8]) -> Response {
        self.request("PUT", path, Some(body))
    }

    /// POST JSON.
    pub fn post_json(&self, path: &str, body: &Value) -> Response {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// DELETE.
    pub fn delete(&self, path: &str) -> Response {
        self.request("DELETE", path, None)
    }

    /// Call a method with JSON args and a timeout.
    pub fn call(&self, name: &str, args: Value, timeout_ms: u64) -> Response {
        self.post_json(
            &format!("/v1/methods/{name}/call"),
            &serde_json::json!({ "args": args, "timeout_ms": timeout_ms }),
        )
    }
}

/// Read a whole response from a `Connection: close` stream.
pub fn read_response(s: &mut TcpStream) -> std::io::Result<Response> {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {} bytes", raw.len())))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&data[..eol])
                .split(';')
                .next()
                .unwrap_or("0")
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

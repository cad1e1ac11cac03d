//! What a call may hold while it is in flight (issue 32): a shape of at most `MAX_RANK` (64)
//! dimensions however the tensor arrives, refused small and fast past it; and the server-wide
//! budget of call bodies and arguments in flight (`--max-bytes-in-flight`), past which calls
//! are refused at once with `Retry-After` until the bodies holding it end.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cluster::{eventually, worker};
use crate::support::http::{Response, read_response};
use crate::support::nats::Nats;
use crate::support::{Http, TestServer, outputs, register, tensor};

/// Far above what a refusal takes (milliseconds), on a busy machine and a debug build.
const FAST: Duration = Duration::from_secs(3);

/// `rank` dimensions of 1, as JSON list text (`1,1,…`, without brackets).
fn ones(rank: usize) -> String {
    vec!["1"; rank].join(",")
}

/// The ranks each form is tried with: one past the limit, 100 000, and a shape list of
/// megabytes (a million dimensions, 2 MB of text).
const RANKS: [usize; 3] = [65, 100_000, 1_000_000];

fn assert_small_invalid_argument(r: &Response, took: Duration, what: &str) {
    let body = String::from_utf8_lossy(&r.body);
    assert_eq!(r.status, 400, "{what}: {}", &body[..body.len().min(300)]);
    // v2 names the code in a header, v1 in its error body.
    let code = r
        .header("x-wasmrpc-code")
        .map_or_else(|| r.code(), str::to_owned);
    assert_eq!(code, "INVALID_ARGUMENT", "{what}");
    assert!(
        r.body.len() < 1024,
        "{what}: an answer of {} bytes: {}…",
        r.body.len(),
        &body[..300.min(body.len())]
    );
    assert!(body.contains("at most 64"), "{what}: {body}");
    assert!(took < FAST, "{what}: took {took:?}");
}

#[test]
fn a_shape_past_the_rank_limit_is_a_small_fast_invalid_argument_in_every_form() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "softmax", "example-softmax", None);
    for rank in RANKS {
        let dims = ones(rank);
        // v1 JSON.
        let body = format!(r#"{{"args":[{{"dtype":"float32","shape":[{dims}],"data":[1]}}]}}"#);
        let started = Instant::now();
        let r = http.request("POST", "/v1/methods/softmax/call", Some(body.as_bytes()));
        assert_small_invalid_argument(&r, started.elapsed(), &format!("v1, rank {rank}"));
        // v2 JSON.
        let body = format!(
            r#"{{"inputs":[{{"name":"x","datatype":"FP32","shape":[{dims}],"data":[1]}}]}}"#
        );
        let started = Instant::now();
        let r = http.request("POST", "/v2/models/softmax/infer", Some(body.as_bytes()));
        assert_small_invalid_argument(&r, started.elapsed(), &format!("v2 JSON, rank {rank}"));
        // v2 binary: the header names the rank, one float32 after it.
        let header = format!(
            r#"{{"inputs":[{{"name":"x","datatype":"FP32","shape":[{dims}],"parameters":{{"binary_data_size":4}}}}]}}"#
        );
        let mut body = header.clone().into_bytes();
        body.extend_from_slice(&1f32.to_le_bytes());
        let started = Instant::now();
        let r = http
            .with_header("Inference-Header-Content-Length", &header.len().to_string())
            .request("POST", "/v2/models/softmax/infer", Some(&body));
        assert_small_invalid_argument(&r, started.elapsed(), &format!("v2 binary, rank {rank}"));
    }
    // 64 dimensions are fine.
    let r = http.call(
        "softmax",
        json!([tensor("float32", &[1; 64], json!([1.0]))]),
        0,
    );
    assert_eq!(outputs(&r)[0]["shape"].as_array().unwrap().len(), 64);
}

/// A guest's output is held to the same limit: one of rank 65 or 100 000 is the guest's fault,
/// INTERNAL naming the method, as other malformed outputs are, and small.
#[test]
fn a_guest_output_past_the_rank_limit_is_internal_and_small() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "wide", "guest-hostile", Some("wide_output"));
    for rank in [65.0, 100_000.0] {
        let started = Instant::now();
        let r = http.call("wide", json!([tensor("float32", &[1], json!([rank]))]), 0);
        let took = started.elapsed();
        assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.code(), "INTERNAL");
        assert!(
            r.message()
                .contains("method `wide_output` returned a malformed output 0")
                && r.message().contains("at most 64"),
            "{}",
            r.message()
        );
        assert!(r.body.len() < 1024, "an answer of {} bytes", r.body.len());
        assert!(took < FAST, "rank {rank}: {took:?}");
    }
    let r = http.call("wide", json!([tensor("float32", &[1], json!([64.0]))]), 0);
    assert_eq!(outputs(&r)[0]["shape"].as_array().unwrap().len(), 64);
}

/// Two workers with softmax (any rank) registered on the first.
fn two_with_softmax(nats: &Nats) -> (TestServer, TestServer) {
    let (a, b) = (worker(nats, "a", &[]), worker(nats, "b", &[]));
    register(&a.http(), "softmax", "example-softmax", None);
    eventually(Duration::from_secs(5), "softmax on b", || {
        b.http().get("/v1/methods/softmax").status == 200
    });
    eventually(Duration::from_secs(5), "both listed", || {
        crate::cluster::names(&a).len() == 2
    });
    (a, b)
}

/// Before issue 32 a tensor of rank 256 or more panicked the inter-worker encoding on a
/// `?worker=` call (softmax takes any rank, so nothing refused it sooner).
#[test]
fn a_rank_past_the_limit_on_a_call_for_another_worker_is_invalid_argument_and_both_keep_serving() {
    let Some(nats) = Nats::start() else { return };
    let (a, _b) = two_with_softmax(&nats);
    let http = a.http();
    for rank in [65, 256, 300, 100_000] {
        let body = format!(
            r#"{{"args":[{{"dtype":"float32","shape":[{}],"data":[1]}}]}}"#,
            ones(rank)
        );
        let started = Instant::now();
        let r = http
            .try_request(
                "POST",
                "/v1/methods/softmax/call?worker=b",
                Some(body.as_bytes()),
            )
            .unwrap_or_else(|e| panic!("rank {rank}: the worker dropped the request: {e}"));
        assert_small_invalid_argument(&r, started.elapsed(), &format!("?worker=b, rank {rank}"));
    }
    // Both still serve, across the hop both ways.
    let x = json!([tensor("float32", &[2], json!([1.0, 1.0]))]);
    for (via, on) in [(&a, "b"), (&a, "a")] {
        let r = via.http().post_json(
            &format!("/v1/methods/softmax/call?worker={on}"),
            &json!({ "args": x }),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
}

/// A call whose headers are sent with `Expect: 100-continue` and a `Content-Length` of `len`,
/// and nothing of its body yet: returns once the server has said `100 Continue`, which it does
/// when the handler starts reading the body, after taking the body's bytes from the budget.
fn held_body(http: &Http, len: usize) -> TcpStream {
    let mut s = http.connect();
    let head = format!(
        "POST /v1/methods/softmax/call HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\
         Expect: 100-continue\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "closed: {seen:?}");
        seen.push(byte[0]);
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 100"), "{seen}");
    // Some of the body, so the server is reading it.
    s.write_all(b"{\"args\":[").unwrap();
    s
}

#[test]
fn bodies_past_the_bytes_budget_are_refused_fast_with_retry_after_and_the_server_recovers() {
    const MIB: usize = 1 << 20;
    // The budget is never smaller than the largest body a request may have (a KServe load of
    // the largest component, base64), so components are held to 1 MiB here too.
    let server = TestServer::start(&[
        "--max-request-bytes",
        &MIB.to_string(),
        "--max-component-bytes",
        &MIB.to_string(),
        "--max-bytes-in-flight",
        &(3 * MIB).to_string(),
    ]);
    let http = server.http();
    register(&http, "softmax", "example-softmax", None);
    // Three slow bodies of almost a MiB each hold almost all of the 3 MiB.
    let held: Vec<TcpStream> = (0..3).map(|_| held_body(&http, MIB - 10)).collect();
    let small = br#"{"args":[{"dtype":"float32","shape":[1],"data":[1]}]}"#;
    let refused = |r: &Response, what: &str| {
        assert_eq!(
            r.status,
            429,
            "{what}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.code(), "RESOURCE_EXHAUSTED", "{what}");
        assert!(
            r.message().contains("--max-bytes-in-flight"),
            "{what}: {}",
            r.message()
        );
        assert!(r.header("retry-after").is_some(), "{what}: no Retry-After");
    };
    // With a Content-Length: refused before the body is read, however little of it comes.
    let mut s = http.connect();
    let started = Instant::now();
    s.write_all(
        format!(
            "POST /v1/methods/softmax/call HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            MIB / 2
        )
        .as_bytes(),
    )
    .unwrap();
    let r = read_response(&mut s).unwrap();
    refused(&r, "a declared half MiB");
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());
    // Without one: refused as the chunks pass the budget.
    let mut s = http.connect();
    s.write_all(
        b"POST /v1/methods/softmax/call HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let chunk = vec![b' '; 64 << 10];
    let started = Instant::now();
    for _ in 0..16 {
        // The server may answer and close before every chunk is sent.
        if s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .is_err()
            || s.write_all(&chunk).is_err()
            || s.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let r = read_response(&mut s).unwrap();
    refused(&r, "a chunked body");
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());
    // A small call is refused too while the budget is full, and so is an upload.
    refused(
        &http.request("POST", "/v1/methods/softmax/call", Some(small)),
        "a small call",
    );
    let component = crate::support::guest("example-softmax");
    refused(&http.put("/v1/methods/another", &component), "an upload");
    // The slow bodies go away; their bytes come back, and calls succeed again.
    drop(held);
    eventually(Duration::from_secs(5), "a call succeeds again", || {
        http.request("POST", "/v1/methods/softmax/call", Some(small))
            .status
            == 200
    });
    assert_eq!(server.http().get("/healthz").status, 200);
}

/// With keys, one tenant may fill its queue but not the server's: it leaves an eighth to the
/// others (`--tenant-max-queued-calls` defaults to `--max-queued-calls` less an eighth). Here 2
/// slots and 8 places in the queue: a tenant's share is 1 slot and 7 places. One tenant fills
/// both; another then has a call running and one more that must wait, and finds a place.
/// (Before issue 32 a tenant's queue was the whole queue: the other's second call was refused.)
#[test]
fn with_keys_one_tenant_cannot_fill_the_whole_queue() {
    let keyed =
        crate::tenants::Keyed::start(&["--max-concurrent-calls", "2", "--max-queued-calls", "8"]);
    let hostile = crate::support::guest("guest-hostile");
    let (flood, _) = keyed.tenant("flood");
    let (quiet, _) = keyed.tenant("quiet");
    for http in [&flood, &quiet] {
        assert_eq!(
            http.put("/v1/methods/spin?export=spin", &hostile).status,
            201
        );
    }
    let spin = |http: &Http, timeout_ms: u64| {
        http.call("spin", json!([crate::support::scalar_f32(0.0)]), timeout_ms)
    };
    let (refused_tx, refused_rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        // Twelve of the flooding tenant's calls: one runs, seven wait, the rest are refused.
        for _ in 0..12 {
            let (flood, refused_tx) = (flood.clone(), refused_tx.clone());
            s.spawn(move || {
                let r = spin(&flood, 4000);
                if r.status == 429 {
                    refused_tx.send(r.message()).unwrap();
                }
            });
        }
        // Its queue is full once four have been refused (three, before issue 32).
        let mut refusals = Vec::new();
        while refusals.len() < 3 {
            refusals.push(refused_rx.recv_timeout(Duration::from_secs(10)).unwrap());
        }
        assert!(
            refusals[0].contains("max_concurrent_calls (1) reached and 7 more calls are waiting"),
            "{refusals:?}"
        );
        // The other tenant: two calls at once, 1.5 s each; one runs on the slot left to it, the
        // other must wait for it, and finds a place in the queue.
        let quiet_calls: Vec<_> = (0..2).map(|_| s.spawn(|| spin(&quiet, 1500))).collect();
        for call in quiet_calls {
            let r = call.join().unwrap();
            assert_ne!(r.status, 429, "{}", r.message());
            assert_eq!(r.code(), "DEADLINE_EXCEEDED");
        }
    });
}

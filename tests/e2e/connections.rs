//! Connections that cost the server a slot and do nothing: an HTTP/2 connection that only
//! exchanges PINGs is closed after the idle timeout (a request in progress is never idle), and
//! one peer address cannot hold more than its share of connections while another still gets
//! answers (`host/src/accept/idle.rs`, `host/src/accept/peers.rs`).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::http::read_response;
use crate::support::{TestServer, register, scalar_f32};

fn address(server: &TestServer) -> SocketAddr {
    server.url.trim_start_matches("http://").parse().unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn an_http2_connection_that_only_pings_is_closed_after_the_idle_timeout() {
    let server = TestServer::start(&["--idle-timeout-s", "1"]);
    let tcp = tokio::net::TcpStream::connect(address(&server))
        .await
        .unwrap();
    let (_client, mut connection) = h2::client::handshake(tcp).await.unwrap();
    let mut pings = connection.ping_pong().expect("the ping-pong handle");
    let started = Instant::now();
    let driver = tokio::spawn(connection);
    // The client's own PINGs, five a second, answered by the server: not activity.
    let pinging = tokio::spawn(async move {
        let mut answered = 0u32;
        while pings.ping(h2::Ping::opaque()).await.is_ok() {
            answered += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        answered
    });
    let ended = tokio::time::timeout(Duration::from_secs(15), driver)
        .await
        .expect("the server closed the idle connection within 15 s");
    let took = started.elapsed();
    let answered = pinging.await.unwrap();
    println!("idle HTTP/2 connection closed after {took:?} ({answered} PINGs answered): {ended:?}");
    assert!(
        answered >= 2,
        "PINGs were answered while it was open: {answered}"
    );
    assert!(took >= Duration::from_millis(900), "{took:?}");
    // GOAWAY then close: the connection ends without a protocol error on the client's side.
    assert!(
        ended
            .as_ref()
            .is_ok_and(|r| r.is_ok() || r.as_ref().unwrap_err().is_go_away()),
        "{ended:?}"
    );
}

#[test]
fn an_http1_keep_alive_connection_is_closed_after_the_idle_timeout_between_requests() {
    // A header timeout longer than the idle time, so that the idle timeout is what closes it.
    let server = TestServer::start(&["--idle-timeout-s", "1", "--header-timeout-s", "30"]);
    let mut s = server.http().connect();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(s.read(&mut buf).unwrap() > 0, "the first answer");
    let started = Instant::now();
    let rest = s.read(&mut buf);
    let took = started.elapsed();
    assert!(matches!(rest, Ok(0) | Err(_)), "{rest:?}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// The Rust SDK keeps one HTTP/2 connection; once the server has closed it for idleness, the
/// next call opens another, and the caller sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_calls_again_after_its_idle_connection_was_closed() {
    let server = TestServer::start(&["--idle-timeout-s", "1"]);
    register(&server.http(), "add", "example-add", Some("add"));
    let client =
        wasmrpc_client::Client::create("http", &server.url, "idle", Duration::from_secs(10))
            .await
            .unwrap();
    let one = || wasmrpc_client::Tensor::from_vec([1], vec![1i32]).unwrap();
    for _ in 0..2 {
        let out = client
            .call_async("add", vec![one(), one()], None, None)
            .await
            .unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![2]);
        // Idle past the timeout: the server closes the connection (GOAWAY) meanwhile.
        tokio::time::sleep(Duration::from_millis(2500)).await;
    }
}

#[test]
fn a_request_in_progress_is_not_idle() {
    let server = TestServer::start(&["--idle-timeout-s", "1"]);
    let http = server.http();
    register(&http, "spin", "guest-hostile", Some("spin"));
    // A call that runs 2.5 s, well past the idle timeout, on one HTTP/1.1 connection: its
    // answer comes.
    let started = Instant::now();
    let r = http.call("spin", json!([scalar_f32(0.0)]), 2500);
    assert_eq!(r.status, 504, "{}", String::from_utf8_lossy(&r.body));
    assert!(started.elapsed() >= Duration::from_millis(2500));
}

/// A connection from `local` (a loopback address of its own: a peer) to the server.
fn connect_from(local: &str, server: SocketAddr) -> TcpStream {
    let local: SocketAddr = format!("{local}:0").parse().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let stream = runtime
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(local)?;
            socket.connect(server).await?.into_std()
        })
        .unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

fn get(stream: TcpStream, path: &str) -> crate::support::http::Response {
    try_get(stream, path).unwrap()
}

/// A GET on `stream`; an error when the server closed it first (a refused connection is answered
/// 503 and closed at once, so a request written after that may meet a reset).
fn try_get(mut stream: TcpStream, path: &str) -> std::io::Result<crate::support::http::Response> {
    stream.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    read_response(&mut stream)
}

#[test]
fn one_peer_past_its_cap_is_refused_fast_while_another_is_served() {
    let server = TestServer::start(&["--max-connections-per-peer", "3"]);
    let at = address(&server);
    // Three idle connections from 127.0.0.1, held open; each is answered, so it is counted.
    let mut held: Vec<TcpStream> = Vec::new();
    for _ in 0..3 {
        let mut s = connect_from("127.0.0.1", at);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        assert!(s.read(&mut buf).unwrap() > 0);
        held.push(s);
    }
    let started = Instant::now();
    let mut fourth = connect_from("127.0.0.1", at);
    let refused = read_response(&mut fourth).unwrap();
    assert_eq!(refused.status, 503);
    assert_eq!(refused.code(), "UNAVAILABLE");
    assert!(
        refused.message().contains("--max-connections-per-peer"),
        "{}",
        refused.message()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Another peer is served meanwhile.
    let r = get(connect_from("127.0.0.2", at), "/healthz");
    assert_eq!(r.status, 200);
    // A closed connection gives its slot back.
    held.pop();
    let started = Instant::now();
    loop {
        // Until the server has seen the close, a new connection is refused (503, or a reset).
        let r = try_get(connect_from("127.0.0.1", at), "/healthz");
        if r.is_ok_and(|r| r.status == 200) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the slot never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `wasmrpc serve` started under `ulimit` lines (`-Sn` the soft limit, `-n` both): its pid, the
/// soft and hard open-file limits it runs with, and what it wrote to stderr before listening.
fn serve_under_ulimit(ulimit: &str) -> (u64, u64, String) {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{ulimit}; exec \"$0\" serve --listen 127.0.0.1:0 --data-dir \"$1\"",
        ))
        .arg(env!("CARGO_BIN_EXE_wasmrpc"))
        .arg(dir.path().join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut listening = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut listening)
        .unwrap();
    assert!(listening.contains("listening on"), "{listening}");
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let open_files: Vec<u64> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    child.kill().unwrap();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (open_files[0], open_files[1], stderr)
}

#[test]
fn the_open_file_limit_is_raised_to_the_hard_one_or_the_server_says_it_is_too_low() {
    // A soft limit of 512 under a higher hard one: raised to the hard one, silently.
    let (soft, hard, stderr) = serve_under_ulimit("ulimit -Sn 512");
    assert!(hard > 512, "this machine's hard limit is {hard}");
    assert_eq!(soft, hard, "{stderr}");
    assert!(!stderr.contains("open-file limit"), "{stderr}");
    // Both at 512, below what 10 000 connections need: said at start, naming the way out.
    let (soft, hard, stderr) = serve_under_ulimit("ulimit -n 512");
    assert_eq!((soft, hard), (512, 512));
    assert!(
        stderr.contains("open-file limit is 512") && stderr.contains("--max-connections"),
        "{stderr}"
    );
}

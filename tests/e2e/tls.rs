//! TLS: the real binary with `--tls-cert`/`--tls-key`, the client SDK's `https` layer trusting a
//! test CA, clients that cannot speak to it failing cleanly, the handshake bounded by the header
//! timeout, the CLI's `--ca-cert`, and the embedded server through the same settings.
//!
//! The CA and the server certificate (for `127.0.0.1` and `localhost`) are generated at test time.

use std::io::Read as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use wasmrpc_client::{Client, ClientBuilder, Code, Tensor, blocking};
use wasmrpc_host::ServeSettings;
use wasmrpc_host::Server;

use crate::support::{TestServer, guest};

/// A test CA and a server certificate it signed, as PEM files in a temporary directory:
/// `chain.pem` (leaf, then CA), `key.pem`, `ca.pem`. The Python SDK's tests use it too.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "wasmrpc test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();

        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "wasmrpc test server");
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = leaf.signed_by(&leaf_key, &ca).unwrap();

        let dir = tempfile::tempdir().unwrap();
        // The chain a server usually gets: leaf first, then the CA.
        std::fs::write(dir.path().join("chain.pem"), leaf.pem() + &ca.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), leaf_key.serialize_pem()).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir }
    }

    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.path("ca.pem")).unwrap()
    }

    /// `--tls-cert CHAIN --tls-key KEY`, then `extra`.
    fn serve_flags(&self, extra: &[&str]) -> Vec<String> {
        let mut flags = vec![
            "--tls-cert".to_owned(),
            self.path("chain.pem").display().to_string(),
            "--tls-key".to_owned(),
            self.path("key.pem").display().to_string(),
        ];
        flags.extend(extra.iter().map(|s| s.to_string()));
        flags
    }

    fn start(&self, extra: &[&str]) -> TestServer {
        let flags = self.serve_flags(extra);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        TestServer::start(&flags)
    }

    /// An https client builder for `address` that trusts this CA.
    fn trusting(&self, address: &str, name: &str) -> ClientBuilder {
        Client::builder("https", address)
            .name(name)
            .timeout(Duration::from_secs(30))
            .ca_cert_pem(self.ca_pem())
    }

    /// The same for the blocking client.
    fn trusting_blocking(&self, address: &str, name: &str) -> blocking::ClientBuilder {
        blocking::Client::builder("https", address)
            .name(name)
            .timeout(Duration::from_secs(30))
            .ca_cert_pem(self.ca_pem())
    }
}

/// `127.0.0.1:PORT` of a server URL.
fn host_port(url: &str) -> &str {
    url.split_once("://").map_or(url, |(_, rest)| rest)
}

fn ints(v: &[i32]) -> Tensor {
    Tensor::vector(v.to_vec())
}

async fn https_client(pki: &Pki, address: &str) -> Client {
    pki.trusting(address, "tls-test").connect().await.unwrap()
}

#[test]
fn serve_with_a_certificate_prints_an_https_address() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
}

#[tokio::test]
async fn the_async_client_over_https_trusting_the_ca_registers_and_calls_add() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let client = https_client(&pki, &server.url).await;
    assert_eq!(client.address(), server.url);
    let info = client
        .register("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    assert_eq!(info.version, 1);
    client.refresh().await.unwrap();
    let out = client
        .method("addition")
        .unwrap()
        .call_blocking(vec![ints(&[1, 2]), ints(&[10, 20])])
        .await
        .unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![11, 22]);

    // The https layer with a bare host:port reaches the same server.
    let bare = https_client(&pki, host_port(&server.url)).await;
    assert_eq!(bare.address(), server.url);
    assert_eq!(bare.list_registered_methods()[0].name, "addition");
}

#[tokio::test]
async fn many_concurrent_calls_over_https_share_one_connection() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let client = https_client(&pki, &server.url).await;
    client
        .register("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    let pending: Vec<_> = (0..300i32)
        .map(|i| client.call("addition", vec![ints(&[i]), ints(&[1000])], None, None))
        .collect();
    for (i, result) in (0..300i32).zip(&pending) {
        let value = result.get_value().await.unwrap();
        assert_eq!(value[0].to_vec::<i32>().unwrap(), vec![i + 1000]);
    }
    #[cfg(target_os = "linux")]
    {
        let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(crate::client_sdk::connections_to(port), 1);
    }
}

#[test]
fn the_blocking_client_calls_over_https_too() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let client = pki
        .trusting_blocking(&server.url, "tls-blocking")
        .connect()
        .unwrap();
    client
        .register("addition", guest("example-add"), Some("add"))
        .unwrap();
    client.refresh().unwrap();
    let out = client
        .method("addition")
        .unwrap()
        .call_blocking(vec![ints(&[2]), ints(&[3])])
        .unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![5]);
}

#[test]
fn sigterm_drains_a_call_in_flight_over_tls() {
    let pki = Pki::new();
    let mut server = pki.start(&[]);
    let client = pki
        .trusting_blocking(&server.url, "tls-drain")
        .connect()
        .unwrap();
    client
        .register("spin", guest("guest-hostile"), Some("spin"))
        .unwrap();
    // `spin` loops until its deadline; the server answers DEADLINE_EXCEEDED while draining.
    let in_flight = client.call(
        "spin",
        vec![Tensor::vector(vec![0f32; 4])],
        None,
        Some(Duration::from_millis(1000)),
    );
    std::thread::sleep(Duration::from_millis(300));
    let took = server.terminate();
    let err = in_flight.get_value().unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
    assert!(took < Duration::from_secs(10), "exit took {took:?}");
}

#[tokio::test]
async fn a_plain_http_client_against_the_tls_port_fails_cleanly_as_unavailable() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let started = Instant::now();
    let err = Client::create(
        "http",
        host_port(&server.url),
        "tls-plain",
        Duration::from_secs(20),
    )
    .await
    .unwrap_err();
    // The message depends on what arrives first, the server's TLS alert (then it suggests
    // `https`) or a broken pipe; either way it fails at once.
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
}

#[tokio::test]
async fn an_https_client_against_a_cleartext_port_fails_cleanly_as_unavailable() {
    let pki = Pki::new();
    let server = TestServer::start(&[]);
    let started = Instant::now();
    let err = pki
        .trusting(host_port(&server.url), "tls-mismatch")
        .timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.message().contains("try rpc_layer `http`"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_with_unavailable_naming_the_certificate() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let err = Client::create(
        "https",
        &server.url,
        "tls-untrusting",
        Duration::from_secs(20),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.message().contains("invalid peer certificate"), "{err}");
    assert!(err.message().contains("--ca-cert"), "{err}");

    // Trusting some other CA does not help.
    let other = Pki::new();
    let err = other
        .trusting(&server.url, "tls-other-ca")
        .timeout(Duration::from_secs(20))
        .connect()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err}");
    assert!(err.message().contains("certificate"), "{err}");
}

#[tokio::test]
async fn an_https_address_with_the_http_layer_is_invalid_argument() {
    let err = Client::create("http", "https://127.0.0.1:1", "t", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("rpc_layer `https`"), "{err}");
}

#[test]
fn a_client_that_never_starts_the_handshake_is_disconnected_after_the_header_timeout() {
    let pki = Pki::new();
    let server = pki.start(&["--header-timeout-s", "1"]);
    let mut silent = TcpStream::connect(host_port(&server.url)).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    // The server closes without a word: end of stream (or a reset).
    let read = silent.read(&mut buf);
    let took = started.elapsed();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

use crate::support::run_wasmrpc as wasmrpc;

#[test]
fn the_cli_deploys_and_lists_over_https_with_ca_cert() {
    let pki = Pki::new();
    let server = pki.start(&[]);
    let ca = pki.path("ca.pem").display().to_string();
    let wasm = pki.path("add.wasm");
    std::fs::write(&wasm, guest("example-add")).unwrap();
    let with_ca = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--server", server.url.as_str(), "--ca-cert", ca.as_str()]);
        wasmrpc(&all)
    };

    let wasm = wasm.display().to_string();
    let (ok, out, err) = with_ca(&["deploy", "addition", &wasm, "--export", "add"]);
    assert!(ok, "{err}");
    assert!(out.contains("registered addition version 1"), "{out}");
    let (ok, out, err) = with_ca(&["list"]);
    assert!(ok, "{err}");
    assert!(out.contains("addition("), "{out}");
    let (ok, out, err) = with_ca(&["call", "addition", "int32:[1,2]", "int32:[10,20]"]);
    assert!(ok, "{err}");
    assert!(out.contains("[11, 22]"), "{out}");

    // Without the CA the server's certificate is refused, and the error says what to do.
    let (ok, _, err) = wasmrpc(&["list", "--server", &server.url]);
    assert!(!ok);
    assert!(err.contains("UNAVAILABLE"), "{err}");
    assert!(err.contains("--ca-cert"), "{err}");
}

#[test]
fn the_cli_names_a_ca_certificate_it_cannot_read() {
    let missing = Path::new("/nonexistent/wasmrpc-ca.pem");
    let (ok, _, err) = wasmrpc(&[
        "list",
        "--server",
        "https://127.0.0.1:1",
        "--ca-cert",
        missing.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/wasmrpc-ca.pem"), "{err}");
}

#[test]
fn serve_refuses_a_certificate_without_its_key() {
    let pki = Pki::new();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(pki.path("data"))
        .arg("--tls-cert")
        .arg(pki.path("chain.pem"))
        .env_remove("WASMRPC_TLS_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-key"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_server_serves_tls_from_the_same_settings() {
    let pki = Pki::new();
    let store = tempfile::tempdir().unwrap();
    let settings = ServeSettings {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        data_dir: Some(store.path().to_path_buf()),
        tls_cert: Some(pki.path("chain.pem")),
        tls_key: Some(pki.path("key.pem")),
        ..ServeSettings::default()
    };
    // `store` outlives the server: the temporary directory is removed at the end of the test.
    let server = Server::with_settings(settings).await.unwrap();
    server
        .register_export("addition", guest("example-add"), Some("add"))
        .await
        .unwrap();
    server.start().unwrap();
    let address = format!("localhost:{}", server.address().port());
    let client = https_client(&pki, &address).await;
    let out = client
        .method("addition")
        .unwrap()
        .call_blocking(vec![ints(&[4]), ints(&[5])])
        .await
        .unwrap();
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![9]);
    server.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_client_that_says_nothing_after_the_handshake_is_disconnected_after_the_header_timeout() {
    use rustls::pki_types::pem::PemObject as _;
    use tokio::io::AsyncReadExt as _;

    let pki = Pki::new();
    let server = pki.start(&["--header-timeout-s", "1"]);
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pki.ca_pem()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    // As an h2 client would, whose first bytes (the preface) never come.
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let started = Instant::now();
    let tcp = tokio::net::TcpStream::connect(host_port(&server.url))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut silent = connector.connect(name, tcp).await.expect("the handshake");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(30), silent.read(&mut buf))
        .await
        .expect("the server hung up within 30 s");
    let took = started.elapsed();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

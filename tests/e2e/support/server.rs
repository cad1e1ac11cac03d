//! The real `wasmrpc` binary on a loopback port, with its own data directory.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http::Http;

/// A running server; killed when dropped.
pub struct TestServer {
    child: Child,
    /// `http://127.0.0.1:PORT` (`https://` when started with `--tls-cert`).
    pub url: String,
    /// The `--grpc-listen` address as a URL, when started with one.
    pub grpc_url: Option<String>,
    data_dir: PathBuf,
    _owned_dir: Option<tempfile::TempDir>,
    extra: Vec<String>,
}

impl TestServer {
    /// A server on a fresh data directory, with extra `serve` flags.
    pub fn start(extra: &[&str]) -> TestServer {
        TestServer::start_with_env(extra, &[])
    }

    /// A server on a fresh data directory, with extra `serve` flags and environment variables.
    pub fn start_with_env(extra: &[&str], vars: &[(&str, &str)]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let data_dir = dir.path().to_path_buf();
        let mut server = TestServer::spawn(&data_dir, extra, vars);
        server._owned_dir = Some(dir);
        server
    }

    /// A server on an existing data directory.
    pub fn start_in(data_dir: &Path, extra: &[&str]) -> TestServer {
        TestServer::spawn(data_dir, extra, &[])
    }

    fn spawn(data_dir: &Path, extra: &[&str], vars: &[(&str, &str)]) -> TestServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
            .envs(vars.iter().copied())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(&extra)
            // Quiet by default; WASMRPC_TEST_LOG=debug shows the servers' logs.
            .env(
                "WASMRPC_LOG",
                std::env::var("WASMRPC_TEST_LOG").unwrap_or_else(|_| "off".into()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting wasmrpc serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        let mut stdout = BufReader::new(stdout);
        stdout
            .read_line(&mut line)
            .expect("reading the listen line");
        let grpc_url = extra.iter().any(|a| a == "--grpc-listen").then(|| {
            let mut grpc = String::new();
            stdout
                .read_line(&mut grpc)
                .expect("reading the gRPC listen line");
            grpc.trim()
                .strip_prefix("wasmrpc gRPC listening on ")
                .unwrap_or_else(|| panic!("unexpected second line from serve: {grpc:?}"))
                .to_owned()
        });
        let url = line
            .trim()
            .strip_prefix("wasmrpc listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from serve: {line:?}"))
            .to_owned();
        let server = TestServer {
            child,
            url,
            grpc_url,
            data_dir: data_dir.to_path_buf(),
            _owned_dir: None,
            extra,
        };
        server.wait_ready();
        server
    }

    fn wait_ready(&self) {
        if self.url.starts_with("https://") {
            return self.wait_ready_over_tls();
        }
        let http = Http::new(&self.url);
        let started = Instant::now();
        loop {
            if let Ok((200, _)) = http.get_status("/readyz") {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "server at {} never became ready",
                self.url
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `wait_ready` for a TLS server (`--tls-cert`): polls `/readyz` with the client SDK's
    /// transport, trusting the certificates of the served chain (tests put their CA in it).
    fn wait_ready_over_tls(&self) {
        let cert = self
            .extra
            .iter()
            .position(|a| a == "--tls-cert")
            .and_then(|i| self.extra.get(i + 1))
            .expect("an https server started with --tls-cert PATH");
        let options = wasmrpc_client::ClientOptions::default()
            .with_ca_cert_pem(std::fs::read(cert).expect("reading --tls-cert"));
        let transport =
            wasmrpc_client::transport::Transport::with_options(&self.url, "wait-ready", &options)
                .expect("a transport to the TLS server");
        // A runtime of its own on a thread of its own: tests start servers from async tests too.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let started = Instant::now();
                while runtime
                    .block_on(transport.send(http::Method::GET, "/readyz", None))
                    .is_err()
                {
                    assert!(
                        started.elapsed() < Duration::from_secs(120),
                        "server at {} never became ready",
                        self.url
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        });
    }

    /// The server's process id (to read its CPU time or open files from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An HTTP/1.1 helper for this server.
    pub fn http(&self) -> Http {
        Http::new(&self.url)
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `kill -9` the process, and start a new one on the same data directory.
    pub fn kill9_and_restart(&mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let mut fresh = TestServer::start_in(&self.data_dir.clone(), &extra);
        // Adopt the new process; `fresh` then drops the dead one. The temp dir stays ours.
        std::mem::swap(&mut self.child, &mut fresh.child);
        std::mem::swap(&mut self.url, &mut fresh.url);
    }

    /// Send SIGTERM and wait for the process to exit; returns how long it took.
    pub fn terminate(&mut self) -> Duration {
        let started = Instant::now();
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self.child.wait();
        started.elapsed()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

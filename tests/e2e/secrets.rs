//! No secret from the environment shows in help, logs or errors: a NATS password in
//! `WASMRPC_CLUSTER` stays out of `serve --help`, and out of the log and the error of a server
//! that cannot reach its cluster, at every log level (`host/src/redact.rs`).

use std::process::Command;

use crate::support::nats::free_port;

const PASSWORD: &str = "Pa55wordOfTheCluster";

#[test]
fn serve_help_does_not_print_the_cluster_password() {
    // The issue's own example too: the help's words must not contain it either.
    for password in [PASSWORD, "PASSWORD"] {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
            .args(["serve", "--help"])
            .env(
                "WASMRPC_CLUSTER",
                format!("nats://wasmrpc:{password}@127.0.0.1:4222"),
            )
            .env("WASMRPC_CLUSTER_SECRET", format!("{password}-secret"))
            .output()
            .unwrap();
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("WASMRPC_CLUSTER"), "{help}");
        assert!(!help.contains(password), "{help}");
    }
}

#[test]
fn a_server_that_cannot_reach_its_cluster_logs_and_fails_without_the_password() {
    // A closed port: the server tries for its JetStream wait (30 s), logging each attempt, then
    // exits with an error naming the URL.
    let closed = free_port();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--name",
            "w1",
            "--data-dir",
        ])
        .arg(dir.path())
        .env(
            "WASMRPC_CLUSTER",
            format!("nats://wasmrpc:{PASSWORD}@127.0.0.1:{closed}"),
        )
        .env("WASMRPC_LOG", "debug")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("nats://***@127.0.0.1:{closed}")),
        "the error names the URL, redacted: {stderr}"
    );
    assert!(stderr.contains("NATS is not reachable yet"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(PASSWORD));
}

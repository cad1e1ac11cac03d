//! The `wasmrpc` client commands against a running server.

use std::process::Command;

use crate::support::{TestServer, guest, run_wasmrpc};

fn wasmrpc(server: &TestServer, args: &[&str]) -> (bool, String, String) {
    let mut all = args.to_vec();
    all.extend(["--server", &server.url]);
    run_wasmrpc(&all)
}

#[test]
fn deploy_list_call_and_delete_from_the_command_line() {
    let server = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("matmul.wasm");
    std::fs::write(&file, guest("example-matmul")).unwrap();

    let (ok, out, err) = wasmrpc(&server, &["deploy", "matmul", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("registered matmul version 1"), "{out}");

    let (ok, out, err) = wasmrpc(&server, &["list"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("matmul(a: float32[?, ?], b: float32[?, ?])"),
        "{out}"
    );

    let (ok, out, err) = wasmrpc(
        &server,
        &[
            "call",
            "matmul",
            "float32:[[1,2],[3,4]]",
            "float32:[[1,0],[0,1]]",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "output: float32[2, 2] [[1, 2], [3, 4]]");
    // `--json`: the outputs as a JSON list of tensors, as the README says.
    let (ok, out, err) = wasmrpc(
        &server,
        &["call", "matmul", "float32:[[1]]", "float32:[[2]]", "--json"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap(),
        serde_json::json!([{"dtype": "float32", "shape": [1, 1], "data": [2.0]}])
    );
    let readme =
        std::fs::read_to_string(crate::support::guests::workspace_root().join("README.md"))
            .unwrap();
    assert!(
        readme.contains("`--json` prints the outputs as a JSON list of tensors"),
        "README.md says what `call --json` prints"
    );

    let (ok, _, err) = wasmrpc(&server, &["call", "matmul", "int32:[1]", "int32:[1]"]);
    assert!(!ok);
    assert!(err.contains("INVALID_ARGUMENT"), "{err}");

    let (ok, out, err) = wasmrpc(&server, &["delete", "matmul"]);
    assert!(ok, "{err}");
    assert!(out.contains("deleted matmul"), "{out}");
    let (ok, _, err) = wasmrpc(&server, &["delete", "matmul"]);
    assert!(!ok);
    assert!(err.contains("NOT_FOUND"), "{err}");
}

/// A log written to a file (as under systemd or `> server.log`) is plain text: no colour codes.
#[test]
fn serve_logs_plain_text_when_stderr_is_not_a_terminal() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("server.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("WASMRPC_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // `serving` is logged right after the listen line is printed.
    let started = std::time::Instant::now();
    let mut log = String::new();
    while !log.contains("serving") && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        log = std::fs::read_to_string(&log_path).unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(line.starts_with("wasmrpc listening on "), "{line:?}");
    assert!(log.contains("INFO") && log.contains("serving"), "{log}");
    assert!(!log.contains('\x1b'), "colour codes in a log file: {log:?}");
}

#[test]
fn serve_refuses_a_non_loopback_address_without_auth() {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing"));
}

#[test]
fn the_serve_help_in_the_operations_guide_is_the_binarys() {
    let help = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    let guide = std::fs::read_to_string(
        crate::support::guests::workspace_root().join("docs/operations.md"),
    )
    .unwrap();
    let after = guide
        .split_once("`wasmrpc serve --help`:")
        .expect("docs/operations.md quotes `wasmrpc serve --help`")
        .1;
    let block = after
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("a fenced block")
        .0;
    assert_eq!(
        block.trim_end(),
        help.trim_end(),
        "docs/operations.md's `serve --help` is out of date: paste the binary's"
    );
}

/// `serve --help` says where the data goes when `--data-dir` is not given.
#[test]
fn serve_help_names_the_default_data_directory() {
    let (ok, out, err) = run_wasmrpc(&["serve", "--help"]);
    assert!(ok, "{err}");
    assert!(out.contains("~/.local/share/wasmrpc"), "{out}");
}

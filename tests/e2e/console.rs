//! The web console (`/ui`) in a real headless Chromium: pytest drives it with Selenium
//! (`tests/browser/test_console.py`) against a real server with the examples registered, and a
//! second one with keys. Screenshots of every page go to `target/console-screenshots/`.
//!
//! `tests/run.sh` prepares the browser and the venv (`tests/browser/setup.sh`: Debian's chromium
//! and chromium-driver unpacked under `target/browser`, Selenium in its venv) and sets
//! `WASMRPC_BROWSER` to the three paths it prints, with `WASMRPC_REQUIRE_BROWSER=1`; a plain
//! `cargo test` says how to run this and passes.

use std::io::Write as _;
use std::process::Command;

use crate::cluster::worker;
use crate::support::guests::{guest_path, workspace_root};
use crate::support::nats::Nats;
use crate::support::{TestServer, register};
use crate::tenants::Keyed;

/// The methods the keyless server lists: the examples' exports, each under its own name.
const METHODS: &[(&str, &str, &str)] = &[
    ("add", "example-add", "add"),
    ("add_float32", "example-add", "add_float32"),
    ("add_bool", "example-add", "add_bool"),
    ("matmul", "example-matmul", "matmul"),
    ("softmax", "example-softmax", "softmax"),
    ("upper", "example-strings", "upper"),
    ("length", "example-strings", "length"),
    ("transpose", "example-linalg", "transpose"),
];

/// `python chromium chromedriver`, from `WASMRPC_BROWSER`; `None` when not set and not required.
fn browser() -> Option<Vec<String>> {
    if let Ok(paths) = std::env::var("WASMRPC_BROWSER") {
        let paths: Vec<String> = paths.split_whitespace().map(str::to_owned).collect();
        assert_eq!(
            paths.len(),
            3,
            "WASMRPC_BROWSER is `python chromium chromedriver`"
        );
        return Some(paths);
    }
    assert_ne!(
        std::env::var("WASMRPC_REQUIRE_BROWSER").as_deref(),
        Ok("1"),
        "WASMRPC_REQUIRE_BROWSER=1 but WASMRPC_BROWSER is not set: `bash tests/browser/setup.sh` \
         prints the three paths it takes"
    );
    let _ = writeln!(
        std::io::stderr(),
        "console: not run, WASMRPC_BROWSER is not set; `bash tests/run.sh` prepares the browser \
         (`bash tests/browser/setup.sh`) and runs it"
    );
    None
}

#[test]
fn the_console_lists_calls_uploads_and_charts_in_a_real_browser() {
    let Some(paths) = browser() else { return };
    let root = workspace_root();
    let server = TestServer::start(&[]);
    let http = server.http();
    for (name, package, export) in METHODS {
        register(&http, name, package, Some(export));
    }
    let keyed = Keyed::start(&[]);
    let (tenant, answer) = keyed.tenant("team-a");
    register(&tenant, "tenant_add", "example-add", Some("add"));
    let tenant_key = answer["key"].as_str().expect("a key");
    let admin_key = std::fs::read_to_string(keyed.admin_key_file()).expect("the admin key");
    // Two workers of a cluster, when a nats-server is at hand (tests/run.sh requires one).
    let nats = Nats::start();
    let workers: Vec<TestServer> = nats
        .iter()
        .flat_map(|nats| {
            [
                worker(nats, "w-zero", &["--rank", "0"]),
                worker(nats, "w-one", &["--rank", "1"]),
            ]
        })
        .collect();

    let ld_path = std::fs::read_to_string(root.join("target/browser/root/ld-path"))
        .expect("tests/browser/setup.sh wrote target/browser/root/ld-path")
        .lines()
        .collect::<Vec<_>>()
        .join(":");
    let screenshots = root.join("target/console-screenshots");
    std::fs::create_dir_all(&screenshots).expect("the screenshots folder");
    let extra = std::env::var("WASMRPC_PYTEST_ARGS").unwrap_or_default();
    let status = Command::new(&paths[0])
        .current_dir(&root)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/browser",
        ])
        .args(extra.split_whitespace())
        .env("WASMRPC_URL", &server.url)
        .env("WASMRPC_KEYED_URL", &keyed.server.url)
        .env("WASMRPC_TENANT_KEY", tenant_key)
        .env("WASMRPC_ADMIN_KEY", admin_key.trim())
        .env("WASMRPC_UPLOAD_WASM", guest_path("example-add"))
        .env(
            "WASMRPC_CLUSTER_URL",
            workers.get(1).map_or("", |w| w.url.as_str()),
        )
        .env("WASMRPC_CHROMIUM", &paths[1])
        .env("WASMRPC_CHROMEDRIVER", &paths[2])
        .env("WASMRPC_BROWSER_LD_PATH", ld_path)
        .env("WASMRPC_SCREENSHOTS", &screenshots)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", paths[0]));
    assert!(
        status.success(),
        "pytest tests/browser failed ({status}); its report is above, screenshots in {}",
        screenshots.display()
    );
}

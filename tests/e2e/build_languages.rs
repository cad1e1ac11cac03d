//! `wasmrpc build` of Python, JavaScript and TypeScript sources, from a directory outside the
//! repository (the binary carries the WIT and the SDKs), with the real toolchains installed into
//! `target/toolchains` on first use; and `wasmrpc deploy NAME app.py`, which builds and uploads.
//! Each build takes seconds, so the three sources are built once, together, and shared.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::json;

use crate::support::guests::workspace_root;
use crate::support::{TestServer, component, outputs, tensor};

/// The toolchain cache every build here shares.
fn toolchains() -> PathBuf {
    workspace_root().join("target/toolchains")
}

/// `wasmrpc ARGS` run in `dir` with the shared toolchains: (success, stdout, stderr).
fn wasmrpc_in(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(args)
        .current_dir(dir)
        .env("WASMRPC_TOOLCHAINS", toolchains())
        .env_remove("WASMRPC_SERVER")
        .env_remove("WASMRPC_KEY")
        .env_remove("WASMRPC_CA_CERT")
        .output()
        .expect("running wasmrpc");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Two methods in one Python file.
const APP_PY: &str = r#"from wasmrpc_guest import Tensor, function


@function
def add(a: Tensor["float32"], b: Tensor["float32"]) -> Tensor["float32"]:
    """Adds two float32 tensors element by element."""
    return Tensor([x + y for x, y in zip(a.flat(), b.flat())], shape=a.shape)


@function
def double(x: Tensor["int32"]) -> Tensor["int32"]:
    """Doubles every element."""
    return Tensor([2 * v for v in x.flat()], shape=x.shape)
"#;

/// The same two methods in JavaScript; the TypeScript file adds types to them.
const APP_JS: &str = r#"import { fn, exportMethods } from "@wasmrpc/guest";

export const method = exportMethods({
  add: fn(
    { args: { a: ["float32", [-1]], b: ["float32", [-1]] }, returns: ["float32", [-1]] },
    (a, b) => ({ data: a.data.map((v, i) => v + b.data[i]), shape: a.shape }),
  ),
  double: fn(
    { args: { x: ["int32", [-1]] }, returns: ["int32", [-1]] },
    (x) => ({ data: x.data.map((v) => 2 * v), shape: x.shape }),
  ),
});
"#;

const APP_TS: &str = r#"import { fn, exportMethods } from "@wasmrpc/guest";

const twice = (v: number): number => 2 * v;

export const method = exportMethods({
  add: fn(
    { args: { a: ["float32", [-1]], b: ["float32", [-1]] }, returns: ["float32", [-1]] },
    (a, b) => ({ data: a.data.map((v: number, i: number) => v + b.data[i]), shape: a.shape }),
  ),
  double: fn(
    { args: { x: ["int32", [-1]] }, returns: ["int32", [-1]] },
    (x) => ({ data: x.data.map(twice), shape: x.shape }),
  ),
});
"#;

/// What a build printed, and where.
struct Built {
    stdout: String,
    stderr: String,
    component: PathBuf,
}

struct Project {
    dir: tempfile::TempDir,
    python: Built,
    javascript: Built,
    typescript: Built,
}

/// The three sources, written into one temporary directory and built there (in parallel: each
/// toolchain is mostly one thread).
fn project() -> &'static Project {
    static PROJECT: OnceLock<Project> = OnceLock::new();
    PROJECT.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(!dir.path().starts_with(workspace_root()));
        std::fs::write(dir.path().join("app.py"), APP_PY).unwrap();
        std::fs::write(dir.path().join("app.js"), APP_JS).unwrap();
        std::fs::write(dir.path().join("typed.ts"), APP_TS).unwrap();
        let path = dir.path().to_path_buf();
        let build = |args: &'static [&'static str]| {
            let path = path.clone();
            std::thread::spawn(move || {
                let (ok, stdout, stderr) = wasmrpc_in(&path, args);
                assert!(ok, "wasmrpc {args:?} failed:\n{stderr}");
                let component = PathBuf::from(stdout.trim());
                Built {
                    stdout,
                    stderr,
                    component,
                }
            })
        };
        // JavaScript first: its install and build are the longest.
        let js = build(&["build", "app.js", "-o", "out/js.wasm"]);
        let ts = build(&["build", "typed.ts"]);
        let py = build(&["build", "app.py"]);
        Project {
            python: py.join().expect("python build"),
            javascript: js.join().expect("js build"),
            typescript: ts.join().expect("ts build"),
            dir,
        }
    })
}

fn assert_is_a_tensor_function(built: &Built) {
    let bytes = std::fs::read(&built.component).expect("the printed path is the component");
    let names = component::exports(&bytes);
    assert!(
        names.iter().any(|n| n == "wasmrpc:tensor/method@0.1.0"),
        "{names:?}"
    );
    assert!(built.stderr.contains("Finished"), "{}", built.stderr);
}

#[test]
fn a_python_file_builds_into_a_component_beside_it() {
    let project = project();
    let built = &project.python;
    assert_eq!(built.component, project.dir.path().join("app.wasm"));
    assert!(
        built
            .stderr
            .contains("Building app.py with componentize-py 0.25.1"),
        "{}",
        built.stderr
    );
    assert_is_a_tensor_function(built);
}

#[test]
fn a_javascript_file_builds_into_the_component_o_names() {
    let project = project();
    let built = &project.javascript;
    assert_eq!(built.stdout.trim(), "out/js.wasm");
    assert!(
        built.stderr.contains("Bundling app.js with esbuild"),
        "{}",
        built.stderr
    );
    let component = project.dir.path().join(&built.component);
    assert_is_a_tensor_function(&Built {
        component,
        stdout: String::new(),
        stderr: built.stderr.clone(),
    });
}

#[test]
fn a_typescript_file_builds_into_a_component_beside_it() {
    let project = project();
    assert_eq!(
        project.typescript.component,
        project.dir.path().join("typed.wasm")
    );
    assert_is_a_tensor_function(&project.typescript);
}

#[test]
fn a_second_build_reuses_the_toolchain_without_installing() {
    let project = project();
    let (ok, _, stderr) = wasmrpc_in(project.dir.path(), &["build", "app.js", "-o", "again.wasm"]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Installing"), "{stderr}");
}

#[test]
fn a_python_syntax_error_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.py"),
        "from wasmrpc_guest import function\n\n\ndef f(x:\n    return x\n",
    )
    .unwrap();
    let (ok, stdout, stderr) = wasmrpc_in(dir.path(), &["build", "bad.py"]);
    assert!(!ok);
    assert!(stdout.is_empty(), "{stdout}");
    let bad = dir.path().join("bad.py");
    assert!(
        stderr.contains(&format!("\"{}\", line 4", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("SyntaxError"), "{stderr}");
    assert!(!stderr.contains("sys.exit(script())"), "{stderr}");
    assert!(!dir.path().join("bad.wasm").exists());
}

#[test]
fn a_python_file_without_functions_is_told_to_decorate_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain.py"), "def f(x):\n    return x\n").unwrap();
    let (ok, _, stderr) = wasmrpc_in(dir.path(), &["build", "plain.py"]);
    assert!(!ok);
    assert!(
        stderr.contains("plain.py defines no functions to export"),
        "{stderr}"
    );
}

#[test]
fn a_javascript_syntax_error_names_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.js"), "export const method = ;\n").unwrap();
    let (ok, _, stderr) = wasmrpc_in(dir.path(), &["build", "bad.js"]);
    assert!(!ok);
    assert!(stderr.contains("bad.js:1:22"), "{stderr}");
}

#[test]
fn an_unknown_extension_lists_the_accepted_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.rb"), "puts 1\n").unwrap();
    let (ok, _, stderr) = wasmrpc_in(dir.path(), &["build", "app.rb"]);
    assert!(!ok);
    assert!(stderr.contains("app.rb"), "{stderr}");
    assert!(stderr.contains(".py, .js, .mjs or .ts"), "{stderr}");
    assert!(!dir.path().join(".wasmrpc").exists(), "nothing installed");
}

/// Upload and call what the toolchains built: a Python file through `deploy NAME app.py` (which
/// builds it, in a directory of its own, reusing the toolchain), then its component by path, and
/// the JavaScript and TypeScript components as built. Needs the server's WASI 0.2 world.
#[test]
fn deployed_sources_answer_every_method_they_define() {
    let project = project();
    // An 18 MiB Python component takes 16 to 27 s to compile here, more on a loaded machine.
    let server = TestServer::start(&["--compile-timeout-s", "300"]);
    let http = server.http();
    let own = tempfile::tempdir().unwrap();
    std::fs::write(own.path().join("app.py"), APP_PY).unwrap();
    let js = project.dir.path().join(&project.javascript.component);
    let ts = project.typescript.component.clone();
    let uploads = [
        (
            "py",
            [own.path().join("app.py"), own.path().join("app.wasm")],
        ),
        ("js", [js.clone(), js]),
        ("ts", [ts.clone(), ts]),
    ];
    for (lang, files) in &uploads {
        for (export, file) in ["add", "double"].into_iter().zip(files) {
            let name = format!("{lang}-{export}");
            let file = file.to_str().unwrap();
            let (ok, stdout, stderr) = wasmrpc_in(
                own.path(),
                &[
                    "deploy",
                    &name,
                    file,
                    "--export",
                    export,
                    "--server",
                    &server.url,
                    "--timeout-s",
                    "300",
                ],
            );
            assert!(ok, "deploy {name} {file}: {stderr}");
            assert!(stdout.contains(&format!("registered {name}")), "{stdout}");
        }
        let sum = http.call(
            &format!("{lang}-add"),
            json!([
                tensor("float32", &[3], json!([1.0, 2.0, 3.5])),
                tensor("float32", &[3], json!([10.0, 20.0, 30.0]))
            ]),
            0,
        );
        assert_eq!(
            outputs(&sum)[0]["data"],
            json!([11.0, 22.0, 33.5]),
            "{lang}"
        );
        let doubled = http.call(
            &format!("{lang}-double"),
            json!([tensor("int32", &[2], json!([4, -7]))]),
            0,
        );
        assert_eq!(outputs(&doubled)[0]["data"], json!([8, -14]), "{lang}");
    }
}

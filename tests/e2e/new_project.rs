//! `wasmrpc new` in each language, from a directory outside the repository, followed exactly as
//! its README says: every command of the README's `sh` block is run as written (so the README
//! cannot drift from what works), with `wasmrpc` on the PATH and a real server: the function is
//! built with the real toolchains, deployed, called, and its own test passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::TestServer;
use crate::support::guests::workspace_root;

/// The commands of the first ```sh block of `readme`, comments dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README has a ```sh block");
    block
        .lines()
        .map(|line| line.split(" # ").next().unwrap().trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// Make the project, then run its README's commands in it; returns each command's stdout.
fn follow_the_readme(lang: &str, name: &str) -> Vec<(String, String)> {
    let server = TestServer::start(&[]);
    let parent = tempfile::tempdir().expect("a directory outside the repository");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_wasmrpc"));
    let path = std::env::join_paths(std::iter::once(bin.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let run = |dir: &Path, command: &str| {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir)
            .env("PATH", &path)
            .env("WASMRPC_SERVER", &server.url)
            .env_remove("WASMRPC_KEY")
            // The toolchains and Rust builds every run shares: a first build installs or
            // compiles, later ones reuse (the README's own defaults are `.wasmrpc/` and
            // `target/` in the project).
            .env(
                "WASMRPC_TOOLCHAINS",
                workspace_root().join("target/toolchains"),
            )
            .env(
                "CARGO_TARGET_DIR",
                workspace_root().join("target/new-projects"),
            )
            .output()
            .unwrap_or_else(|e| panic!("running `{command}`: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "`{command}` failed in {}:\n{stdout}\n{stderr}",
            dir.display()
        );
        stdout + &stderr
    };
    let said = run(parent.path(), &format!("wasmrpc new {name} --lang {lang}"));
    assert!(said.contains(&format!("\n  cd {name}\n")), "{said}");
    let project = parent.path().join(name);
    let readme = std::fs::read_to_string(project.join("README.md")).expect("a README");
    let commands = readme_commands(&readme);
    assert_eq!(commands.len(), 3, "three commands: {commands:?}");
    commands
        .into_iter()
        .map(|command| {
            let out = run(&project, &command);
            (command, out)
        })
        .collect()
}

fn check(lang: &str, name: &str, test_says: &str) {
    let ran = follow_the_readme(lang, name);
    let (deploy, call, test) = (&ran[0], &ran[1], &ran[2]);
    assert!(
        deploy.0.starts_with(&format!("wasmrpc deploy {name} ")),
        "{}",
        deploy.0
    );
    assert!(
        deploy.1.contains(&format!("registered {name} version 1")),
        "{}",
        deploy.1
    );
    assert!(
        deploy.1.contains(&format!(
            "{name}(x: float32, factor: float32[]) -> (output: float32)"
        )),
        "{}",
        deploy.1
    );
    assert!(
        call.0.starts_with(&format!("wasmrpc call {name} ")),
        "{}",
        call.0
    );
    assert!(
        call.1.contains("output: float32[3] [2.5, 5, 7.5]"),
        "{}",
        call.1
    );
    assert!(test.1.contains(test_says), "`{}` said:\n{}", test.0, test.1);
}

#[test]
fn a_new_rust_function_builds_deploys_answers_and_passes_its_test_as_its_readme_says() {
    check(
        "rust",
        "scale-rs",
        "test tests::scales_every_element ... ok",
    );
}

#[test]
fn a_new_python_function_builds_deploys_answers_and_passes_its_test_as_its_readme_says() {
    check("python", "scale-py", "OK");
}

#[test]
fn a_new_javascript_function_builds_deploys_answers_and_passes_its_test_as_its_readme_says() {
    check("js", "scale-js", "# pass 1");
}

#[test]
fn a_new_project_refuses_a_bad_name_and_an_existing_directory() {
    let parent = tempfile::tempdir().unwrap();
    let wasmrpc = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
            .args(args)
            .current_dir(parent.path())
            .output()
            .unwrap()
    };
    let bad = wasmrpc(&["new", "2fast"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot name a project"));
    std::fs::create_dir(parent.path().join("taken")).unwrap();
    std::fs::write(parent.path().join("taken/keep.txt"), "mine").unwrap();
    let taken = wasmrpc(&["new", "taken", "--lang", "python"]);
    assert!(!taken.status.success());
    assert!(String::from_utf8_lossy(&taken.stderr).contains("exists already"));
    assert_eq!(
        std::fs::read_to_string(parent.path().join("taken/keep.txt")).unwrap(),
        "mine",
        "nothing of the existing directory is touched"
    );
    let help = wasmrpc(&["new", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--lang") && help.contains("python") && help.contains("js"),
        "{help}"
    );
}

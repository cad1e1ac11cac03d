//! `wasmrpc new NAME [--lang rust|python|js]`: a project that builds with `wasmrpc build` and
//! deploys with `wasmrpc deploy` as it stands, anywhere: one documented example function
//! (`scale`) with its test, the manifest, the guest build profile, a README of three commands and
//! a `.gitignore`. The templates are `host/templates/`, carried in the binary.
//!
//! A Rust project gets the guest SDK vendored under `wasmrpc/` (the SDK is not on crates.io, and
//! a git dependency would need the network and a public address): the SDK's sources in this
//! repository's layout, and manifests made from the SDK's own with the workspace's inherited
//! settings written in. A Python project gets the Python SDK under `wasmrpc/python` for its
//! tests (the build bundles the copy inside `wasmrpc`); a JavaScript one needs nothing, as
//! `@wasmrpc/guest` is resolved by the build and the test imports only the function.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::build::status;
use super::embedded::{self, File};

/// The languages a project can be made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate (`cargo test`; built for `wasm32-unknown-unknown`).
    Rust,
    /// `app.py` (componentize-py).
    Python,
    /// `app.js` (esbuild and componentize-js).
    Js,
}

macro_rules! templates {
    ($lang:literal: $($path:literal => $written:literal),* $(,)?) => {
        &[$(($written, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/", $lang, "/", $path)))),*]
    };
}

/// Each language's files: where they are written, and their text with `{{name}}`, `{{crate}}` and
/// `{{version}}` to fill in. (`.gitignore` is kept as `gitignore` in the repository, where a file
/// of that name would apply to the templates themselves.)
const RUST: &[File] = templates!("rust":
    "Cargo.toml" => "Cargo.toml",
    "src/lib.rs" => "src/lib.rs",
    "README.md" => "README.md",
    "gitignore" => ".gitignore",
);
const PYTHON: &[File] = templates!("python":
    "app.py" => "app.py",
    "test_app.py" => "test_app.py",
    "pyproject.toml" => "pyproject.toml",
    "README.md" => "README.md",
    "gitignore" => ".gitignore",
);
const JS: &[File] = templates!("js":
    "app.js" => "app.js",
    "scale.js" => "scale.js",
    "scale.test.js" => "scale.test.js",
    "package.json" => "package.json",
    "README.md" => "README.md",
    "gitignore" => ".gitignore",
);

/// Make the project `name` in `parent/name`; prints what to do next.
///
/// # Errors
/// A name that is not a valid project and method name, a directory that exists, or a file that
/// cannot be written (what was written is removed again).
pub fn run(name: &str, lang: Lang, parent: &Path) -> anyhow::Result<()> {
    check_name(name)?;
    // `cd scale`, not `cd ./scale`, when made here.
    let dir = if parent == Path::new(".") {
        PathBuf::from(name)
    } else {
        parent.join(name)
    };
    if dir.exists() {
        bail!(
            "{} exists already: pick another name, or remove it first",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Err(e) = write_project(&dir, name, lang) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let (what, deploy, test) = match lang {
        Lang::Rust => ("Rust", ".", "cargo test"),
        Lang::Python => ("Python", "app.py", "python3 -m unittest"),
        Lang::Js => ("JavaScript", "app.js", "node --test"),
    };
    status(
        "Created",
        &format!("{what} function project `{name}` in {}", dir.display()),
    );
    println!("Next, with a server running (`wasmrpc serve`):");
    println!("  cd {}", shell_word(&dir));
    println!("  wasmrpc deploy {name} {deploy}");
    println!("  wasmrpc call {name} 'float32:[1,2,3]' 'float32:2.5'");
    println!("  {test}");
    Ok(())
}

/// Write every file of the project into `dir` (which exists, empty).
fn write_project(dir: &Path, name: &str, lang: Lang) -> anyhow::Result<()> {
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{version}}", env!("CARGO_PKG_VERSION"))
    };
    let templates = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    for (path, text) in templates {
        write(&dir.join(path), &fill(text))?;
    }
    match lang {
        Lang::Rust => {
            let vendored = dir.join("wasmrpc");
            embedded::write_all(&vendored, embedded::RUST_SDK)?;
            let (sdk, macros) = standalone_manifests()?;
            write(&vendored.join("guest-sdk/Cargo.toml"), &sdk)?;
            write(&vendored.join("guest-sdk/macro/Cargo.toml"), &macros)?;
        }
        Lang::Python => embedded::write_all(&dir.join("wasmrpc/python"), embedded::PYTHON_SDK)?,
        Lang::Js => {}
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A project name: a method name (the README deploys under it) that is also a package name in
/// cargo, npm and Python: a letter, then letters, digits, `_` and `-`, at most 64.
fn check_name(name: &str) -> anyhow::Result<()> {
    let valid = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        bail!(
            "`{name}` cannot name a project: use a letter, then letters, digits, `_` and `-` \
             (at most 64), as in `scale` or `my-function`"
        );
    }
    Ok(())
}

/// `dir` as one word a shell reads back (quoted when it needs to be).
fn shell_word(dir: &Path) -> String {
    let text = dir.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+~".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// The vendored SDK's manifests (`guest-sdk/Cargo.toml`, `guest-sdk/macro/Cargo.toml`): this
/// repository's, with every setting inherited from the workspace written in, the macro crate as
/// a path dependency beside it, and nothing for this repository only (lints, dev-dependencies).
fn standalone_manifests() -> anyhow::Result<(String, String)> {
    let workspace: toml::Table = embedded::WORKSPACE_MANIFEST
        .parse()
        .context("reading the workspace manifest")?;
    let section = |name: &str| -> anyhow::Result<toml::Table> {
        workspace
            .get("workspace")
            .and_then(|w| w.get(name))
            .and_then(toml::Value::as_table)
            .cloned()
            .with_context(|| format!("the workspace manifest has no [workspace.{name}]"))
    };
    let package = section("package")?;
    let dependencies = section("dependencies")?;
    let own_paths = [("wasmrpc-guest-macro", "macro")];
    let make = |text: &str| -> anyhow::Result<String> {
        let mut manifest: toml::Table = text.parse().context("reading an SDK manifest")?;
        manifest.remove("lints");
        manifest.remove("dev-dependencies");
        if let Some(toml::Value::Table(own)) = manifest.get_mut("package") {
            for (key, value) in own.iter_mut() {
                if is_inherited(value) {
                    *value = package
                        .get(key)
                        .cloned()
                        .with_context(|| format!("[workspace.package] has no `{key}`"))?;
                }
            }
            own.insert("publish".into(), toml::Value::Boolean(false));
        }
        if let Some(toml::Value::Table(deps)) = manifest.get_mut("dependencies") {
            for (key, value) in deps.iter_mut() {
                if let Some((_, path)) = own_paths.iter().find(|(name, _)| name == key) {
                    let mut table = toml::Table::new();
                    table.insert("path".into(), toml::Value::String((*path).into()));
                    *value = toml::Value::Table(table);
                } else if is_inherited(value) {
                    *value = dependencies
                        .get(key)
                        .cloned()
                        .with_context(|| format!("[workspace.dependencies] has no `{key}`"))?;
                }
            }
        }
        Ok(format!(
            "# Vendored by `wasmrpc new` (wasmrpc {}) from the wasmrpc repository.\n{}",
            env!("CARGO_PKG_VERSION"),
            toml::to_string(&manifest).context("writing an SDK manifest")?
        ))
    };
    Ok((
        make(embedded::RUST_SDK_MANIFEST)?,
        make(embedded::RUST_MACRO_MANIFEST)?,
    ))
}

/// `key.workspace = true`.
fn is_inherited(value: &toml::Value) -> bool {
    value
        .as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(toml::Value::as_bool)
        == Some(true)
}

/// Where `wasmrpc new` puts the project when no `--dir` is given.
pub fn default_parent() -> PathBuf {
    PathBuf::from(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_anything_is_written() {
        for good in ["scale", "my-function", "f_2"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "2fast",
            "-x",
            "a.b",
            "a/b",
            "../x",
            "ä",
            &"x".repeat(65),
        ] {
            let e = check_name(bad).unwrap_err().to_string();
            assert!(e.contains("cannot name a project"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_vendored_manifests_inherit_nothing_and_point_at_each_other() {
        let (sdk, macros) = standalone_manifests().unwrap();
        for manifest in [&sdk, &macros] {
            assert!(!manifest.contains("workspace"), "{manifest}");
            assert!(!manifest.contains("lints"), "{manifest}");
            let parsed: toml::Table = manifest.parse().unwrap();
            assert_eq!(parsed["package"]["edition"].as_str(), Some("2024"));
            assert_eq!(parsed["package"]["publish"].as_bool(), Some(false));
        }
        let sdk: toml::Table = sdk.parse().unwrap();
        assert_eq!(
            sdk["dependencies"]["wasmrpc-guest-macro"]["path"].as_str(),
            Some("macro")
        );
        assert!(sdk["dependencies"]["wit-bindgen"]["version"].is_str());
        let macros: toml::Table = macros.parse().unwrap();
        assert!(macros["lib"]["proc-macro"].as_bool().unwrap());
        assert!(macros.get("dev-dependencies").is_none());
    }

    #[test]
    fn a_project_is_written_whole_and_an_existing_directory_is_left_alone() {
        let parent = tempfile::tempdir().unwrap();
        for (lang, files) in [(Lang::Rust, RUST), (Lang::Python, PYTHON), (Lang::Js, JS)] {
            let name = format!("p-{lang:?}").to_lowercase();
            run(&name, lang, parent.path()).unwrap();
            for (path, _) in files {
                let text = std::fs::read_to_string(parent.path().join(&name).join(path)).unwrap();
                assert!(!text.contains("{{"), "{path} still has a placeholder");
            }
            let again = run(&name, lang, parent.path()).unwrap_err().to_string();
            assert!(again.contains("exists already"), "{again}");
        }
        assert!(
            parent
                .path()
                .join("p-rust/wasmrpc/proto/src/names.rs")
                .is_file()
        );
        assert!(
            parent
                .path()
                .join("p-python/wasmrpc/python/wasmrpc_guest/__init__.py")
                .is_file()
        );
    }
}

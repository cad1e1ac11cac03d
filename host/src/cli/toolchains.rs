//! The Python and JavaScript toolchains a source build runs, found or installed into one
//! project-local directory (never globally): `.wasmrpc/` beside the source unless `--toolchains`
//! or `WASMRPC_TOOLCHAINS` names another. Versions are pinned here; a stamp records what was
//! installed, so a version bump reinstalls and an unchanged one touches nothing, network included.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use super::build::status;

/// componentize-py, from PyPI: turns `app.py` into a component.
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// componentize-js (StarlingMonkey), from npm: turns one ESM file into a component.
pub const COMPONENTIZE_JS: &str = "0.23.0";
/// esbuild, from npm: bundles the user's file with the SDK into that one ESM file, stripping
/// TypeScript's types on the way.
pub const ESBUILD: &str = "0.28.2";

/// The stamp file's name inside each toolchain's directory.
const STAMP: &str = "wasmrpc-toolchain.stamp";

/// The directory toolchains live in for a source in `project`.
pub fn dir(project: &Path, given: Option<&Path>) -> PathBuf {
    match given {
        Some(dir) => dir.to_path_buf(),
        None => project.join(".wasmrpc"),
    }
}

/// What is installed, per the stamp, and whether it is what `wanted` says.
fn up_to_date(dir: &Path, wanted: &str) -> bool {
    std::fs::read_to_string(dir.join(STAMP)).is_ok_and(|s| s == wanted)
}

/// Holds `root/NAME.lock` while one build checks or installs a toolchain, so that two builds
/// sharing a directory (tests, CI) do not install into it at once.
fn lock(root: &Path, name: &str) -> anyhow::Result<File> {
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let path = root.join(format!("{name}.lock"));
    let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// Run an installer step with its output captured; on failure, show what it said.
fn run_quietly(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{what}: could not start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The componentize-py executable in `root/python`, a venv made with `python3` (or
/// `WASMRPC_BUILD_PYTHON`) and installed there on first use.
///
/// # Errors
/// No Python to make the venv with, or pip could not install the pinned version.
pub fn componentize_py(root: &Path) -> anyhow::Result<PathBuf> {
    let venv = root.join("python");
    let exe = venv.join("bin/componentize-py");
    let wanted = format!("componentize-py=={COMPONENTIZE_PY}\n");
    let _lock = lock(root, "python")?;
    if exe.exists() && up_to_date(&venv, &wanted) {
        return Ok(exe);
    }
    let python = std::env::var_os("WASMRPC_BUILD_PYTHON").unwrap_or_else(|| "python3".into());
    status(
        "Installing",
        &format!("componentize-py {COMPONENTIZE_PY} into {}", venv.display()),
    );
    match Command::new(&python).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => bail!(
            "building Python needs Python 3.10 or newer to install componentize-py, and `{}` \
             was not found: install it (`apt install python3 python3-venv`, `brew install \
             python`, or python.org) or set WASMRPC_BUILD_PYTHON to one",
            python.to_string_lossy()
        ),
    }
    // A reinstall starts from an empty venv, so nothing of an older version lingers.
    if venv.exists() {
        std::fs::remove_dir_all(&venv).with_context(|| format!("removing {}", venv.display()))?;
    }
    run_quietly(
        Command::new(&python).arg("-m").arg("venv").arg(&venv),
        "making a venv (on Debian and Ubuntu, `apt install python3-venv` provides it)",
    )?;
    run_quietly(
        Command::new(venv.join("bin/python")).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            &format!("componentize-py=={COMPONENTIZE_PY}"),
        ]),
        &format!("pip install componentize-py=={COMPONENTIZE_PY}"),
    )?;
    std::fs::write(venv.join(STAMP), wanted).context("writing the toolchain stamp")?;
    Ok(exe)
}

/// The JavaScript toolchain in `root/js`: paths of `esbuild` and `componentize-js`.
pub struct Js {
    pub esbuild: PathBuf,
    pub componentize_js: PathBuf,
}

/// The JavaScript toolchain, installed with npm into `root/js` on first use.
///
/// # Errors
/// No node or npm, or npm could not install the pinned versions.
pub fn js(root: &Path) -> anyhow::Result<Js> {
    let dir = root.join("js");
    let bin = dir.join("node_modules/.bin");
    let tools = Js {
        esbuild: bin.join("esbuild"),
        componentize_js: bin.join("componentize-js"),
    };
    let wanted =
        format!("@bytecodealliance/componentize-js@{COMPONENTIZE_JS}\nesbuild@{ESBUILD}\n");
    let _lock = lock(root, "js")?;
    let have_node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_node {
        bail!(
            "building JavaScript or TypeScript needs Node.js 18 or newer (node and npm), and \
             `node` was not found: install it (https://nodejs.org, `apt install nodejs npm`, or \
             `brew install node`)"
        );
    }
    if tools.esbuild.exists() && tools.componentize_js.exists() && up_to_date(&dir, &wanted) {
        return Ok(tools);
    }
    status(
        "Installing",
        &format!(
            "componentize-js {COMPONENTIZE_JS} and esbuild {ESBUILD} into {}",
            dir.display()
        ),
    );
    if Command::new("npm").arg("--version").output().is_err() {
        bail!(
            "building JavaScript or TypeScript needs npm beside node to install componentize-js, \
             and `npm` was not found: install it (`apt install npm`, or Node.js from nodejs.org)"
        );
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // A private package.json keeps npm from walking up into the user's project.
    std::fs::write(
        dir.join("package.json"),
        "{ \"name\": \"wasmrpc-js-toolchain\", \"private\": true }\n",
    )
    .context("writing the toolchain's package.json")?;
    run_quietly(
        Command::new("npm").current_dir(&dir).args([
            "install",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            "--loglevel=error",
            &format!("@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"),
            &format!("esbuild@{ESBUILD}"),
        ]),
        "npm install",
    )?;
    std::fs::write(dir.join(STAMP), wanted).context("writing the toolchain stamp")?;
    Ok(tools)
}

//! `wasmrpc build FILE`: what FILE is decides how it becomes a component. A Rust guest crate (a
//! directory, a `Cargo.toml`, or cargo's own arguments) goes to cargo (`build_rust.rs`); an
//! `app.py` to componentize-py (`build_python.rs`); an `app.js`, `app.mjs` or `app.ts` to esbuild
//! and componentize-js (`build_js.rs`), with toolchains from `toolchains.rs`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context as _, bail};
use clap::Parser;

use super::{build_js, build_python, build_rust, toolchains};

/// The extensions `wasmrpc build` accepts, for error messages.
const ACCEPTED: &str = "a Rust crate (a directory or Cargo.toml), .py, .js, .mjs or .ts \
                        (a .wasm is built already: deploy it as it is)";

static QUIET: AtomicBool = AtomicBool::new(false);

/// One line of progress on stderr, cargo's way: the verb right-aligned in twelve columns.
pub fn status(verb: &str, message: &str) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("{verb:>12} {message}");
    }
}

/// What a FILE argument names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A crate: its manifest path is passed to cargo.
    Rust,
    Python,
    JavaScript,
    TypeScript,
    /// A component already.
    Wasm,
}

/// What `file` is, told by its extension (or by being a crate's directory).
///
/// # Errors
/// Neither a crate nor one of the accepted extensions.
pub fn kind(file: &Path) -> anyhow::Result<Kind> {
    if file.is_dir() || file.file_name().is_some_and(|n| n == "Cargo.toml") {
        return Ok(Kind::Rust);
    }
    let ext = file
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("py") => Ok(Kind::Python),
        Some("js" | "mjs") => Ok(Kind::JavaScript),
        Some("ts" | "mts") => Ok(Kind::TypeScript),
        Some("wasm") => Ok(Kind::Wasm),
        Some("toml") => Ok(Kind::Rust),
        _ => bail!(
            "{}: cannot tell what to build from its name; wasmrpc build takes {ACCEPTED}",
            file.display()
        ),
    }
}

/// The options after FILE, re-read: clap gives everything after FILE to the cargo arguments.
#[derive(Debug, Parser)]
#[command(no_binary_name = true)]
struct Tail {
    #[arg(short = 'o', long)]
    output: Option<PathBuf>,
    #[arg(long)]
    toolchains: Option<PathBuf>,
    #[arg(short, long)]
    quiet: bool,
}

/// `wasmrpc build [-o PATH] [--toolchains DIR] [FILE | CARGO ARGS…]`.
///
/// # Errors
/// FILE is not something this builds, or its toolchain failed.
pub fn run(
    output: Option<PathBuf>,
    toolchains: Option<PathBuf>,
    args: &[OsString],
) -> anyhow::Result<()> {
    // `-q` may come before FILE too.
    let at = args
        .iter()
        .take_while(|a| *a == "-q" || *a == "--quiet")
        .count();
    let file = match args.get(at) {
        Some(first) if !first.to_string_lossy().starts_with('-') => PathBuf::from(first),
        // Cargo's arguments only, as before FILE existed.
        _ => return build_rust::run(args, output.as_deref()),
    };
    let rest: Vec<OsString> = args[..at].iter().chain(&args[at + 1..]).cloned().collect();
    let kind = kind(&file)?;
    if kind == Kind::Rust {
        let manifest = if file.is_dir() {
            file.join("Cargo.toml")
        } else {
            file.clone()
        };
        if !manifest.is_file() {
            bail!("{}: no Cargo.toml there", file.display());
        }
        let mut cargo_args: Vec<OsString> = vec!["--manifest-path".into(), manifest.into()];
        cargo_args.extend(rest);
        return build_rust::run(&cargo_args, output.as_deref());
    }
    let tail = Tail::try_parse_from(&rest).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        anyhow::anyhow!(
            "{}; after a source file, wasmrpc build takes -o PATH, --toolchains DIR and -q",
            first.trim_start_matches("error: ")
        )
    })?;
    QUIET.store(tail.quiet, Ordering::Relaxed);
    let output = tail.output.or(output);
    let toolchains = tail.toolchains.or(toolchains);
    let path = source(&file, kind, output.as_deref(), toolchains.as_deref())?;
    println!("{}", path.display());
    Ok(())
}

/// Build a Python, JavaScript or TypeScript source into a component: written to `output`, or
/// beside the source as `<stem>.wasm`; its path is returned.
///
/// # Errors
/// The toolchain could not be installed, or it refused the source.
pub fn source(
    file: &Path,
    kind: Kind,
    output: Option<&Path>,
    toolchains: Option<&Path>,
) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    if !file.is_file() {
        bail!("{}: no such file", file.display());
    }
    let file = std::path::absolute(file).context("finding the source's directory")?;
    let project = file.parent().context("the source has no directory")?;
    let output = match output {
        Some(path) => path.to_path_buf(),
        None => file.with_extension("wasm"),
    };
    let root = std::path::absolute(toolchains::dir(project, toolchains))
        .context("finding the toolchains' directory")?;
    // One directory per build: what the toolchain reads (WIT, SDK) and writes is here.
    let scratch = root.join("work");
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let work = tempfile::Builder::new()
        .prefix("build-")
        .tempdir_in(&scratch)
        .with_context(|| format!("making a work directory in {}", scratch.display()))?;
    let built = match kind {
        Kind::Python => build_python::build(&file, work.path(), &root)?,
        Kind::JavaScript | Kind::TypeScript => build_js::build(&file, work.path(), &root)?,
        Kind::Rust | Kind::Wasm => unreachable!("not a source file"),
    };
    let component = std::fs::read(&built).context("reading the built component")?;
    let (_, exports) = build_rust::imports_and_exports(&component)?;
    if !exports
        .iter()
        .any(|e| e.starts_with(build_rust::METHOD_INTERFACE))
    {
        bail!(
            "{}: the component exports no `{}` interface",
            file.display(),
            build_rust::METHOD_INTERFACE
        );
    }
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&output, &component).with_context(|| format!("writing {}", output.display()))?;
    status(
        "Finished",
        &format!(
            "{} ({:.1} MiB, {:.1} s)",
            output.display(),
            component.len() as f64 / (1024.0 * 1024.0),
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(output)
}

/// The component to upload for `wasmrpc deploy NAME FILE`: FILE itself when it is a `.wasm`,
/// otherwise what building it gives (a crate must give exactly one component).
///
/// # Errors
/// FILE is not something this builds, or the build failed.
pub fn for_deploy(file: &Path, toolchains: Option<&Path>) -> anyhow::Result<PathBuf> {
    match kind(file)? {
        Kind::Wasm => Ok(file.to_path_buf()),
        Kind::Rust => {
            let manifest = if file.is_dir() {
                file.join("Cargo.toml")
            } else {
                file.to_path_buf()
            };
            let args: Vec<OsString> = vec!["--manifest-path".into(), manifest.into()];
            let mut built = build_rust::build(&args)?;
            if built.len() != 1 {
                bail!(
                    "{} built {} components; deploy one of them by its path",
                    file.display(),
                    built.len()
                );
            }
            Ok(built.remove(0))
        }
        kind => source(file, kind, None, toolchains),
    }
}

/// The toolchain's output with what helps the user first: the lines naming their file.
pub fn failure(tool: &str, source: &Path, report: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{tool} could not build {}:\n{}",
        source.display(),
        report.trim_end()
    )
}

//! `wasmrpc build` of a Rust guest crate: a component with no WASI imports.
//!
//! Runs `cargo build --target wasm32-unknown-unknown` (release unless a profile is given), then
//! wraps each `cdylib` it produced into a component with the `wit-component` crate, from the
//! `wasmrpc:tensor` type information wit-bindgen embedded in it. On that target Rust's standard
//! library imports nothing, so the component imports only the `wasmrpc:tensor` interfaces it uses:
//! the server sets up no WASI context for it, and a fresh instance costs less than one of a
//! `wasm32-wasip2` build (docs/benchmarks.md). The SDK gives such a guest its heap
//! (`guest-sdk/src/heap.rs`) and sends panic messages to the host's log.
//!
//! Each component is written beside cargo's module as `<crate>.component.wasm`; its path is
//! printed on stdout, one a line, and what was built on stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// The target a component with no WASI imports is built for.
const TARGET: &str = "wasm32-unknown-unknown";

/// Build, wrap, and print the components' paths; with `output`, the one component is copied
/// there and that path printed instead.
pub fn run(cargo_args: &[OsString], output: Option<&Path>) -> anyhow::Result<()> {
    let components = build(cargo_args)?;
    match output {
        None => {
            for path in &components {
                println!("{}", path.display());
            }
        }
        Some(output) => {
            let [component] = components.as_slice() else {
                bail!(
                    "-o names one file, and cargo built {} components",
                    components.len()
                );
            };
            std::fs::copy(component, output)
                .with_context(|| format!("copying the component to {}", output.display()))?;
            println!("{}", output.display());
        }
    }
    Ok(())
}

/// Build and wrap; the components' paths.
pub fn build(cargo_args: &[OsString]) -> anyhow::Result<Vec<PathBuf>> {
    check_target_installed()?;
    let modules = cargo_build(cargo_args)?;
    if modules.is_empty() {
        bail!(
            "cargo built no cdylib: a guest crate needs `crate-type = [\"cdylib\", \"rlib\"]` \
             under [lib] (pick the crate with -p NAME in a workspace)"
        );
    }
    // `-q` quiets cargo, and this command's own report with it.
    let quiet = cargo_args.iter().any(|a| a == "-q" || a == "--quiet");
    let mut failed = 0;
    let mut components = Vec::new();
    for module in &modules {
        match componentize_file(module) {
            Ok((path, size, imports)) => {
                if !quiet {
                    eprintln!(
                        "     Wrapped {} ({} KiB; imports: {})",
                        path.display(),
                        size.div_ceil(1024),
                        if imports.is_empty() {
                            "none".to_owned()
                        } else {
                            imports.join(", ")
                        }
                    );
                }
                components.push(path);
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {}: {e:#}", module.display());
            }
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} modules could not be made components",
            modules.len()
        );
    }
    Ok(components)
}

/// Wrap a core module built with the guest SDK into a component.
///
/// # Errors
/// The module carries no `wasmrpc:tensor` bindings (not built with the SDK or wit-bindgen), or
/// they do not fit its exports.
fn componentize(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    wit_component::ComponentEncoder::default()
        .module(module)
        .context(
            "reading the module's component type (is it a wasmrpc guest, built with the \
             wasmrpc-guest SDK?)",
        )?
        .validate(true)
        .encode()
        .context("making the component")
}

/// The component's path, size and imports.
fn componentize_file(module: &Path) -> anyhow::Result<(PathBuf, usize, Vec<String>)> {
    let bytes = std::fs::read(module).context("reading the module")?;
    let component = componentize(&bytes)?;
    let (imports, exports) = imports_and_exports(&component)?;
    if !exports.iter().any(|e| e.starts_with(METHOD_INTERFACE)) {
        bail!(
            "the module exports no `{METHOD_INTERFACE}` interface: is it a wasmrpc guest, \
             built with the wasmrpc-guest SDK and `wasmrpc_guest::export!`?"
        );
    }
    let path = module.with_extension("component.wasm");
    std::fs::write(&path, &component).with_context(|| format!("writing {}", path.display()))?;
    Ok((path, component.len(), imports))
}

/// The interface every wasmrpc component exports.
pub const METHOD_INTERFACE: &str = "wasmrpc:tensor/method";

/// The names a component imports and exports (its own, not those of components nested in it).
pub fn imports_and_exports(component: &[u8]) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    use wasmparser::Payload;
    let mut depth = 0usize;
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        match payload.context("reading the component")? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import.context("reading an import")?.name.0.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export.context("reading an export")?.name.0.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// Say how to install the target before cargo fails with a wall of "can't find crate" errors.
fn check_target_installed() -> anyhow::Result<()> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(&rustc).args(["--print", "sysroot"]).output() else {
        return Ok(()); // cargo will say what is wrong with the toolchain
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if !out.status.success() || sysroot.is_empty() {
        return Ok(());
    }
    let lib = Path::new(&sysroot).join("lib/rustlib").join(TARGET);
    if !lib.exists() {
        bail!("the {TARGET} target is not installed: run `rustup target add {TARGET}`");
    }
    Ok(())
}

/// Run cargo; the `.wasm` files of the cdylibs it built (or found up to date).
fn cargo_build(cargo_args: &[OsString]) -> anyhow::Result<Vec<PathBuf>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--target", TARGET])
        .args(["--message-format", "json-render-diagnostics"]);
    let profile_given = cargo_args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--release" || a == "-r" || a == "--profile" || a.starts_with("--profile=")
    });
    if !profile_given {
        cmd.arg("--release");
    }
    cmd.args(cargo_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let out = cmd.output().context("running cargo (is it on PATH?)")?;
    let mut modules = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            // Not one of cargo's messages: a build script's output, say.
            println!("{line}");
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let is_cdylib = message["target"]["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib"));
        if !is_cdylib {
            continue;
        }
        let files = message["filenames"].as_array().into_iter().flatten();
        modules.extend(
            files
                .filter_map(|f| f.as_str())
                .filter(|f| f.ends_with(".wasm"))
                .map(PathBuf::from),
        );
    }
    if !out.status.success() {
        bail!("cargo build failed ({})", out.status);
    }
    Ok(modules)
}

//! An `app.js`, `app.mjs` or `app.ts` written with the JavaScript guest SDK (`@wasmrpc/guest`)
//! built into a component: esbuild bundles it with the embedded SDK into one ESM file (types
//! stripped), then componentize-js makes that a component of the embedded WIT. componentize-js
//! runs its wasm-tools sandboxed to its working directory, so both are written into the work
//! directory and it runs there.
//!
//! componentize-js keeps its default WASI features, as a stock build has them: `console.log`
//! reaches the call's log, `Math.random` and `Date` work, and `fetch()` fails when tried (the
//! server denies outgoing HTTP) instead of being absent, so a guest behaves as it would built by
//! hand. `fetch-event` adds nothing to a world that exports no HTTP handler.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;

use super::build::{failure, status};
use super::{embedded, toolchains};

/// Build `source` in `work` with the toolchain of `toolchains`; the component's path.
///
/// # Errors
/// The toolchain could not be installed, esbuild could not bundle the source (its report names
/// the file, line and column), or componentize-js refused the bundle.
pub fn build(source: &Path, work: &Path, toolchains: &Path) -> anyhow::Result<PathBuf> {
    let tools = toolchains::js(toolchains)?;
    embedded::write_all(&work.join("wit"), embedded::WIT)?;
    embedded::write_all(&work.join("sdk"), embedded::JS_SDK)?;
    let name = source.file_name().unwrap_or_default().to_string_lossy();
    status(
        "Bundling",
        &format!("{name} with esbuild {}", toolchains::ESBUILD),
    );
    // Run in the source's directory, so that esbuild's errors name the file as the user knows it.
    let mut alias = std::ffi::OsString::from("--alias:@wasmrpc/guest=");
    alias.push(work.join("sdk/index.js"));
    let mut outfile = std::ffi::OsString::from("--outfile=");
    outfile.push(work.join("bundle.js"));
    let bundled = Command::new(&tools.esbuild)
        .arg(source.file_name().context("the source has no file name")?)
        .args([
            "--bundle",
            "--format=esm",
            "--platform=neutral",
            "--main-fields=module,main",
            "--color=false",
            "--log-level=warning",
        ])
        .arg(alias)
        .arg(outfile)
        .current_dir(source.parent().context("the source has no directory")?)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", tools.esbuild.display()))?;
    if !bundled.status.success() {
        let report = String::from_utf8_lossy(&bundled.stderr);
        return Err(failure("esbuild", source, &report));
    }
    status(
        "Building",
        &format!(
            "{name} with componentize-js {}",
            toolchains::COMPONENTIZE_JS
        ),
    );
    let out = work.join("component.wasm");
    let built = Command::new(&tools.componentize_js)
        .args([
            "bundle.js",
            "--wit",
            "wit",
            "--world-name",
            "tensor-function",
            "-o",
            "component.wasm",
        ])
        .current_dir(work)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", tools.componentize_js.display()))?;
    if !built.status.success() {
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        );
        return Err(failure("componentize-js", source, &explain(&report, &name)));
    }
    Ok(out)
}

/// componentize-js's report without node's frames inside componentize-js. A module without the
/// `method` export is told how to write one. (An exception thrown while the module is evaluated
/// names a line of the bundle, not of the source.)
fn explain(report: &str, name: &str) -> String {
    if report.contains("does not export a \"method\" interface") {
        return format!(
            "{name} exports no `method`: export the SDK's methods as \
             `export const method = exportMethods({{ NAME: fn(...) }})` \
             (`import {{ fn, exportMethods }} from \"@wasmrpc/guest\"`)"
        );
    }
    let mut kept = Vec::new();
    let mut lines = report.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("file://") {
            // Node's "where it was thrown": the file, its line of code, a caret.
            lines.next();
            lines.next();
            continue;
        }
        let internal_frame = trimmed.starts_with("at ")
            && (trimmed.contains("file://") || trimmed.contains("(node:"));
        if internal_frame || trimmed.starts_with("Node.js v") {
            continue;
        }
        if kept.is_empty() && trimmed.is_empty() {
            continue;
        }
        kept.push(line);
    }
    kept.join("\n").trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_without_the_method_export_is_told_how_to_write_one() {
        let report = "Error: \"source.js\" does not export a \"method\" interface as expected";
        assert!(explain(report, "app.js").starts_with("app.js exports no `method`"));
    }

    #[test]
    fn node_s_frames_inside_componentize_js_are_dropped() {
        let report = "file:///t/componentize.js:365\n    throw new Error(err);\n          ^\n\n\
                      Error: Failed to initialize component\nbundle.js:3:1 TypeError: no\n    \
                      at componentize (file:///t/componentize.js:365:11)\n\nNode.js v20.20.2\n";
        assert_eq!(
            explain(report, "app.js"),
            "Error: Failed to initialize component\nbundle.js:3:1 TypeError: no"
        );
    }
}

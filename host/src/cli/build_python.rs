//! An `app.py` written with the Python guest SDK (`wasmrpc_guest`) built into a component by
//! componentize-py: the embedded WIT and SDK are written into the work directory and put on
//! componentize-py's path after the app's own directory, so its sibling modules import too.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use super::build::{failure, status};
use super::{embedded, toolchains};

/// Build `source` in `work` with the componentize-py of `toolchains`; the component's path.
///
/// # Errors
/// The toolchain could not be installed, or componentize-py refused the source (its report,
/// shortened to the part about the user's file, is the error).
pub fn build(source: &Path, work: &Path, toolchains: &Path) -> anyhow::Result<PathBuf> {
    let module = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if module.is_empty()
        || module.starts_with(|c: char| c.is_ascii_digit())
        || !module.chars().all(|c| c.is_alphanumeric() || c == '_')
    {
        bail!(
            "{}: a Python module's name must be an identifier (like app.py or my_function.py)",
            source.display()
        );
    }
    let componentize_py = toolchains::componentize_py(toolchains)?;
    let wit = work.join("wit");
    let sdk = work.join("sdk");
    embedded::write_all(&wit, embedded::WIT)?;
    embedded::write_all(&sdk, embedded::PYTHON_SDK)?;
    let name = source.file_name().unwrap_or_default().to_string_lossy();
    status(
        "Building",
        &format!(
            "{name} with componentize-py {}",
            toolchains::COMPONENTIZE_PY
        ),
    );
    let app_dir = source.parent().context("the source has no directory")?;
    let out = work.join("component.wasm");
    let result = Command::new(&componentize_py)
        .arg("-d")
        .arg(wit.join("tensor.wit"))
        .args(["-w", "tensor-function", "componentize", &module])
        .arg("-p")
        .arg(app_dir)
        .arg("-p")
        .arg(&sdk)
        .arg("-o")
        .arg(&out)
        .current_dir(work)
        // Its errors carry a Rust backtrace of its own internals when these ask for one.
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", componentize_py.display()))?;
    if !result.status.success() {
        let report = String::from_utf8_lossy(&result.stderr);
        return Err(failure(
            "componentize-py",
            source,
            &explain(&report, source),
        ));
    }
    Ok(out)
}

/// componentize-py's report made about the user's file. It reports the app's exception from
/// inside its own Python wrapper (`AssertionError: <the app's error>`, then `Caused by:` with the
/// same again): keep the app's error, with the path it was read at inside the build (`/0/app.py`)
/// replaced by the user's. An app with no `@function` has no `Method` for componentize-py to
/// export: say that instead.
fn explain(report: &str, source: &Path) -> String {
    let name = source.file_name().unwrap_or_default().to_string_lossy();
    let module = source.file_stem().unwrap_or_default().to_string_lossy();
    if report.contains(&format!("module '{module}' has no attribute 'Method'")) {
        return format!(
            "{name} defines no functions to export: decorate at least one with @function \
             (`from wasmrpc_guest import Tensor, function`)"
        );
    }
    let app_error = match report.split_once("AssertionError: ") {
        Some((_, rest)) => rest,
        None => report,
    };
    let app_error = app_error
        .split("\nCaused by:")
        .next()
        .unwrap_or(app_error)
        .split("\nStack backtrace:")
        .next()
        .unwrap_or(app_error);
    // The directories of componentize-py's path are mounted at /0, /1, …; the app's is /0.
    let mut text = app_error.trim_end().to_owned();
    for n in 0..4 {
        text = text.replace(
            &format!("\"/{n}/{name}\""),
            &format!("\"{}\"", source.display()),
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syntax_error_names_the_users_file_and_line_without_the_tool_s_traceback() {
        let report = "Traceback (most recent call last):\n  File \"/venv/bin/componentize-py\", \
                      line 8, in <module>\n    sys.exit(script())\nAssertionError:   File \
                      \"/0/bad.py\", line 5\n    return x +\n              ^\nSyntaxError: \
                      invalid syntax\n\n\nCaused by:\n    SyntaxError: invalid syntax (bad.py, \
                      line 5)\n";
        let text = explain(report, Path::new("/home/u/bad.py"));
        assert_eq!(
            text,
            "  File \"/home/u/bad.py\", line 5\n    return x +\n              ^\n\
             SyntaxError: invalid syntax"
        );
    }

    #[test]
    fn an_app_without_functions_is_told_to_decorate_one() {
        let report = "AssertionError: AttributeError: module 'nofn' has no attribute 'Method'\n";
        let text = explain(report, Path::new("/p/nofn.py"));
        assert!(
            text.starts_with("nofn.py defines no functions to export"),
            "{text}"
        );
    }
}

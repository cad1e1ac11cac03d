//! Log lines for the host: [`trace`], [`debug`], [`info`], [`warn`], [`error`].
//!
//! In a component each line goes to the imported `log` interface; the host captures it, keeps at
//! most a fixed number of bytes per call (shared with stdout and stderr) and forwards them to its own tracing. Built for any other target (native
//! unit tests) a line is printed to stderr instead, as `[LEVEL] message`.
//!
//! ```
//! use wasmrpc_guest::log;
//!
//! log::info("starting");
//! log::debug(format!("{} rows", 3));
//! ```

use std::fmt;

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed diagnostics.
    Trace,
    /// Diagnostics.
    Debug,
    /// Normal operation.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        })
    }
}

/// Writes one log line at `level`. Bytes past the host's per-call log cap are dropped.
///
/// ```
/// wasmrpc_guest::log::log(wasmrpc_guest::log::Level::Warn, "slow path");
/// ```
pub fn log(level: Level, message: impl AsRef<str>) {
    write(level, message.as_ref());
}

#[cfg(target_arch = "wasm32")]
fn write(level: Level, message: &str) {
    use crate::bindings::wasmrpc::tensor::log::{Level as WitLevel, log};
    let level = match level {
        Level::Trace => WitLevel::Trace,
        Level::Debug => WitLevel::Debug,
        Level::Info => WitLevel::Info,
        Level::Warn => WitLevel::Warn,
        Level::Error => WitLevel::Error,
    };
    log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn write(level: Level, message: &str) {
    eprintln!("[{level}] {message}");
}

/// Writes a [`Level::Trace`] line.
pub fn trace(message: impl AsRef<str>) {
    write(Level::Trace, message.as_ref());
}

/// Writes a [`Level::Debug`] line.
pub fn debug(message: impl AsRef<str>) {
    write(Level::Debug, message.as_ref());
}

/// Writes a [`Level::Info`] line.
pub fn info(message: impl AsRef<str>) {
    write(Level::Info, message.as_ref());
}

/// Writes a [`Level::Warn`] line.
pub fn warn(message: impl AsRef<str>) {
    write(Level::Warn, message.as_ref());
}

/// Writes a [`Level::Error`] line.
pub fn error(message: impl AsRef<str>) {
    write(Level::Error, message.as_ref());
}

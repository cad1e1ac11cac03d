//! The import allow-list: what a component may ask the host for.
//!
//! A component is refused at upload if it imports anything else, naming the import. What is
//! allowed gives no authority: the tensor package's own interfaces, the SDK's panic report
//! (`wit/panic/report.wit`), and the WASI interfaces a Rust
//! `wasm32-wasip2` guest links against for its panic and allocation-failure messages, backed by an
//! empty sandbox (no environment, no arguments, empty stdin, captured stdout and stderr).

/// Interfaces (without `@version`) a component may import.
pub const ALLOWED_IMPORTS: &[&str] = &[
    "wasmrpc:tensor/types",
    "wasmrpc:tensor/log",
    // How the SDK's panic hook reports its message (`wit/panic/report.wit`).
    "wasmrpc:panic/report",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    // Randomness seeds Rust's HashMap; it reveals nothing about the host or other tenants.
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
];

/// Whether an import name (`ns:pkg/iface@1.2.3`) is on the allow-list, whatever its version.
pub fn is_allowed(import: &str) -> bool {
    let unversioned = import.split('@').next().unwrap_or(import);
    ALLOWED_IMPORTS.contains(&unversioned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_do_not_matter_but_interfaces_do() {
        assert!(is_allowed("wasi:io/streams@0.2.6"));
        assert!(is_allowed("wasmrpc:tensor/log@0.1.0"));
        assert!(is_allowed("wasmrpc:panic/report@0.1.0"));
        assert!(!is_allowed("wasi:filesystem/preopens@0.2.6"));
        assert!(!is_allowed("wasi:sockets/tcp@0.2.0"));
        assert!(!is_allowed("wasi:http/outgoing-handler@0.2.0"));
        assert!(!is_allowed("evil:thing/steal"));
    }
}

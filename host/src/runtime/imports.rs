//! The import allow-list: what a component may ask the host for, decided from the import's name
//! alone so that a refusal comes before compiling (`runtime/declared.rs`).
//!
//! What is allowed gives no authority: the tensor package's own interfaces, the SDK's panic
//! report (`wit/panic/report.wit`), and the standard WASI 0.2 interfaces the stock toolchains
//! import (a Rust `wasm32-wasip2` guest, componentize-py, componentize-js), each backed by the
//! empty world of `runtime/wasi_world.rs`: no files, environment, arguments or network, stdout
//! and stderr into the call's capped log, randomness, a coarse clock. docs/security.md ("What a
//! guest gets") lists what each interface does there.

/// Interfaces of this project's own packages (without `@version`; any version).
pub const WASMRPC_IMPORTS: &[&str] = &[
    "wasmrpc:tensor/types",
    "wasmrpc:tensor/log",
    // How the SDK's panic hook reports its message (`wit/panic/report.wit`).
    "wasmrpc:panic/report",
];

/// WASI 0.2 interfaces a component may import, by package, at any version `0.2.N`: the ones
/// wasmtime-wasi and wasmtime-wasi-http 48 link. wasmtime's linker matches `0.2.N` to the
/// host's own `0.2.12` whatever `N` is (semver: a 0.x minor is the compatible line), so a
/// guest built against an older or a newer patch release links as long as it uses nothing the
/// host's version lacks; one that does is refused after compiling, by the linker, naming it.
pub const WASI_02_IMPORTS: &[(&str, &[&str])] = &[
    (
        "wasi:cli",
        &[
            "environment",
            "exit",
            "stdin",
            "stdout",
            "stderr",
            "terminal-input",
            "terminal-output",
            "terminal-stdin",
            "terminal-stdout",
            "terminal-stderr",
        ],
    ),
    // Coarse: `runtime/wasi_world.rs` says how coarse and why.
    ("wasi:clocks", &["monotonic-clock", "wall-clock"]),
    // No preopened directory: there is no path to open.
    ("wasi:filesystem", &["types", "preopens"]),
    ("wasi:io", &["error", "poll", "streams"]),
    // Randomness seeds hash maps and Python's and JavaScript's runtimes; it reveals nothing about
    // the host or other tenants.
    ("wasi:random", &["random", "insecure", "insecure-seed"]),
    // Every socket and name lookup is denied when tried.
    (
        "wasi:sockets",
        &[
            "network",
            "instance-network",
            "tcp",
            "tcp-create-socket",
            "udp",
            "udp-create-socket",
            "ip-name-lookup",
        ],
    ),
    // componentize-js imports these by default; every request is denied when sent.
    ("wasi:http", &["types", "outgoing-handler"]),
];

/// Whether an import name (`ns:pkg/iface@1.2.3`) is on the allow-list: one of this project's
/// interfaces at any version, or a listed WASI interface at a version `0.2.N`.
pub fn is_allowed(import: &str) -> bool {
    let (unversioned, version) = match import.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (import, None),
    };
    if WASMRPC_IMPORTS.contains(&unversioned) {
        return true;
    }
    let Some((package, interface)) = unversioned.split_once('/') else {
        return false;
    };
    let listed = WASI_02_IMPORTS
        .iter()
        .any(|(p, interfaces)| *p == package && interfaces.contains(&interface));
    listed && version.is_some_and(is_wasi_02)
}

/// `0.2.N` exactly, as semver writes it: no pre-release (WASI's 0.2 release candidates had
/// other types), no build metadata, no leading zero.
fn is_wasi_02(version: &str) -> bool {
    version.strip_prefix("0.2.").is_some_and(|patch| {
        !patch.is_empty()
            && patch.bytes().all(|b| b.is_ascii_digit())
            && (patch == "0" || !patch.starts_with('0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_s_own_interfaces_are_allowed_at_any_version() {
        assert!(is_allowed("wasmrpc:tensor/log@0.1.0"));
        assert!(is_allowed("wasmrpc:tensor/types@0.1.0"));
        assert!(is_allowed("wasmrpc:panic/report@0.1.0"));
        assert!(is_allowed("wasmrpc:tensor/types"));
        assert!(!is_allowed("wasmrpc:tensor/other@0.1.0"));
    }

    #[test]
    fn every_interface_the_stock_toolchains_import_is_allowed() {
        // componentize-py 0.25.1 (WASI 0.2.9), componentize-js 0.23.0 (WASI 0.2.12, wasi:http
        // 0.2.10) and a Rust wasm32-wasip2 guest (0.2.x of its std).
        for import in [
            "wasi:io/error@0.2.9",
            "wasi:io/poll@0.2.9",
            "wasi:io/streams@0.2.9",
            "wasi:clocks/monotonic-clock@0.2.9",
            "wasi:clocks/wall-clock@0.2.9",
            "wasi:filesystem/types@0.2.9",
            "wasi:filesystem/preopens@0.2.9",
            "wasi:sockets/network@0.2.9",
            "wasi:sockets/instance-network@0.2.9",
            "wasi:sockets/tcp@0.2.9",
            "wasi:sockets/udp@0.2.9",
            "wasi:sockets/tcp-create-socket@0.2.9",
            "wasi:sockets/udp-create-socket@0.2.9",
            "wasi:sockets/ip-name-lookup@0.2.9",
            "wasi:random/random@0.2.9",
            "wasi:random/insecure-seed@0.2.9",
            "wasi:cli/environment@0.2.9",
            "wasi:cli/exit@0.2.9",
            "wasi:cli/stdin@0.2.9",
            "wasi:cli/stdout@0.2.9",
            "wasi:cli/stderr@0.2.9",
            "wasi:cli/terminal-input@0.2.9",
            "wasi:cli/terminal-stdout@0.2.9",
            "wasi:io/streams@0.2.12",
            "wasi:clocks/monotonic-clock@0.2.12",
            "wasi:random/insecure@0.2.12",
            "wasi:http/types@0.2.10",
            "wasi:http/outgoing-handler@0.2.10",
            "wasi:cli/environment@0.2.0",
            "wasi:io/streams@0.2.99",
        ] {
            assert!(is_allowed(import), "{import}");
        }
    }

    #[test]
    fn anything_outside_wasi_0_2_and_this_project_is_refused() {
        for import in [
            "evil:thing/steal",
            "evil:thing/steal@0.2.0",
            "wasi:foo/bar@0.2.0",
            "wasi:cli/environment@0.3.0",
            "wasi:cli/environment@0.1.0",
            "wasi:cli/environment@1.0.0",
            "wasi:cli/environment",
            "wasi:cli/environment@0.2.0-rc-2023-11-10",
            "wasi:cli/environment@0.2.1+build",
            "wasi:cli/environment@0.2.",
            "wasi:cli/environment@0.2.+1",
            "wasi:cli/environment@0.2.01",
            "wasi:cli/run@0.2.0",
            "wasi:clocks/timezone@0.2.9",
            "wasi:http/incoming-handler@0.2.0",
            "wasi:http/types@0.3.0",
            "wasi:keyvalue/store@0.2.0-draft",
            "wasi:cli@0.2.0",
            "wasi:io/streams/extra@0.2.0",
            "",
        ] {
            assert!(!is_allowed(import), "{import}");
        }
    }
}

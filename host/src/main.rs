//! The `wasmrpc` binary: the server and its command line, all in the library.

fn main() -> std::process::ExitCode {
    wasmrpc_host::cli::main()
}

// Fewer cycles per call than glibc's allocator (`allocator.rs`).
#[global_allocator]
static ALLOCATOR: wasmrpc_host::internals::Allocator = wasmrpc_host::internals::Allocator {};

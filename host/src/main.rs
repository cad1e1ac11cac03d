//! The `wasmrpc` binary: the server and its command line, all in the library.

fn main() -> std::process::ExitCode {
    wasmrpc_host::cli::main()
}

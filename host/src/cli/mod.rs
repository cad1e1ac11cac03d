//! The `wasmrpc` command line: `serve`, the client commands `deploy`, `list`, `call`, `delete`,
//! which use the client SDK, the admin's `tenant` commands, and `build` for guest crates.

mod args;
mod build;
mod client_cmds;
mod open_files;
pub mod output;
mod serve;
mod tenant_cmds;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::ServeSettings;

/// Host and call tensor functions compiled to WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "wasmrpc", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the client commands connect.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Server address: `http://HOST:PORT`, or `https://HOST:PORT` for TLS.
    #[arg(long, env = "WASMRPC_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// API key (sent as `Authorization: Bearer KEY`).
    #[arg(long, env = "WASMRPC_KEY", hide_env_values = true)]
    key: Option<String>,
    /// PEM CA certificate to trust for an `https` server, besides the webpki roots (a private
    /// CA, or the server's self-signed certificate).
    #[arg(long, env = "WASMRPC_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Seconds to wait for the server.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (prints the address it listens on).
    Serve {
        /// TOML file of settings (flags and WASMRPC_* variables override it).
        #[arg(long, env = "WASMRPC_CONFIG")]
        config: Option<PathBuf>,
        // Boxed: the settings dwarf the other commands' arguments.
        #[command(flatten)]
        settings: Box<ServeSettings>,
    },
    /// Register a component under NAME (a new version if NAME exists).
    Deploy {
        /// Name to register the method under.
        name: String,
        /// The component (.wasm built for wasm32-wasip2).
        file: PathBuf,
        /// Which method of a multi-method component NAME calls.
        #[arg(long)]
        export: Option<String>,
        /// Skip the upload when the newest version already has these bytes (and export).
        #[arg(long)]
        if_changed: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List registered methods with their signatures.
    List {
        /// Print the server's JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Call a method: each ARG is `dtype:values` (`int32:[1,2]`, `float32:[[1,2],[3,4]]`,
    /// `float64:2.5`, `string:["a","b"]`) or a JSON tensor.
    Call {
        /// Method name.
        name: String,
        /// Arguments, in order.
        args: Vec<String>,
        /// Deadline in milliseconds (0: the server's default).
        #[arg(long, default_value_t = 0)]
        timeout_ms: u64,
        /// Call this version instead of the newest.
        #[arg(long)]
        version: Option<u32>,
        /// Print the outputs as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Unregister every version of a method.
    Delete {
        /// Method name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Manage tenants, their keys and quotas (needs the admin key).
    Tenant {
        #[command(subcommand)]
        command: tenant_cmds::TenantCommand,
    },
    /// Build a guest crate as a component with no WASI imports (cheaper to call than a
    /// wasm32-wasip2 build): `cargo build --target wasm32-unknown-unknown`, release unless a
    /// profile is given, then each cdylib wrapped into `<crate>.component.wasm` beside cargo's
    /// output. Prints each component's path.
    #[command(
        after_help = "Example:\n  wasmrpc build -p my-guest\n  wasmrpc deploy f \
                      target/wasm32-unknown-unknown/release/my_guest.component.wasm"
    )]
    Build {
        /// Arguments for `cargo build`: `-p NAME`, `--manifest-path PATH`, `--profile P`,
        /// `--target-dir DIR`, `--locked`, …
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cargo_args: Vec<std::ffi::OsString>,
    },
}

/// Run the command line; the binary's `main` is only this.
pub fn main() -> ExitCode {
    // The compile child (`runtime/compiler.rs`) before clap: it is not a command for people,
    // and it should start as fast as it can.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(crate::runtime::compiler::SUBCOMMAND) {
        return crate::runtime::compiler::child_main(&args[1..]);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config, settings } => serve::run(config, *settings),
        Command::Deploy {
            name,
            file,
            export,
            if_changed,
            server,
        } => client_cmds::deploy(&server, &name, &file, export.as_deref(), if_changed),
        Command::List { json, server } => client_cmds::list(&server, json),
        Command::Call {
            name,
            args,
            timeout_ms,
            version,
            json,
            server,
        } => client_cmds::call(&server, &name, &args, timeout_ms, version, json),
        Command::Delete { name, server } => client_cmds::delete(&server, &name),
        Command::Tenant { command } => tenant_cmds::run(&command),
        Command::Build { cargo_args } => build::run(&cargo_args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

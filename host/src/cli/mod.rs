//! The `wasmrpc` command line: `serve`, the client commands `deploy`, `list`, `call`, `delete`,
//! which use the client SDK, the admin's `tenant` commands, `new` for a function's project, and
//! `build` for guest crates and Python and JavaScript sources.

mod args;
mod build;
mod build_js;
mod build_python;
mod build_rust;
mod client_cmds;
mod embedded;
mod new;
mod open_files;
pub mod output;
mod serve;
mod tenant_cmds;
mod toolchains;

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
    /// Register a component under NAME (a new version if NAME exists); a source file or crate is
    /// built first, as `wasmrpc build FILE` builds it.
    #[command(
        after_help = "Examples:\n  wasmrpc deploy softmax app.py\n  wasmrpc deploy matmul \
                            app.ts --toolchains ~/.cache/wasmrpc\n  wasmrpc deploy f my_guest.wasm"
    )]
    Deploy {
        /// Name to register the method under.
        name: String,
        /// A component (.wasm), or a source to build first: app.py, app.js, app.mjs, app.ts, or a
        /// Rust guest crate's directory or Cargo.toml (a source's component is written beside it).
        file: PathBuf,
        /// Where a source build's toolchains are found or installed (default: .wasmrpc/ beside
        /// the source file).
        #[arg(long, env = "WASMRPC_TOOLCHAINS")]
        toolchains: Option<PathBuf>,
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
    /// Start a function: a new directory NAME with one documented example function (`scale`)
    /// and its test, the manifest, the build settings and a README of three commands. It builds
    /// with `wasmrpc build` and deploys with `wasmrpc deploy NAME` as it stands.
    #[command(
        after_help = "Examples:\n  wasmrpc new scale\n  wasmrpc new scale-py --lang python\n  \
                      wasmrpc new scale-js --lang js --dir ~/work"
    )]
    New {
        /// The project's name: its directory, its package, and the method name its README
        /// deploys under.
        name: String,
        /// The language of the function.
        #[arg(long, value_enum, default_value_t = new::Lang::Rust)]
        lang: new::Lang,
        /// Where to make the directory NAME (default: here).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build a component from a Python or JavaScript/TypeScript source, or from a Rust guest
    /// crate. FILE's name says which: `app.py` is built with componentize-py, `app.js`,
    /// `app.mjs` and `app.ts` with esbuild and componentize-js, each found or installed (pinned
    /// versions) in a project-local directory, `.wasmrpc/` beside FILE unless `--toolchains`
    /// names another; the component is written beside FILE (`app.wasm`) or to `-o PATH`. A
    /// crate (a directory, a Cargo.toml, or no FILE and cargo's own arguments) is built with
    /// `cargo build --target wasm32-unknown-unknown`, release unless a profile is given, each
    /// cdylib wrapped into `<crate>.component.wasm` beside cargo's output: a component with no
    /// WASI imports. Prints each component's path on stdout, progress on stderr.
    #[command(
        after_help = "Examples:\n  wasmrpc build app.py\n  wasmrpc build app.ts -o \
                            dist/app.wasm --toolchains ~/.cache/wasmrpc\n  wasmrpc build \
                            guests/my-guest\n  wasmrpc build -p my-guest\n  wasmrpc deploy f \
                            target/wasm32-unknown-unknown/release/my_guest.component.wasm"
    )]
    Build {
        /// Write the component here (a source file, or a crate that builds one component).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
        /// Where toolchains are found or installed (default: .wasmrpc/ beside FILE); one
        /// directory may serve many projects.
        #[arg(long, env = "WASMRPC_TOOLCHAINS")]
        toolchains: Option<PathBuf>,
        /// FILE (app.py, app.js, app.mjs, app.ts, a crate's directory or Cargo.toml) and then,
        /// for a crate, arguments for `cargo build`: `-p NAME`, `--manifest-path PATH`,
        /// `--profile P`, `--target-dir DIR`, `--locked`, …
        #[arg(
            value_name = "FILE | CARGO_ARGS",
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        args: Vec<std::ffi::OsString>,
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
            toolchains,
            export,
            if_changed,
            server,
        } => build::for_deploy(&file, toolchains.as_deref()).and_then(|file| {
            client_cmds::deploy(&server, &name, &file, export.as_deref(), if_changed)
        }),
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
        Command::New { name, lang, dir } => {
            new::run(&name, lang, &dir.unwrap_or_else(new::default_parent))
        }
        Command::Build {
            output,
            toolchains,
            args,
        } => build::run(output, toolchains, &args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

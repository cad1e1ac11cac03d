//! `wasmrpc serve`: set up tracing, resolve settings, bind, print the address, run until a signal.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;

use crate::app::App;
use crate::config::ServeSettings;
use crate::runtime::Compiler;

/// The most the NATS client may log (`crate::redact`: no credential in a log line).
const NATS_CLIENT_LOG: &str = "async_nats=info";

pub fn run(config_file: Option<PathBuf>, flags: ServeSettings) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("WASMRPC_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info"))
                // The NATS client's debug events print the server's URL whole, password and
                // all (`server = ServerAddr(Url { password: Some(…) })`): never below info.
                .add_directive(NATS_CLIENT_LOG.parse().expect("a valid directive")),
        )
        .with_writer(std::io::stderr)
        // Colours only for a person at a terminal: a log file or journal gets plain text, and
        // each request's context is written without escape codes.
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        // Each request's context is printed by the format, with no span a request.
        .event_format(crate::log_format::WithRequestContext)
        .init();
    crate::api::context::printed_by_the_format();
    let settings = match &config_file {
        Some(path) => flags.or(&ServeSettings::from_file(path)?),
        None => flags,
    };
    let mut config = settings.resolve()?;
    let (open_files, too_few) = super::open_files::raise_for(config.serve.max_connections);
    tracing::debug!(open_files, "open-file limit");
    if let Some(warning) = too_few {
        tracing::warn!("{warning}");
    }
    // This binary compiles uploads in children of its own, each with a memory and CPU budget,
    // unless told to use another.
    if config.runtime.compiler == Compiler::InProcess {
        config.runtime.compiler =
            Compiler::this_binary().context("finding the wasmrpc binary to compile with")?;
    }
    // The HTTP workers, tuned as every server's are (`threads/`); the connection threads got
    // their hooks when the settings were resolved.
    let runtime =
        crate::threads::server_runtime("wasmrpc-worker").context("starting the async runtime")?;
    // The server runs as a task, so that the accept loop too runs on an HTTP worker (which
    // keeps to the CPU reserved for answering while tenants contend), not on this thread.
    let server = runtime.spawn(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let address = listener.local_addr()?;
        let grpc = match config.grpc_listen {
            Some(grpc) => Some(
                tokio::net::TcpListener::bind(grpc)
                    .await
                    .with_context(|| format!("binding --grpc-listen {grpc}"))?,
            ),
            None => None,
        };
        let app = match &config.cluster {
            None => App::build(config.clone())?,
            Some(_) => App::build_in_cluster(config.clone(), address).await?,
        };
        for notice in &app.notices {
            eprintln!("wasmrpc: {notice}");
        }
        let scheme = if config.serve.tls.is_some() {
            "https"
        } else {
            "http"
        };
        // One write: a reader may stop after the first line (the tests' does without gRPC).
        let mut lines = format!("wasmrpc listening on {scheme}://{address}\n");
        if let Some(grpc) = &grpc {
            let grpc = grpc.local_addr()?;
            lines.push_str(&format!("wasmrpc gRPC listening on {scheme}://{grpc}\n"));
            tracing::info!(address = %grpc, "serving gRPC");
        }
        {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(lines.as_bytes())?;
            stdout.flush()?;
        }
        tracing::info!(%address, data_dir = %config.data_dir.display(), "serving");
        app.serve(listener, grpc, shutdown_signal()).await?;
        Ok(())
    });
    runtime
        .block_on(server)
        .context("the server's task stopped")?
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

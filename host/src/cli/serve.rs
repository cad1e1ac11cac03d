//! `wasmrpc serve`: set up tracing, resolve settings, bind, print the address, run until a signal.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;

use crate::app::App;
use crate::config::ServeSettings;
use crate::runtime::Compiler;

pub fn run(config_file: Option<PathBuf>, flags: ServeSettings) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("WASMRPC_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
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
    // This binary compiles uploads in children of its own, each with a memory and CPU budget,
    // unless told to use another.
    if config.runtime.compiler == Compiler::InProcess {
        config.runtime.compiler =
            Compiler::this_binary().context("finding the wasmrpc binary to compile with")?;
    }
    // The connection threads (`--connection-threads`, accept/threads.rs) answer with the same
    // priority and CPU reserve as the HTTP workers.
    config.serve.thread_hooks = crate::accept::ThreadHooks {
        on_start: Some(std::sync::Arc::new(|| {
            crate::thread_priority::prefer_on_wakeup();
            crate::execute::Reserve::mark_answering_thread();
        })),
        on_unpark: Some(std::sync::Arc::new(
            crate::execute::Reserve::follow_on_this_thread,
        )),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("wasmrpc-worker")
        // The HTTP workers answer as soon as a request arrives, ahead of guests' threads, and
        // keep to the CPU reserved for answering while busy tenants' guests are kept off it
        // (`execute/reserve.rs`): they check whenever they wake.
        .on_thread_start(|| {
            crate::thread_priority::prefer_on_wakeup();
            crate::execute::Reserve::mark_answering_thread();
        })
        .on_thread_unpark(crate::execute::Reserve::follow_on_this_thread)
        // A finished call's store is reset once the worker has nothing left to do, after the
        // answer is out (`runtime/retire.rs`).
        .on_thread_park(crate::runtime::retire::on_thread_park)
        .build()
        .context("starting the async runtime")?;
    // The server runs as a task, so that the accept loop too runs on an HTTP worker (which
    // keeps to the CPU reserved for answering while tenants contend), not on this thread.
    let server = runtime.spawn(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let address = listener.local_addr()?;
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
        println!("wasmrpc listening on {scheme}://{address}");
        std::io::stdout().flush()?;
        tracing::info!(%address, data_dir = %config.data_dir.display(), "serving");
        app.run(listener, shutdown_signal()).await?;
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

//! wasmrpc host: runs tensor functions as sandboxed WebAssembly components behind an HTTP API.
//!
//! Three rooms, doors one way: `runtime` (wasmtime: compile, instantiate, limits), `registry`
//! (storage of components and registrations, behind an async trait that owns its cache) and
//! `api` (axum routes). `service` offers the operations over methods to the API and to the
//! embeddable server; a call goes through an `execute::Executor` (here: the local runtime,
//! admitted by `admission`), the seam where a cluster will plug in. The wire types come from
//! the `wasmrpc-proto` crate.
//!
//! The public API is what an embedding program needs: [`Server`] (TensorFlow's `rpc.Server`),
//! its [`ServeSettings`] and [`ComponentSource`], and [`server_runtime`], a tokio runtime tuned
//! as `wasmrpc serve`'s for a program that has none of its own; `docs/architecture.md` maps the
//! rest.

mod accept;
mod admission;
mod allocator;
mod api;
mod app;
mod cluster;
mod config;
mod data_dir;
mod error;
mod execute;
mod grpc;
mod log_format;
mod metrics;
mod otel;
mod redact;
mod registry;
mod runtime;
mod server;
mod service;
mod tenancy;
mod threads;

pub use config::ServeSettings;
pub use server::{ComponentSource, Server};
pub use threads::server_runtime;

/// The `wasmrpc` binary's command line (`host/src/main.rs` calls [`cli::main`]). Not an API.
#[doc(hidden)]
pub mod cli;

/// The README's Rust examples (the client's and the embedded server's), compiled with the doc
/// tests so the README cannot drift from the code. They are `no_run`: they need a server or a
/// built component.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme_examples {}

/// Parts the benchmarks measure on their own (`host/benches/`), and the tests drive directly.
/// Not a stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::accept::{ServeOptions, ThreadHooks, serve_connections};
    pub use crate::allocator::Allocator;
    pub use crate::cluster::NatsRegistry;
    pub use crate::cluster::trust::{ClusterSecret, Trust};
    pub use crate::registry::{NewRegistration, RegistrationLimits, Registry};
    pub use crate::runtime::{Runtime, RuntimeConfig};
    pub use crate::tenancy::TenantId;
    pub use crate::threads::server_runtime;
}

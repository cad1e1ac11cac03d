//! wasmrpc host: runs tensor functions as sandboxed WebAssembly components behind an HTTP API.
//!
//! Three rooms, doors one way: [`runtime`] (wasmtime: compile, instantiate, limits), [`registry`]
//! (storage of components and registrations, behind an async trait that owns its cache) and
//! [`api`] (axum routes). [`service`] offers the operations over methods to the API and to the
//! embeddable server; a call goes through an [`execute::Executor`] (here: the local runtime,
//! admitted by [`admission`]), the seam where a cluster will plug in. The wire types come from
//! the `wasmrpc-proto` crate.

pub mod admission;
pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod embed;
pub mod execute;
pub mod metrics;
pub mod registry;
pub mod runtime;
pub mod server;
pub mod service;
pub mod tenant;

pub use embed::{ComponentSource, Server};

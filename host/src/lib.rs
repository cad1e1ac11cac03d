//! wasmrpc host: runs tensor functions as sandboxed WebAssembly components behind an HTTP API.
//!
//! Three rooms, doors one way: [`runtime`] (wasmtime: compile, instantiate, limits), [`registry`]
//! (storage of components and registrations) and [`api`] (axum routes); [`service`] joins the
//! first two for the API and for the embeddable server.

pub mod api;
pub mod app;
pub mod cli;
pub mod config;
pub mod embed;
mod index;
pub mod metrics;
pub mod registry;
pub mod runtime;
pub mod server;
pub mod service;

pub use embed::{ComponentSource, Server};

//! The memory allocator of the `wasmrpc` binary.
//!
//! The binary allocates with mimalloc ([`Allocator`], installed in `main.rs`): a call allocates
//! and frees a few hundred small objects (the request, the futures of its layers, the store),
//! and glibc's allocator spent about a tenth of the server's CPU on them (docs/benchmarks.md,
//! "The allocator"). Calls on 16 MiB tensors take as long with it as with glibc tuned by
//! `mallopt` to keep its large buffers, which `wasmrpc serve` did before. The library leaves
//! the choice to whoever embeds it.

/// The allocator of the `wasmrpc` binary (and of the benchmarks that measure it).
pub type Allocator = mimalloc::MiMalloc;

/// Environment for a child process of this binary that lowers its own address-space limit
/// (the `__compile` child, `runtime/compiler.rs`): mimalloc would otherwise reserve 1 GiB of
/// address space at its first allocation, which leaves nothing under a 1 GiB limit. Without
/// the reservation it maps memory as it needs it, and an allocation past the limit fails as
/// with glibc: "memory allocation of N bytes failed".
pub const CONFINED_CHILD_ENV: [(&str, &str); 1] = [("MIMALLOC_ARENA_RESERVE", "0")];

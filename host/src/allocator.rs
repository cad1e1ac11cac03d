//! The process's memory allocator, tuned for a server that moves large tensors.
//!
//! The `wasmrpc` binary allocates with mimalloc ([`Allocator`], installed in `main.rs`): a
//! call allocates and frees a few hundred small objects (the request, the futures of its
//! layers, the store), and glibc's allocator spent about a fifth of the server's CPU on them
//! (docs/benchmarks.md, "The allocator"). The library leaves the choice to whoever embeds it.

/// Let glibc's allocator serve buffers up to 256 MiB from its heaps and keep up to as much freed
/// memory, instead of mapping every buffer over 32 MiB afresh and unmapping it when
/// freed. (With [`Allocator`] installed, as in the `wasmrpc` binary, this only concerns what C
/// code in the process allocates; the benchmarks' figures before mimalloc were taken with it.) A call on large tensors allocates the same few buffers (the body, the outputs) every
/// time; fresh mappings page-fault on every byte, which made a 16 MiB float32 `add` about a
/// third slower (docs/benchmarks.md). The price is up to that much memory staying resident
/// after a burst of large calls (docs/operations.md).
///
/// Called at start-up by `wasmrpc serve`, and by the benchmarks so that they measure the server
/// as it runs; an embedding program keeps its own allocator settings.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_memory_for_reuse() {
    const KEPT_FOR_REUSE: libc::c_int = 256 << 20;
    // SAFETY: mallopt only changes allocator parameters; it is called before any other thread
    // exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, KEPT_FOR_REUSE);
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_FOR_REUSE);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_memory_for_reuse() {}

/// The allocator of the `wasmrpc` binary (and of the benchmarks that measure it).
pub type Allocator = mimalloc::MiMalloc;

/// Environment for a child process of this binary that lowers its own address-space limit
/// (the `__compile` child, `runtime/compiler.rs`): mimalloc would otherwise reserve 1 GiB of
/// address space at its first allocation, which leaves nothing under a 1 GiB limit. Without
/// the reservation it maps memory as it needs it, and an allocation past the limit fails as
/// with glibc: "memory allocation of N bytes failed".
pub const CONFINED_CHILD_ENV: [(&str, &str); 1] = [("MIMALLOC_ARENA_RESERVE", "0")];

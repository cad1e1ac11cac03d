//! The process's memory allocator, tuned for a server that moves large tensors.

/// Let glibc's allocator serve buffers up to 256 MiB from its heaps and keep up to as much freed
/// memory, instead of mapping every buffer over 32 MiB afresh and unmapping it when
/// freed. A call on large tensors allocates the same few buffers (the body, the outputs) every
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

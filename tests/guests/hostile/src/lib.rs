//! A component whose methods misbehave on purpose, one failure mode each, for the host's sandbox
//! tests. Every method takes one float32 tensor `x` of any shape (a scalar will do).
//!
//! | method | what it does | what the host should answer |
//! |---|---|---|
//! | `spin` | loops forever | DEADLINE_EXCEEDED |
//! | `memory_bomb` | allocates and touches 1 MiB chunks forever | RESOURCE_EXHAUSTED |
//! | `recurse` | recurses without bound, 256+ bytes a frame | INTERNAL (stack overflow trap) |
//! | `deep_recursion` | recurses with wasm locals only, until the host's wasm stack limit | INTERNAL (call stack exhausted) |
//! | `unreachable` | executes `unreachable` | INTERNAL |
//! | `divide_by_zero` | divides an integer by a zero it cannot see coming (a Rust panic) | INTERNAL |
//! | `panic` | `panic!("guest panicked on purpose")` | INTERNAL |
//! | `huge_output` | returns `x[0]` MiB of float32 zeros (256 MiB when `x` is 0 or empty) | RESOURCE_EXHAUSTED past the output cap |
//! | `log_flood` | logs 100 000 lines of 1 KiB, prints as many to stdout and stderr, returns `x` | `x`, logs capped |
//! | `flood_then_panic` | writes 1 MiB to stderr, then `panic!("guest panicked after a flood")` | INTERNAL, the message ending with the panic, not the flood's start |
//! | `fail` | returns `failed-precondition` | FAILED_PRECONDITION |
//! | `exit` | prints a line, then `std::process::exit(3)` | INTERNAL (the guest exited with status 1: WASI 0.2's `exit` carries only failure or success) |
//! | `echo` | returns `x` | `x`: the component still works |
//! | `write_marker` | leaves `WASMRPC-MARKER` all over `x` MiB of its heap (1 to 48), returns `x` | `x` |
//! | `write_scattered_marker` | leaves `WASMRPC-MARKER` at the start of every other 4 KiB page of `x` MiB of its heap (1 to 48): hundreds of separate dirty regions, returns `x` | `x` |
//! | `scan_marker` | grows its memory by 16 MiB, then scans its whole heap for `WASMRPC-MARKER`: uint8 scalar 1 if found, else 0 | 0 in a fresh instance |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-hostile`.

use std::hint::black_box;

use wasmrpc_guest::{Error, Tensor, log};

/// What `write_marker` leaves behind and `scan_marker` looks for.
const MARKER: &[u8] = b"WASMRPC-MARKER";

/// Loops forever, incrementing a counter the optimiser cannot see through.
#[wasmrpc_guest::method]
pub fn spin(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    let mut counter = 0u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates 1 MiB chunks, writes every byte of each and keeps them all, forever.
#[wasmrpc_guest::method]
pub fn memory_bomb(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        // A non-zero fill so that every page is written, not just mapped.
        let chunk = vec![black_box(0xa5u8); 1 << 20];
        chunks.push(black_box(chunk));
    }
}

/// One level of unbounded recursion, with a 256-byte array on the (shadow) stack.
#[inline(never)]
fn dive(depth: u64, frame: [u8; 256]) -> u64 {
    let mut local = black_box(frame);
    local[(depth % 256) as usize] = depth as u8;
    // Never true; opaque to the optimiser, so the recursion is neither unconditional nor removable.
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = dive(black_box(depth + 1), local);
    black_box(below).wrapping_add(u64::from(local[0]))
}

/// Recurses until the stack overflows.
#[wasmrpc_guest::method]
pub fn recurse(x: Tensor<f32>) -> Tensor<f32> {
    let depth = dive(0, [0; 256]);
    Tensor::scalar(black_box(depth) as f32 + x.len() as f32)
}

/// Executes the wasm `unreachable` instruction (aborts the process on other targets).
#[wasmrpc_guest::method]
pub fn unreachable(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort();
}

/// Divides by a zero read through `black_box`: Rust panics with "attempt to divide by zero".
#[wasmrpc_guest::method]
pub fn divide_by_zero(x: Tensor<f32>) -> Tensor<f32> {
    let numerator = black_box(x.len() as i64 + 1);
    let zero = black_box(0i64);
    Tensor::scalar((numerator / zero) as f32)
}

/// Panics with "guest panicked on purpose".
#[wasmrpc_guest::method]
pub fn panic(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    panic!("guest panicked on purpose")
}

/// Recurses without a shadow-stack frame, so the host's wasm stack limit (not the guest's own
/// stack in linear memory) is what stops it.
#[wasmrpc_guest::method]
pub fn deep_recursion(x: Tensor<f32>) -> Tensor<f32> {
    black_box(depth(black_box(u64::MAX)));
    x
}

#[inline(never)]
fn depth(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        // `black_box` on the result stops LLVM from turning this into a loop.
        black_box(depth(n - 1)).wrapping_add(1)
    }
}

/// Size of `huge_output`'s result when `x` does not give one: 256 MiB.
const DEFAULT_HUGE_MIB: usize = 256;

/// Returns `x[0]` MiB (default 256 MiB) of float32 zeros, or `resource-exhausted` if it cannot
/// even allocate them.
#[wasmrpc_guest::method]
pub fn huge_output(x: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let mib = x
        .as_slice()
        .first()
        .map(|&v| v as usize)
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_HUGE_MIB);
    Tensor::zeros([mib * 1024 * 1024 / 4])
}

/// Lines `log_flood` writes to each of log, stdout and stderr.
const FLOOD_LINES: usize = 100_000;

/// Logs 100 000 lines of 1 KiB, prints as many to stdout and to stderr, then returns `x`.
#[wasmrpc_guest::method]
pub fn log_flood(x: Tensor<f32>) -> Tensor<f32> {
    let line = "x".repeat(1024);
    for _ in 0..FLOOD_LINES {
        log::info(&line);
        println!("{line}");
        eprintln!("{line}");
    }
    x
}

/// Lines of 1 KiB `flood_then_panic` writes to stderr: 1 MiB, far past the host's 64 KiB log cap.
const PANIC_FLOOD_LINES: usize = 1024;

/// Writes 1 MiB to stderr, then panics with "guest panicked after a flood": the panic message
/// comes last, after everything the host's capped log had no room for.
#[wasmrpc_guest::method]
pub fn flood_then_panic(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    let line = "y".repeat(1023);
    for _ in 0..PANIC_FLOOD_LINES {
        eprintln!("{line}");
    }
    panic!("guest panicked after a flood")
}

/// Fails with `failed-precondition`: "precondition failed on purpose".
#[wasmrpc_guest::method]
pub fn fail(x: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    black_box(&x);
    Err(Error::failed_precondition("precondition failed on purpose"))
}

/// Returns one float32 zero in a tensor of `x[0]` dimensions of 1 (default 65, one past the
/// host's rank limit of 64): an output the host must refuse as malformed, however long its shape.
#[wasmrpc_guest::method]
pub fn wide_output(x: Tensor<f32>) -> Result<Tensor<f32>, Error> {
    let rank = x.as_slice().first().map_or(65, |&v| v as usize);
    Tensor::new(vec![1; rank], vec![0.0])
}

/// Returns `x` unchanged.
#[wasmrpc_guest::method]
pub fn echo(x: Tensor<f32>) -> Tensor<f32> {
    x
}

/// Fills `x` MiB of heap (at least 1, at most 48) with `WASMRPC-MARKER` repeated and leaks it,
/// so the bytes stay in this instance's memory; returns `x`. Past a few MiB the marker lands in
/// memory the host serves with huge pages where the kernel offers them.
#[wasmrpc_guest::method]
pub fn write_marker(x: Tensor<f32>) -> Tensor<f32> {
    let mib = x
        .as_slice()
        .first()
        .map_or(1, |&v| v.clamp(1.0, 48.0) as usize);
    let buf: Vec<u8> = MARKER.iter().copied().cycle().take(mib << 20).collect();
    black_box(Vec::leak(buf));
    x
}

/// Leaves `WASMRPC-MARKER` at the start of every other 4 KiB page of `x` MiB of fresh heap (at
/// least 1, at most 48) and leaks it: 128 separate dirty regions per MiB, with clean pages between
/// them. Past its first 32 dirty regions a pooled memory is reset by the rescan patch
/// (third_party/README.md), so the marker tests cover that path; returns `x`.
#[wasmrpc_guest::method]
pub fn write_scattered_marker(x: Tensor<f32>) -> Tensor<f32> {
    let mib = x
        .as_slice()
        .first()
        .map_or(1, |&v| v.clamp(1.0, 48.0) as usize);
    let len = mib << 20;
    // Not initialised: the allocation's fresh pages stay clean until a marker is written.
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let base = buf.as_mut_ptr();
    for offset in (0..len).step_by(8192) {
        // SAFETY: `offset + MARKER.len() <= len`, inside the allocation's capacity; the bytes
        // are written through the raw pointer and never read back as the vector's elements.
        unsafe { std::ptr::copy_nonoverlapping(MARKER.as_ptr(), base.add(offset), MARKER.len()) };
    }
    black_box(base);
    std::mem::forget(buf);
    x
}

/// Grows memory with a fresh 16 MiB allocation, then scans the whole heap, from `__heap_base` to
/// the end of linear memory, for `WASMRPC-MARKER`: a uint8 scalar, 1 if found, else 0. The data
/// segment (which holds the marker as a constant) lies below the heap and is not scanned. On
/// targets other than wasm32 there is no linear memory to scan: always 0.
#[wasmrpc_guest::method]
pub fn scan_marker(x: Tensor<f32>) -> Tensor<u8> {
    black_box(&x);
    let fresh: Vec<u8> = Vec::with_capacity(16 << 20);
    black_box(&fresh);
    let found = heap_contains(MARKER);
    drop(fresh);
    Tensor::scalar(u8::from(found))
}

/// Whether `needle` occurs anywhere between the heap base and the end of linear memory.
#[cfg(target_arch = "wasm32")]
fn heap_contains(needle: &[u8]) -> bool {
    unsafe extern "C" {
        /// The first byte past the stack and data segments; defined by wasm-ld.
        static __heap_base: u8;
    }
    let start = (&raw const __heap_base).addr();
    let end = core::arch::wasm32::memory_size(0).saturating_mul(65536);
    let Some(len) = end.checked_sub(start) else {
        return false;
    };
    // SAFETY: deliberately not sound in Rust's terms, and on purpose: this reads bytes it never
    // wrote (freed blocks, fresh pages, the uninitialised `fresh` allocation), because that is
    // what the test is about. On wasm32 every address in [__heap_base, memory end) is readable
    // linear memory, nothing writes to it during the scan, and the pointer comes from an integer
    // address, so the compiler can assume nothing about the bytes it reads.
    let heap =
        unsafe { std::slice::from_raw_parts(std::ptr::with_exposed_provenance::<u8>(start), len) };
    heap.windows(needle.len())
        .any(|w| w[0] == needle[0] && w == needle)
}

#[cfg(not(target_arch = "wasm32"))]
fn heap_contains(_needle: &[u8]) -> bool {
    false
}

/// Ends the instance through WASI's `exit`, as `std::process::exit` does, after a line on stderr.
#[wasmrpc_guest::method]
pub fn exit(x: Tensor<f32>) -> Tensor<f32> {
    black_box(&x);
    eprintln!("leaving with status 3");
    std::process::exit(black_box(3))
}

wasmrpc_guest::export!(
    spin,
    memory_bomb,
    recurse,
    deep_recursion,
    unreachable,
    divide_by_zero,
    panic,
    huge_output,
    wide_output,
    log_flood,
    flood_then_panic,
    fail,
    exit,
    echo,
    write_marker,
    write_scattered_marker,
    scan_marker,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_healthy_methods_behave() {
        let x = Tensor::from_vec(vec![1.0, 2.0]);
        assert_eq!(echo(x.clone()), x);
        assert_eq!(write_marker(x.clone()), x);
        assert_eq!(write_scattered_marker(x.clone()), x);
        assert_eq!(
            fail(x).unwrap_err(),
            Error::failed_precondition("precondition failed on purpose")
        );
    }

    #[test]
    #[should_panic(expected = "guest panicked on purpose")]
    fn panic_panics() {
        panic(Tensor::scalar(0.0));
    }

    #[test]
    #[should_panic(expected = "guest panicked after a flood")]
    fn flood_then_panic_panics() {
        flood_then_panic(Tensor::scalar(0.0));
    }

    #[test]
    #[should_panic(expected = "attempt to divide by zero")]
    fn divide_by_zero_panics() {
        divide_by_zero(Tensor::scalar(0.0));
    }
}

//! A component that reads the clocks as finely as it can and sleeps past its deadline: what a
//! guest learns of time, and that waiting in a host call does not outlive the deadline.
//!
//! | method | what it does | what the host should answer |
//! |---|---|---|
//! | `monotonic_step` | reads `Instant::now()` in a tight loop until it has seen 20 changes (or 2 s): the smallest change, in nanoseconds | int64 scalar ≥ the host's clock quantum (1 ms) |
//! | `wall_step` | the same with `SystemTime::now()` | int64 scalar ≥ 1 ms |
//! | `sleep` | sleeps `x[0]` milliseconds (`wasi:clocks/monotonic-clock.subscribe-duration` and `poll`), then returns `x` | `x`, or DEADLINE_EXCEEDED at the deadline |
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p guest-coarse-clock`.

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use wasmrpc_guest::Tensor;

/// The smallest nonzero difference between successive readings of `now`, in nanoseconds, over
/// 20 changes or 2 s; `i64::MAX` if it never changed.
fn smallest_step(now: impl Fn() -> Duration) -> i64 {
    let started = Instant::now();
    let mut last = now();
    let mut smallest = u128::MAX;
    let mut changes = 0;
    while changes < 20 && started.elapsed() < Duration::from_secs(2) {
        let reading = black_box(now());
        if reading != last {
            smallest = smallest.min(reading.saturating_sub(last).as_nanos());
            changes += 1;
            last = reading;
        }
    }
    i64::try_from(smallest).unwrap_or(i64::MAX)
}

/// The monotonic clock's smallest step, in nanoseconds.
#[wasmrpc_guest::method]
pub fn monotonic_step() -> Tensor<i64> {
    let origin = Instant::now();
    Tensor::scalar(smallest_step(|| origin.elapsed()))
}

/// The wall clock's smallest step, in nanoseconds.
#[wasmrpc_guest::method]
pub fn wall_step() -> Tensor<i64> {
    Tensor::scalar(smallest_step(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
    }))
}

/// Sleeps `x[0]` milliseconds, then returns `x`.
#[wasmrpc_guest::method]
pub fn sleep(x: Tensor<f32>) -> Tensor<f32> {
    let ms = x.as_slice().first().copied().unwrap_or(0.0).max(0.0);
    std::thread::sleep(Duration::from_secs_f64(f64::from(ms) / 1000.0));
    x
}

wasmrpc_guest::export!(monotonic_step, wall_step, sleep);

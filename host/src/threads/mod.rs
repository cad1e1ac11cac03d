//! The thread choreography of a server: which threads answer and at what priority, where a
//! tenant's guests run, which CPU each keeps to, and what each thread does as it starts, wakes,
//! sleeps and writes an answer. One room, so `wasmrpc serve`, the embedded `Server`, the
//! benchmarks and the Python SDK run the same tuned server.
//!
//! - [`priority`]: short time slices for the threads that answer, lower priorities for busy
//!   tenants' guests.
//! - [`lanes`]: the runtimes a tenant's calls move to as its load grows.
//! - [`reserve`]: while tenants contend, one CPU kept for the threads that answer.
//! - The hooks below: the HTTP workers' ([`server_runtime`]) and the connection threads'
//!   ([`connection_hooks`], handed to the accept loop, which imports none of this), each
//!   resetting a finished call's store after its answer is out (`runtime/retire.rs`).
//!
//! Why each choice, with figures: docs/benchmarks.md ("One event loop a connection", "Fairness
//! between tenants", "A call's own costs, and its reset after the answer").

pub mod lanes;
pub mod priority;
pub mod reserve;

pub use reserve::Reserve;

use std::sync::Arc;

use crate::accept::ThreadHooks;
use crate::runtime::retire;

/// What a thread that answers requests does as it starts: ask for short time slices, and keep to
/// the CPU reserved for answering while tenants contend.
fn start_answering() {
    priority::prefer_on_wakeup();
    Reserve::mark_answering_thread();
}

/// The hooks of the connection threads (`--connection-threads`, `accept/threads.rs`): the same
/// priority and CPU reserve as the HTTP workers; a finished call's store reset, and the next
/// instance made, once the answer is written and when the thread has nothing left to run
/// (`runtime/retire.rs`, `runtime/ahead.rs`).
pub fn connection_hooks() -> ThreadHooks {
    ThreadHooks {
        on_start: Some(Arc::new(|| {
            start_answering();
            retire::tidy_after_each_write();
        })),
        on_unpark: Some(Arc::new(Reserve::follow_on_this_thread)),
        on_park: Some(Arc::new(retire::on_thread_park)),
        after_write: Some(retire::after_write),
    }
}

/// A multi-thread tokio runtime whose workers (named `name`) answer as soon as a request arrives,
/// ahead of guests' threads, keep to the CPU reserved for answering while busy tenants' guests
/// are kept off it (they check whenever they wake), and reset a finished call's store once they
/// have nothing left to do, after the answer is out.
///
/// # Errors
/// The runtime's threads or driver could not start.
pub fn server_runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .on_thread_start(start_answering)
        .on_thread_unpark(Reserve::follow_on_this_thread)
        .on_thread_park(retire::on_thread_park)
        .build()
}

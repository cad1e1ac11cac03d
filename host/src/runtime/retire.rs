//! A finished call's store, dropped after its answer is out rather than before.
//!
//! Dropping a store resets its instance for the next call: the pool finds the pages the guest
//! dirtied (one PAGEMAP_SCAN ioctl) and zeroes them, resets the tables and hands the slots
//! back. For a scalar call that is about a ninth of the server's work on it, and done where the
//! call ends it delays the answer by as much. A thread that answers requests (a connection
//! thread, an HTTP worker of `wasmrpc serve`) instead keeps the store of its last call on a
//! shelf, and drops it when it runs out of work and is about to sleep, on a connection thread
//! also right after it writes to a connection (`accept/tidy.rs`: the answer is out), or when
//! its next call shelves its own store: so with one client the reset happens while the client
//! reads the answer, and under load it costs what it did before. Figures in
//! docs/benchmarks.md ("A call's own costs, and its reset after the answer", "Instances made
//! ahead").
//!
//! Nothing is kept that could leak: the instance's memory is still reset before its slot serves
//! another call, since the slot is not free until the store is dropped. What a shelved store
//! holds is bounded:
//! - one store a thread, [`SHELVED_AT_MOST`] in the process (the pool has that many instance
//!   slots more than admitted calls, `runtime/epoch.rs`, so shelved stores never take a running
//!   call's slot);
//! - only stores whose linear memory is within what the pool keeps resident for a reused slot
//!   anyway ([`shelve`]'s `small_enough`), so holding one a moment longer costs no memory.
//!
//! Elsewhere (the threads of an embedding program's runtime, the lanes slow calls move to) a
//! store is dropped at once, as before.
//!
//! The same shelf holds what the thread makes at those moments: after dropping the finished
//! store, a thread whose last two calls ran the same component makes a fresh instance of it for
//! its next call (`runtime/ahead.rs`).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::Store;

use super::ahead::{Plan, Ready};
use super::sandbox::CallState;

/// The most stores shelved at once in the process.
pub const SHELVED_AT_MOST: usize = 16;

/// How many stores are shelved now, in all threads.
static SHELVED: AtomicUsize = AtomicUsize::new(0);

/// What a thread keeps on its shelf.
enum Kept {
    /// A finished call's store, dropped when the thread tidies (held only to be dropped).
    Finished { _store: Store<CallState> },
    /// A fresh instance for the thread's next call of its component.
    Ready(Ready),
}

thread_local! {
    /// Whether this thread drops its shelf before it sleeps: it has called [`on_thread_park`].
    static SHELVING: Cell<bool> = const { Cell::new(false) };
    /// This thread's shelved store.
    static SHELF: RefCell<Option<Shelved<Kept>>> = const { RefCell::new(None) };
    /// The component of this thread's last call ([`super::Module`]'s id; 0 for none).
    static LAST_MODULE: Cell<u64> = const { Cell::new(0) };
    /// What to make ahead when this thread next tidies.
    static PLAN: RefCell<Option<Plan>> = const { RefCell::new(None) };
    /// Whether this thread also tidies after each write to a connection ([`after_write`]).
    static TIDY_AFTER_WRITES: Cell<bool> = const { Cell::new(false) };
}

/// For tokio's `on_thread_park`: drop this thread's finished store, if any, then make an
/// instance ahead if its last calls asked for one. From its first park on, calls that end on
/// the thread shelve their store, since the thread is known to drop it before it sleeps (a
/// runtime's blocking threads, which never park, never shelve).
pub fn on_thread_park() {
    // `try_with`: nothing to do while the thread's locals are being destroyed.
    let _ = SHELVING.try_with(|s| s.set(true));
    tidy();
}

/// For a connection thread (`accept/threads.rs`), as it starts: besides at park, tidy after
/// each write to a connection ([`after_write`]).
pub fn tidy_after_each_write() {
    TIDY_AFTER_WRITES.with(|t| t.set(true));
}

/// Called after bytes were written to a connection (`accept/tidy.rs`): on a connection thread,
/// drop the finished store and make the next instance now. With one client the thread often
/// finds the next request already there when it looks (hyper reads it in the same turn as it
/// writes the answer), and never parks between the two: about half the requests under
/// `wrk -c1` here. Without this, the reset and the next instance would then fall on that
/// request; here they fall between the answer's `writev` and the next read.
pub fn after_write() {
    if TIDY_AFTER_WRITES.with(Cell::get) {
        tidy();
    }
}

/// Drop this thread's finished store, if any, then make an instance ahead if its last calls
/// asked for one.
fn tidy() {
    let finished = SHELF.try_with(|shelf| {
        let mut shelf = shelf.borrow_mut();
        match shelf.as_ref().and_then(|s| s.value.as_ref()) {
            Some(Kept::Ready(_)) => None,
            _ => shelf.take(),
        }
    });
    drop(finished);
    let Ok(Some(plan)) = PLAN.try_with(|p| p.borrow_mut().take()) else {
        return;
    };
    // Counted before it is made: past the process's limit, nothing is made.
    if SHELVED.load(Ordering::Relaxed) >= SHELVED_AT_MOST {
        return;
    }
    if let Some(ready) = plan.prepare() {
        let refused = SHELF.with(|shelf| put(shelf, &SHELVED, SHELVED_AT_MOST, Kept::Ready(ready)));
        drop(refused);
    }
}

/// Whether this thread shelves: only then is a [`Plan`] worth making.
pub fn shelving() -> bool {
    SHELVING.with(Cell::get)
}

/// Note that this thread is calling component `module_id`, and whether its previous call ran
/// the same one.
pub fn calling(module_id: u64) -> bool {
    LAST_MODULE.with(|last| last.replace(module_id) == module_id)
}

/// This thread's instance made ahead for component `module_id`, if it has one.
pub fn take_ready(module_id: u64) -> Option<Ready> {
    SHELF.with(|shelf| {
        let mut shelf = shelf.borrow_mut();
        let mine = matches!(
            shelf.as_ref().and_then(|s| s.value.as_ref()),
            Some(Kept::Ready(r)) if r.is_of(module_id)
        );
        if !mine {
            return None;
        }
        // Off the shelf (and out of its count) and into the call.
        let mut shelved = shelf.take()?;
        match shelved.value.take() {
            Some(Kept::Ready(ready)) => Some(ready),
            _ => None,
        }
    })
}

/// Drop `store` now, or shelve it if this thread shelves and the store is `small_enough`;
/// `next` is what to make ahead when the thread next tidies.
pub fn shelve(store: Store<CallState>, small_enough: bool, next: Option<Plan>) {
    if !SHELVING.with(Cell::get) {
        drop(store);
        return;
    }
    let replaced = PLAN.with(|p| std::mem::replace(&mut *p.borrow_mut(), next));
    drop(replaced);
    if !small_enough {
        drop(store);
        return;
    }
    let kept = Kept::Finished { _store: store };
    let previous = SHELF.with(|shelf| put(shelf, &SHELVED, SHELVED_AT_MOST, kept));
    // Dropped outside the borrow of the shelf.
    drop(previous);
}

/// A shelved value, counted in its counter until dropped.
struct Shelved<T> {
    value: Option<T>,
    counter: &'static AtomicUsize,
}

impl<T> Drop for Shelved<T> {
    fn drop(&mut self) {
        // The value goes first, then the count: a slot is never counted free before it is.
        drop(self.value.take());
        self.counter.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Put `value` on `shelf` if `counter` stays within `at_most`, returning what must be dropped:
/// the shelf's previous value, or `value` itself when the shelves are full.
fn put<T>(
    shelf: &RefCell<Option<Shelved<T>>>,
    counter: &'static AtomicUsize,
    at_most: usize,
    value: T,
) -> Option<T> {
    let mut shelf = shelf.borrow_mut();
    if let Some(previous) = shelf.as_mut() {
        // This thread's own place is reused: the count does not change.
        return previous.value.replace(value);
    }
    if counter.fetch_add(1, Ordering::Relaxed) >= at_most {
        counter.fetch_sub(1, Ordering::Relaxed);
        return Some(value);
    }
    *shelf = Some(Shelved {
        value: Some(value),
        counter,
    });
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// Counts its drops.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_shelf_holds_the_last_value_and_hands_back_the_one_before() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let drops = Arc::new(AtomicUsize::new(0));
        let shelf = RefCell::new(None);
        assert!(put(&shelf, &COUNT, 4, Tracked(drops.clone())).is_none());
        assert_eq!(COUNT.load(Ordering::Relaxed), 1);
        let previous = put(&shelf, &COUNT, 4, Tracked(drops.clone()));
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(previous);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            1,
            "the first value is handed back"
        );
        assert_eq!(
            COUNT.load(Ordering::Relaxed),
            1,
            "one place, still counted once"
        );
        drop(shelf.borrow_mut().take());
        assert_eq!(drops.load(Ordering::Relaxed), 2);
        assert_eq!(
            COUNT.load(Ordering::Relaxed),
            0,
            "an empty shelf is not counted"
        );
    }

    #[test]
    fn past_the_limit_a_value_is_handed_back_at_once() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let drops = Arc::new(AtomicUsize::new(0));
        let shelves: Vec<_> = (0..3).map(|_| RefCell::new(None)).collect();
        assert!(put(&shelves[0], &COUNT, 2, Tracked(drops.clone())).is_none());
        assert!(put(&shelves[1], &COUNT, 2, Tracked(drops.clone())).is_none());
        let refused = put(&shelves[2], &COUNT, 2, Tracked(drops.clone()));
        assert!(refused.is_some() && shelves[2].borrow().is_none());
        drop(refused);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(COUNT.load(Ordering::Relaxed), 2);
        drop(shelves);
        assert_eq!(COUNT.load(Ordering::Relaxed), 0);
        assert_eq!(drops.load(Ordering::Relaxed), 3);
    }

    fn store() -> Store<CallState> {
        let limiter = crate::runtime::limits::CallLimiter::new(1 << 20, 10, 1, 1, 1);
        Store::new(
            &wasmtime::Engine::default(),
            CallState::new(limiter, 1024, std::time::Instant::now()),
        )
    }

    fn shelved_here() -> bool {
        SHELF.with(|s| s.borrow().is_some())
    }

    #[test]
    fn only_a_thread_that_shelves_keeps_a_small_store_until_it_sleeps() {
        std::thread::spawn(|| {
            shelve(store(), true, None);
            assert!(
                !shelved_here(),
                "a thread that does not shelve drops at once"
            );
            on_thread_park();
            shelve(store(), false, None);
            assert!(
                !shelved_here(),
                "a store too large to keep is dropped at once"
            );
            shelve(store(), true, None);
            assert!(shelved_here());
            on_thread_park();
            assert!(!shelved_here(), "dropped when the thread is about to sleep");
        })
        .join()
        .unwrap();
    }
}

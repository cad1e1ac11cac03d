//! Idle components give their code's pages back.
//!
//! A component loaded from its artifact file (`runtime/kept.rs`) has its compiled code and
//! read-only data mapped from that file: pages of the page cache, which count in the server's
//! resident memory once a call has touched them. A Python component touches about 25 MiB of
//! them (CPython's code and data); a hundred distinct ones called once each held 2 GiB of file
//! pages (docs/benchmarks.md, issue 33) for components nobody was calling any more.
//!
//! So what loading a component touched (about 20 MiB of a Python component's, before any call:
//! a restart loads every registered component) is handed back as soon as it is loaded, and a
//! thread ([`IdleCodeSweeper`]) looks, every few seconds, for components loaded from a file
//! that no call has started for [`RuntimeConfig::release_idle_code_after`] and hands their
//! mapping's pages back with `madvise(MADV_DONTNEED)`. A called component's pages cannot go
//! sooner: each call runs its code and has its memory reset from its image, read through this
//! mapping. For a private mapping of a file whose
//! pages were never written, that only drops this process's page-table entries: the file and
//! the page cache are untouched, and the next call maps each page again on first touch (a minor
//! fault; the kernel maps the neighbours of a faulting page too). Nothing a call sees changes.
//!
//! `MADV_DONTNEED` would discard a page that had been written (a private copy): before the
//! first release, `/proc/self/pagemap` must show every resident page of the range as a file
//! page, or that component's code is never released. A compiled component is mapped read-only
//! and executable, never written, so this only guards against a wasmtime that someday
//! relocates code in place. Components held in memory (a fresh compile whose artifact could not
//! be stored) are anonymous memory and never tracked.
//!
//! [`RuntimeConfig::release_idle_code_after`]: super::RuntimeConfig::release_idle_code_after

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wasmtime::component::Component;

use super::Module;

/// The most time between two looks for idle components.
const SWEEP_AT_MOST_EVERY: Duration = Duration::from_secs(5);

/// Times an idle component's code pages were handed back in this process (`/metrics`); the
/// release after a load is not counted.
static RELEASES: AtomicU64 = AtomicU64::new(0);

/// How many times in this process an idle component's code pages were handed back.
pub fn releases() -> u64 {
    RELEASES.load(Ordering::Relaxed)
}

/// The start of this process's clock for [`CodePages::touch`].
static CLOCK_START: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Milliseconds since [`CLOCK_START`] at `at`.
fn millis_at(at: Instant) -> u64 {
    at.saturating_duration_since(*CLOCK_START).as_millis() as u64
}

/// The pages of a component's artifact file mapping, and when a call last started in it.
#[derive(Debug)]
pub struct CodePages {
    /// Page-aligned addresses of the mapping (the component's image).
    range: Range<usize>,
    /// [`millis_at`] the last call's start.
    last_call: AtomicU64,
    /// The pages have been handed back and no call has started since.
    released: AtomicBool,
    /// [`UNCHECKED`], [`RELEASABLE`] or [`NOT_RELEASABLE`].
    verdict: AtomicU8,
}

const UNCHECKED: u8 = 0;
const RELEASABLE: u8 = 1;
const NOT_RELEASABLE: u8 = 2;

impl CodePages {
    /// The mapping of `component`, loaded from its artifact file just now.
    pub fn of_file(component: &Component) -> Self {
        let image = component.image_range();
        let page = page_size();
        let start = image.start as usize / page * page;
        let end = (image.end as usize).div_ceil(page) * page;
        CodePages {
            range: start..end,
            last_call: AtomicU64::new(millis_at(Instant::now())),
            released: AtomicBool::new(false),
            verdict: AtomicU8::new(UNCHECKED),
        }
    }

    /// A call starts (at `at`): the component is not idle. Writes only when something changes,
    /// so that calls on many threads do not contend for the line.
    #[inline]
    pub fn touch(&self, at: Instant) {
        let now = millis_at(at);
        // Within the same tenth of a second is the same time for a sweep measured in seconds.
        if now.saturating_sub(self.last_call.load(Ordering::Relaxed)) >= 100 {
            self.last_call.store(now, Ordering::Relaxed);
        }
        if self.released.load(Ordering::Relaxed) {
            self.released.store(false, Ordering::Relaxed);
        }
    }

    /// Hand the pages back if no call started for `idle`; whether they were.
    fn release_if_idle(&self, idle: Duration, now: Instant) -> bool {
        if self.released.load(Ordering::Relaxed) {
            return false;
        }
        let last_call = self.last_call.load(Ordering::Relaxed);
        let quiet = millis_at(now).saturating_sub(last_call);
        if quiet < idle.as_millis() as u64 || !self.release() {
            return false;
        }
        RELEASES.fetch_add(1, Ordering::Relaxed);
        // A call that started meanwhile maps again what it needs; marked released, the
        // component would keep those pages until its next call and idle time.
        if self.last_call.load(Ordering::Relaxed) == last_call {
            self.released.store(true, Ordering::Relaxed);
        }
        true
    }

    /// Hand back what loading the component touched: reading its artifact's metadata and, for a
    /// component described at load, running its `signatures()`. A component registered and not
    /// called then holds none of it; the pages a call needs come back with that call.
    fn release_after_load(&self) {
        if self.release() {
            self.released.store(true, Ordering::Relaxed);
        }
    }

    /// `madvise(MADV_DONTNEED)` over the range, if it holds only file pages; whether it was.
    fn release(&self) -> bool {
        if !self.releasable() {
            return false;
        }
        // SAFETY: the range is the component's file mapping, alive while the caller holds its
        // `Module` (the sweeper does); every resident page of it is a file page never written
        // (`releasable`), which MADV_DONTNEED only unmaps, to be mapped again on next touch.
        let advised = unsafe {
            libc::madvise(
                self.range.start as *mut libc::c_void,
                self.range.len(),
                libc::MADV_DONTNEED,
            )
        };
        advised == 0
    }

    /// Whether every resident page of the range is a page of the file (checked once).
    fn releasable(&self) -> bool {
        match self.verdict.load(Ordering::Relaxed) {
            RELEASABLE => true,
            NOT_RELEASABLE => false,
            _ => {
                let ok = only_file_pages(&self.range).unwrap_or(false);
                if !ok {
                    tracing::warn!(
                        bytes = self.range.len(),
                        "a component's code mapping holds written pages: it is never released"
                    );
                }
                let verdict = if ok { RELEASABLE } else { NOT_RELEASABLE };
                self.verdict.store(verdict, Ordering::Relaxed);
                ok
            }
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Whether no page of `range` is resident as anonymous memory (a private copy of a written
/// page): `/proc/self/pagemap` gives 8 bytes a page, bit 63 present, bit 62 swapped, bit 61 a
/// file page (or shared anonymous memory).
fn only_file_pages(range: &Range<usize>) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt as _;
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE: u64 = 1 << 61;
    let page = page_size();
    let pagemap = std::fs::File::open("/proc/self/pagemap")?;
    let mut entries = vec![0u8; range.len() / page * 8];
    pagemap.read_exact_at(&mut entries, (range.start / page * 8) as u64)?;
    Ok(entries.chunks_exact(8).all(|entry| {
        let entry = u64::from_le_bytes(entry.try_into().expect("8 bytes"));
        entry & SWAPPED == 0 && (entry & PRESENT == 0 || entry & FILE != 0)
    }))
}

/// The components whose code may be released, and the thread that releases it.
pub struct IdleCodeSweeper {
    tracked: Arc<Mutex<Vec<Weak<Module>>>>,
    /// Dropped to stop the thread at once.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl IdleCodeSweeper {
    /// Release the code of components idle for `idle`; `None` never does (and starts no thread).
    pub fn start(idle: Option<Duration>) -> Self {
        let tracked: Arc<Mutex<Vec<Weak<Module>>>> = Arc::default();
        let Some(idle) = idle else {
            return IdleCodeSweeper {
                tracked,
                stop: None,
                thread: None,
            };
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let list = tracked.clone();
        let every = (idle / 2).clamp(Duration::from_millis(100), SWEEP_AT_MOST_EVERY);
        let thread = std::thread::Builder::new()
            .name("wasmrpc-idle-code".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    sweep(&list, idle);
                }
            })
            .expect("spawning the idle-code thread");
        IdleCodeSweeper {
            tracked,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Watch `module`, just loaded, if its code is mapped from a file and releasing is on; what
    /// loading it touched is handed back at once.
    pub fn track(&self, module: &Arc<Module>) {
        if let (Some(_), Some(pages)) = (&self.thread, &module.code_pages) {
            pages.release_after_load();
            let mut tracked = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            tracked.push(Arc::downgrade(module));
        }
    }
}

/// One look over the tracked components: forget the dropped ones, release the idle ones.
fn sweep(tracked: &Mutex<Vec<Weak<Module>>>, idle: Duration) {
    let live: Vec<Arc<Module>> = {
        let mut tracked = tracked.lock().unwrap_or_else(|p| p.into_inner());
        tracked.retain(|m| m.strong_count() > 0);
        tracked.iter().filter_map(Weak::upgrade).collect()
    };
    let now = Instant::now();
    for module in &live {
        if let Some(pages) = &module.code_pages
            && pages.release_if_idle(idle, now)
        {
            tracing::debug!(
                module = module.id,
                bytes = pages.range.len(),
                "idle component's code pages handed back"
            );
        }
    }
    // `live` may hold the last reference to a module unregistered meanwhile: it is dropped
    // here, on this thread, as it would have been on a call's.
}

impl Drop for IdleCodeSweeper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private mapping of a file that was only read holds file pages: releasable. After one
    /// of its pages is written (a private copy), it is not.
    #[test]
    fn only_unwritten_file_pages_are_releasable() {
        let page = page_size();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 4 * page]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd as _;
        // SAFETY: a fresh private mapping of a file of 4 pages, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let range = base as usize..base as usize + 4 * page;
        // SAFETY: within the mapping.
        let read: u8 = unsafe { std::ptr::read_volatile((base as *const u8).add(page)) };
        assert_eq!(read, 7);
        assert!(
            only_file_pages(&range).unwrap(),
            "read pages are file pages"
        );
        // SAFETY: within the mapping, which is writable and private.
        unsafe { std::ptr::write_volatile((base as *mut u8).add(2 * page), 1) };
        assert!(
            !only_file_pages(&range).unwrap(),
            "a written page is a private copy"
        );
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(base, 4 * page) };
    }
}

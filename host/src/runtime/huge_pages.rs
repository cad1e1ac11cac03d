//! Transparent huge pages for the pooled linear memories.
//!
//! A call that moves megabytes touches a fresh linear memory page by page: 16 MiB in and out is
//! over 8,000 page faults of 4 KiB, each a trap into the kernel, a zeroed page and a memory-cgroup
//! charge, and the reset after the call unmaps them one by one again. With transparent huge pages
//! the same memory faults in 2 MiB at a time: 16 faults instead of 8,192 (docs/benchmarks.md,
//! row P4). Linux hands out huge pages only where asked (`/sys/kernel/mm/transparent_hugepage/
//! enabled` is `madvise` on most distributions), so the memory pool wasmtime reserves when the
//! engine is created is marked with `madvise(MADV_HUGEPAGE)`.
//!
//! Wasmtime does not say where its pool is, so the pool is found as what it is: the one huge
//! reservation without access that `Engine::new` added to `/proc/self/maps`, at least as large as
//! all its memories together. The advice is only a hint: a kernel without huge pages, or a
//! mapping not found, leaves every call exactly as it was, only slower for large tensors.
//!
//! It is off by default. On this project's machines (virtual machines that hand freed memory
//! back to their host) a freed 2 MiB page was often gone from the host when the next call
//! faulted it in again, and one large call in four then waited about 30 ms: the median call got
//! faster, the mean did not (docs/benchmarks.md, row P4). On a machine that keeps its memory,
//! `WASMRPC_HUGE_PAGES=1` turns it on.
//!
//! Small guests are unaffected: a huge page is used only for a 2 MiB-aligned stretch that lies
//! wholly inside the accessible memory, and a guest's first megabyte or so (its stack and data)
//! never forms one.

use super::config::RuntimeConfig;
use super::epoch::memory_pool_bytes;

/// `WASMRPC_HUGE_PAGES=1` asks for huge pages, `0` does not, whatever
/// [`crate::runtime::RuntimeConfig::pool_huge_pages`] says.
pub const SWITCH_VAR: &str = "WASMRPC_HUGE_PAGES";

/// Whether to ask for huge pages in the pool: only where there is a pool to ask for, as
/// `WASMRPC_HUGE_PAGES` (`1` or `0`) says, else as the configuration does.
pub fn wanted(config: &RuntimeConfig) -> bool {
    let wanted = match std::env::var(SWITCH_VAR).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => config.pool_huge_pages,
    };
    wanted && config.pooling && cfg!(target_os = "linux")
}

/// Marks the memory pool an engine just reserved (the new mappings since `before`) for huge
/// pages. Finding none is not an error: calls work the same, large ones slower.
pub fn advise_new_pool(before: &[Mapping], config: &RuntimeConfig) {
    let after = mappings();
    let pools = new_reservations(before, &after, memory_pool_bytes(config));
    // Every one is advised (`any` would stop at the first).
    if pools.into_iter().filter(|m| advise(*m)).count() == 0 {
        tracing::debug!("no memory pool found to advise for huge pages");
    }
}

/// A mapping of this process's address space: `[start, end)`, and whether it has no access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: usize,
    pub end: usize,
    pub inaccessible: bool,
}

/// The process's mappings now (empty where `/proc/self/maps` cannot be read).
pub fn mappings() -> Vec<Mapping> {
    std::fs::read_to_string("/proc/self/maps")
        .map(|maps| maps.lines().filter_map(parse_line).collect())
        .unwrap_or_default()
}

/// One line of `/proc/self/maps`: `start-end perms offset dev inode [path]`.
fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    Some(Mapping {
        start: usize::from_str_radix(start, 16).ok()?,
        end: usize::from_str_radix(end, 16).ok()?,
        inaccessible: perms.starts_with("---"),
    })
}

/// The mappings in `after` but not in `before` that are inaccessible and at least `min_bytes`
/// long: the reservations an engine made for its pool of memories.
pub fn new_reservations(before: &[Mapping], after: &[Mapping], min_bytes: usize) -> Vec<Mapping> {
    after
        .iter()
        .filter(|m| m.inaccessible && m.end - m.start >= min_bytes && !before.contains(m))
        .copied()
        .collect()
}

/// Asks the kernel for huge pages in `mapping`; returns whether it took the advice.
#[cfg(target_os = "linux")]
pub fn advise(mapping: Mapping) -> bool {
    // SAFETY: MADV_HUGEPAGE changes no contents and no protection, only how later faults in
    // the range are served; the range is a whole mapping of this process.
    unsafe {
        libc::madvise(
            mapping.start as *mut libc::c_void,
            mapping.end - mapping.start,
            libc::MADV_HUGEPAGE,
        ) == 0
    }
}

/// Elsewhere there is nothing to advise.
#[cfg(not(target_os = "linux"))]
pub fn advise(_mapping: Mapping) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0000000-55d0c0021000 r--p 00000000 08:01 1234   /usr/bin/wasmrpc
7cf143d80000-7cf15e000000 rw-p 00000000 00:00 0
7cf15e000000-7f15a0000000 ---p 00000000 00:00 0
7ffd1a3fe000-7ffd1a41f000 rw-p 00000000 00:00 0      [stack]";

    #[test]
    fn reads_each_line_of_the_maps_file() {
        let maps: Vec<_> = MAPS.lines().filter_map(parse_line).collect();
        assert_eq!(maps.len(), 4);
        assert_eq!(
            maps[2],
            Mapping {
                start: 0x7cf1_5e00_0000,
                end: 0x7f15_a000_0000,
                inaccessible: true
            }
        );
        assert!(!maps[1].inaccessible);
        assert_eq!(parse_line("not a mapping"), None);
    }

    #[test]
    fn only_a_new_large_inaccessible_mapping_is_a_pool() {
        let after: Vec<_> = MAPS.lines().filter_map(parse_line).collect();
        let pool = after[2];
        // Before the engine: everything but the pool and the tables' accessible mapping.
        let before = vec![after[0], after[3]];
        assert_eq!(new_reservations(&before, &after, 1 << 30), vec![pool]);
        // Already there before: not this engine's.
        assert_eq!(new_reservations(&after, &after, 1 << 30), vec![]);
        // Smaller than the memories it must hold: not the pool.
        assert_eq!(new_reservations(&before, &after, usize::MAX), vec![]);
    }

    #[test]
    fn the_pool_of_a_real_engine_is_found_and_advised() {
        let config = RuntimeConfig::default();
        let before = mappings();
        let engine =
            wasmtime::Engine::new(&crate::runtime::epoch::engine_config(&config)).expect("engine");
        let after = mappings();
        let found = new_reservations(&before, &after, memory_pool_bytes(&config));
        assert!(
            !found.is_empty(),
            "the engine's memory pool among {after:?}"
        );
        // A kernel built without transparent huge pages refuses the advice (EINVAL).
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            for m in found {
                assert!(advise(m), "madvise(MADV_HUGEPAGE) of {m:?}");
            }
        }
        drop(engine);
    }
}

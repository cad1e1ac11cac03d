//! The heap of a guest built for `wasm32-unknown-unknown` (`wasmrpc build`): a small allocator
//! made for one call per instance.
//!
//! Rust's own allocator on that target asks `memory.grow` for every new region, and a grown
//! memory costs the host two `mprotect` calls and fresh zeroed pages on every call, since each
//! call starts from a fresh instance. This one first hands out a 128 KiB arena that is part of
//! the module's initial memory (zero-filled `.bss`: no bytes in the component, and the host's
//! pool keeps its pages resident), then the initial memory's free tail past `__heap_base`, and
//! only then grows the memory, at least 1 MiB at a time. So a small call never grows its memory.
//!
//! Blocks up to 64 KiB come in power-of-two size classes, each with a free list; larger blocks
//! are whole 64 KiB units with a best-fit free list that splits. The block on top of the heap
//! grows in place on `realloc` (a `Vec` being pushed to), and is given back to the top when
//! freed. The instance lives for one call, so nothing is ever returned to the host and free
//! blocks are not merged. Fresh memory is known to be zero: zeroed allocations of it skip the
//! memset.
//!
//! The logic is generic over where regions come from ([`Regions`]), so native unit tests run it
//! over a buffer.

use std::alloc::Layout;

/// Smallest block: room for a free-list link, and the alignment most allocations need.
const MIN_BLOCK: usize = 16;
/// Blocks up to this size come from power-of-two size classes.
const LARGEST_SMALL: usize = 64 << 10;
/// Number of small size classes: 16, 32, … 64 KiB.
const SMALL_CLASSES: usize = (LARGEST_SMALL / MIN_BLOCK).trailing_zeros() as usize + 1;
/// Larger blocks are whole units of this size.
const LARGE_UNIT: usize = 64 << 10;

/// Where the heap gets memory from.
pub(crate) trait Regions {
    /// A new region of at least `at_least` bytes, as `(start, end)` addresses, or `None` when
    /// there is no more memory. Memory in it is zero and unused.
    fn more(&mut self, at_least: usize) -> Option<(usize, usize)>;
}

/// A free large block: the link and the block's size, stored at its start.
#[repr(C)]
struct LargeFree {
    next: usize,
    size: usize,
}

/// The allocator's state. Addresses are `usize`, 0 meaning none.
pub(crate) struct Heap<R> {
    regions: R,
    /// Next free address of the current region.
    top: usize,
    /// End of the current region.
    end: usize,
    /// Addresses at or above this, up to `end`, have never been handed out: they are zero.
    clean_from: usize,
    /// Heads of the small classes' free lists.
    small: [usize; SMALL_CLASSES],
    /// Head of the large blocks' free list.
    large: usize,
}

fn align_up(addr: usize, align: usize) -> Option<usize> {
    Some(addr.checked_add(align - 1)? & !(align - 1))
}

/// The small class of a layout, if it has one.
fn small_class(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(MIN_BLOCK);
    (size <= LARGEST_SMALL).then(|| {
        size.next_power_of_two().trailing_zeros() as usize - MIN_BLOCK.trailing_zeros() as usize
    })
}

/// The size of a large block for `size` bytes.
fn large_size(size: usize) -> Option<usize> {
    align_up(size, LARGE_UNIT)
}

impl<R: Regions> Heap<R> {
    pub(crate) const fn new(regions: R) -> Self {
        Heap {
            regions,
            top: 0,
            end: 0,
            clean_from: 0,
            small: [0; SMALL_CLASSES],
            large: 0,
        }
    }

    /// A block for `layout`, or null. With `zeroed`, its bytes are zero.
    pub(crate) fn alloc(&mut self, layout: Layout, zeroed: bool) -> *mut u8 {
        let (addr, fresh) = match small_class(layout) {
            Some(class) => {
                let size = MIN_BLOCK << class;
                match self.pop_small(class) {
                    Some(addr) => (addr, false),
                    None => match self.carve(size, size) {
                        Some(carved) => carved,
                        None => return std::ptr::null_mut(),
                    },
                }
            }
            None => {
                let Some(size) = large_size(layout.size()) else {
                    return std::ptr::null_mut();
                };
                let align = layout.align().max(MIN_BLOCK);
                match (align <= MIN_BLOCK)
                    .then(|| self.take_large(size))
                    .flatten()
                {
                    Some(addr) => (addr, false),
                    None => match self.carve(size, align) {
                        Some(carved) => carved,
                        None => return std::ptr::null_mut(),
                    },
                }
            }
        };
        if zeroed && !fresh {
            // SAFETY: `addr` starts a block of at least `layout.size()` bytes this heap owns.
            unsafe { std::ptr::write_bytes(addr as *mut u8, 0, layout.size()) };
        }
        addr as *mut u8
    }

    /// Give back a block `alloc` returned for `layout`.
    ///
    /// # Safety
    /// `ptr` came from this heap's `alloc` or `realloc` with this same layout, and is not used
    /// after.
    pub(crate) unsafe fn dealloc(&mut self, ptr: *mut u8, layout: Layout) {
        let addr = ptr as usize;
        match small_class(layout) {
            Some(class) => {
                // SAFETY: the block is ours, at least MIN_BLOCK bytes and aligned to its size.
                unsafe { *(addr as *mut usize) = self.small[class] };
                self.small[class] = addr;
            }
            None => {
                let size = large_size(layout.size()).expect("allocated, so it rounded");
                if addr + size == self.top {
                    self.top = addr;
                } else {
                    // SAFETY: a large block is at least LARGE_UNIT bytes, aligned to MIN_BLOCK.
                    unsafe {
                        (addr as *mut LargeFree).write(LargeFree {
                            next: self.large,
                            size,
                        })
                    };
                    self.large = addr;
                }
            }
        }
    }

    /// Resize a block; in place when its class holds the new size, or when it is the large block
    /// on top of the heap.
    ///
    /// # Safety
    /// As [`Heap::dealloc`] for `ptr` and `layout`; `new_size` is not zero and, rounded up to
    /// `layout.align()`, does not overflow `isize`.
    pub(crate) unsafe fn realloc(
        &mut self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let addr = ptr as usize;
        // SAFETY: the caller's promise about new_size and the layout's alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (small_class(layout), small_class(new_layout)) {
            // The block is aligned to its class's size, so it serves any smaller class too.
            (Some(old), Some(new)) if new <= old => return ptr,
            (None, None) => {
                let old_size = large_size(layout.size()).expect("allocated, so it rounded");
                if let Some(new_size) = large_size(new_size) {
                    if new_size <= old_size && addr + old_size != self.top {
                        return ptr;
                    }
                    if addr + old_size == self.top && self.extend_top(addr, new_size) {
                        return ptr;
                    }
                }
            }
            _ => {}
        }
        let new = self.alloc(new_layout, false);
        if !new.is_null() {
            // SAFETY: both blocks are ours and distinct; the old one holds layout.size() bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }

    fn pop_small(&mut self, class: usize) -> Option<usize> {
        let head = self.small[class];
        if head == 0 {
            return None;
        }
        // SAFETY: a free block's first word is the link `dealloc` wrote.
        self.small[class] = unsafe { *(head as *const usize) };
        Some(head)
    }

    /// The best-fitting free large block of at least `size` bytes, split if bigger.
    fn take_large(&mut self, size: usize) -> Option<usize> {
        let (mut best, mut best_link): (Option<(usize, usize)>, usize) = (None, 0);
        let (mut link, mut node) = (0usize, self.large);
        while node != 0 {
            // SAFETY: every node on the list is a free large block `dealloc` wrote.
            let free = unsafe { &*(node as *const LargeFree) };
            if free.size >= size && best.is_none_or(|(_, s)| free.size < s) {
                best = Some((node, free.size));
                best_link = link;
                if free.size == size {
                    break;
                }
            }
            link = node;
            node = free.next;
        }
        let (block, block_size) = best?;
        // SAFETY: as above; the rest of a split block is still a free large block.
        unsafe {
            let next = (*(block as *const LargeFree)).next;
            let replacement = if block_size > size {
                let rest = block + size;
                (rest as *mut LargeFree).write(LargeFree {
                    next,
                    size: block_size - size,
                });
                rest
            } else {
                next
            };
            if best_link == 0 {
                self.large = replacement;
            } else {
                (*(best_link as *mut LargeFree)).next = replacement;
            }
        }
        Some(block)
    }

    /// `size` bytes aligned to `align` from the top of the heap, getting a region if needed, and
    /// whether they were never handed out before (so are zero).
    fn carve(&mut self, size: usize, align: usize) -> Option<(usize, bool)> {
        let fits = |top: usize, end: usize| {
            let start = align_up(top, align)?;
            (start.checked_add(size)? <= end).then_some(start)
        };
        let start = match fits(self.top, self.end) {
            Some(start) => start,
            None => {
                self.next_region(size.checked_add(align)?)?;
                fits(self.top, self.end)?
            }
        };
        let fresh = start >= self.clean_from;
        self.top = start + size;
        self.clean_from = self.clean_from.max(self.top);
        Some((start, fresh))
    }

    /// Grow the large block at `addr`, on top of the heap, to `size` bytes.
    fn extend_top(&mut self, addr: usize, size: usize) -> bool {
        let Some(end) = addr.checked_add(size) else {
            return false;
        };
        if end > self.end {
            // Only a region that continues this one keeps the block in place.
            match self.regions.more(end - self.end) {
                Some((start, region_end)) if start == self.end => self.end = region_end,
                Some((start, region_end)) => {
                    self.adopt(start, region_end);
                    return false;
                }
                None => return false,
            }
        }
        self.top = end;
        self.clean_from = self.clean_from.max(end);
        true
    }

    fn next_region(&mut self, at_least: usize) -> Option<()> {
        let (start, end) = self.regions.more(at_least)?;
        self.adopt(start, end);
        Some(())
    }

    /// Continue into a new region: the same one extended when it follows on, else a new top.
    fn adopt(&mut self, start: usize, end: usize) {
        if start != self.end || self.end == 0 {
            self.top = start;
            self.clean_from = start;
        }
        self.end = end;
    }
}

/// The global allocator of a `wasm32-unknown-unknown` guest.
#[cfg(all(target_arch = "wasm32", target_os = "unknown", feature = "heap"))]
mod global {
    use std::alloc::{GlobalAlloc, Layout};
    use std::cell::UnsafeCell;

    use super::{Heap, Regions};

    const PAGE: usize = 64 << 10;
    /// The arena's size; part of the initial memory, so small calls never grow it.
    const ARENA_BYTES: usize = 128 << 10;
    /// The least a grow asks for, so a call that allocates a little at a time grows rarely.
    const MIN_GROW_PAGES: usize = 16;

    #[repr(C, align(16))]
    struct Arena(UnsafeCell<[u8; ARENA_BYTES]>);
    // SAFETY: wasm32-unknown-unknown has a single thread.
    unsafe impl Sync for Arena {}
    static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_BYTES]));

    unsafe extern "C" {
        /// Where the linker put the end of the module's static data: the heap starts here.
        static __heap_base: u8;
    }

    /// The arena, then the initial memory's free tail, then grown memory.
    struct WasmRegions {
        step: u8,
    }

    impl Regions for WasmRegions {
        fn more(&mut self, at_least: usize) -> Option<(usize, usize)> {
            loop {
                let step = self.step;
                self.step = self.step.saturating_add(1).min(2);
                match step {
                    0 => {
                        let start = ARENA.0.get() as usize;
                        if at_least <= ARENA_BYTES {
                            return Some((start, start + ARENA_BYTES));
                        }
                    }
                    1 => {
                        // Only the symbol's address is taken, never its value.
                        let start = &raw const __heap_base as usize;
                        let end = core::arch::wasm32::memory_size(0) * PAGE;
                        if end.saturating_sub(start) >= at_least {
                            return Some((start, end));
                        }
                    }
                    _ => {
                        let pages = at_least.div_ceil(PAGE);
                        for ask in [pages.max(MIN_GROW_PAGES), pages] {
                            let old = core::arch::wasm32::memory_grow(0, ask);
                            if old != usize::MAX {
                                return Some((old * PAGE, (old + ask) * PAGE));
                            }
                        }
                        return None;
                    }
                }
            }
        }
    }

    struct Global(UnsafeCell<Heap<WasmRegions>>);
    // SAFETY: wasm32-unknown-unknown has a single thread.
    unsafe impl Sync for Global {}

    #[global_allocator]
    static GLOBAL: Global = Global(UnsafeCell::new(Heap::new(WasmRegions { step: 0 })));

    // SAFETY: one thread, no reentrancy (the heap never allocates), and the heap's contract
    // is GlobalAlloc's.
    unsafe impl GlobalAlloc for Global {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            unsafe { (*self.0.get()).alloc(layout, false) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            unsafe { (*self.0.get()).alloc(layout, true) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { (*self.0.get()).dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            unsafe { (*self.0.get()).realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regions carved from one buffer, each `more` call the next piece, contiguous unless
    /// `gap` is set; `budget` bytes in all.
    struct Buffer {
        memory: Vec<u128>,
        used: usize,
        gap: usize,
        budget: usize,
    }

    impl Buffer {
        fn new(bytes: usize, gap: usize) -> Self {
            Buffer {
                memory: vec![0; bytes / 16],
                used: 0,
                gap,
                budget: bytes,
            }
        }
        fn base(&self) -> usize {
            self.memory.as_ptr() as usize
        }
    }

    impl Regions for Buffer {
        fn more(&mut self, at_least: usize) -> Option<(usize, usize)> {
            let want = at_least.max(64 << 10);
            let start = self.used + self.gap;
            if start + want > self.budget {
                return None;
            }
            self.used = start + want;
            Some((self.base() + start, self.base() + start + want))
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn size_classes() {
        assert_eq!(small_class(layout(1, 1)), Some(0));
        assert_eq!(small_class(layout(16, 8)), Some(0));
        assert_eq!(small_class(layout(17, 1)), Some(1));
        assert_eq!(small_class(layout(8, 64)), Some(2));
        assert_eq!(small_class(layout(64 << 10, 1)), Some(SMALL_CLASSES - 1));
        assert_eq!(small_class(layout((64 << 10) + 1, 1)), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_and_reused_after_free() {
        let mut heap = Heap::new(Buffer::new(8 << 20, 0));
        let mut blocks = Vec::new();
        for (i, &(size, align)) in [
            (1, 1),
            (24, 8),
            (100, 16),
            (4096, 4096),
            (70_000, 16),
            (3, 1),
        ]
        .iter()
        .enumerate()
        {
            let p = heap.alloc(layout(size, align), false);
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0);
            // SAFETY: the block holds `size` bytes.
            unsafe { std::ptr::write_bytes(p, i as u8 + 1, size) };
            blocks.push((p, size, i as u8 + 1));
        }
        for &(p, size, byte) in &blocks {
            // SAFETY: as written above; no block overlapped another's bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
            assert!(bytes.iter().all(|&b| b == byte));
        }
        let (p, size, _) = blocks[1];
        // SAFETY: allocated above with this layout.
        unsafe { heap.dealloc(p, layout(size, 8)) };
        assert_eq!(heap.alloc(layout(20, 4), false), p, "same class, reused");
    }

    #[test]
    fn zeroed_blocks_are_zero_even_when_reused() {
        let mut heap = Heap::new(Buffer::new(4 << 20, 0));
        for size in [40, 200_000] {
            let l = layout(size, 8);
            let p = heap.alloc(l, false);
            // SAFETY: the block holds `size` bytes.
            unsafe {
                std::ptr::write_bytes(p, 0xAB, size);
                let top_before = heap.top;
                heap.dealloc(p, l);
                if size > LARGEST_SMALL {
                    assert!(heap.top < top_before, "the top block goes back to the top");
                }
            }
            let q = heap.alloc(l, true);
            assert_eq!(q, p);
            // SAFETY: as above.
            assert!(
                unsafe { std::slice::from_raw_parts(q, size) }
                    .iter()
                    .all(|&b| b == 0)
            );
        }
    }

    #[test]
    fn large_blocks_split_best_fit_and_the_top_grows_in_place() {
        let mut heap = Heap::new(Buffer::new(64 << 20, 0));
        let big = layout(1 << 20, 16);
        let a = heap.alloc(big, false);
        let fence = heap.alloc(layout(100_000, 16), false);
        // SAFETY: allocated above.
        unsafe { heap.dealloc(a, big) };
        let part = heap.alloc(layout(200_000, 16), false);
        assert_eq!(part, a, "the freed megabyte is reused");
        let rest = heap.alloc(layout(300_000, 16), false);
        assert_eq!(
            rest as usize,
            a as usize + large_size(200_000).unwrap(),
            "split"
        );
        assert!(!fence.is_null());
    }

    #[test]
    fn the_block_on_top_grows_in_place_across_regions_that_follow_on() {
        let mut heap = Heap::new(Buffer::new(64 << 20, 0));
        let _below = heap.alloc(layout(40, 8), false);
        let top = heap.alloc(layout(100_000, 16), false);
        let mut size = 100_000;
        let mut p = top;
        for _ in 0..6 {
            // SAFETY: `p` holds `size` bytes of this layout.
            p = unsafe { heap.realloc(p, layout(size, 16), size * 2) };
            size *= 2;
        }
        assert_eq!(p, top);
    }

    #[test]
    fn realloc_keeps_contents_across_classes_and_regions() {
        let mut heap = Heap::new(Buffer::new(16 << 20, 4096));
        let mut size = 10;
        let mut p = heap.alloc(layout(size, 1), false);
        // SAFETY: each block holds `size` bytes.
        unsafe {
            for i in 0..size {
                *p.add(i) = i as u8;
            }
            let _other = heap.alloc(layout(10, 1), false);
            while size < 3 << 20 {
                p = heap.realloc(p, layout(size, 1), size * 3);
                size *= 3;
                for i in 0..10 {
                    assert_eq!(*p.add(i), i as u8);
                }
            }
        }
    }

    #[test]
    fn out_of_memory_is_null_not_a_crash() {
        let mut heap = Heap::new(Buffer::new(1 << 20, 0));
        assert!(heap.alloc(layout(2 << 20, 16), false).is_null());
        assert!(
            heap.alloc(layout(isize::MAX as usize - 64, 16), false)
                .is_null()
        );
        assert!(
            !heap.alloc(layout(100, 16), false).is_null(),
            "still usable"
        );
    }
}

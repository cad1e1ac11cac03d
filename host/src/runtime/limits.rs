//! The per-call resource limiter: one memory budget shared by every memory of an instance.
//!
//! wasmtime's own `StoreLimits` caps each memory separately, so a guest with several memories could
//! take several times the cap; here every grow draws on one sum.

use wasmtime::ResourceLimiter;

/// Tracks what one call's instance holds and refuses growth past the configured caps.
#[derive(Debug)]
pub struct CallLimiter {
    memory_cap: usize,
    memory_used: usize,
    table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    /// Set when a memory grow was refused: the call is then RESOURCE_EXHAUSTED, whatever trap follows.
    pub memory_exceeded: bool,
}

impl CallLimiter {
    /// A limiter with `memory_cap` bytes for all memories together.
    pub fn new(
        memory_cap: usize,
        table_elements: usize,
        instances: usize,
        tables: usize,
        memories: usize,
    ) -> Self {
        CallLimiter {
            memory_cap,
            memory_used: 0,
            table_elements,
            instances,
            tables,
            memories,
            memory_exceeded: false,
        }
    }

    /// The memory budget of the call, in bytes.
    pub fn memory_cap(&self) -> usize {
        self.memory_cap
    }

    /// Set the memory budget to `cap` bytes: an instance made ahead of its call
    /// (`runtime/ahead.rs`) gets its call's budget when the call takes it.
    pub fn set_memory_cap(&mut self, cap: usize) {
        self.memory_cap = cap;
    }

    /// Bytes of linear memory the instance holds now.
    pub fn memory_used(&self) -> usize {
        self.memory_used
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        match self.memory_used.checked_add(growth) {
            Some(total) if total <= self.memory_cap => {
                self.memory_used = total;
                Ok(true)
            }
            _ => {
                self.memory_exceeded = true;
                Ok(false)
            }
        }
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        // The grow was approved here but failed below (the pool's own size); count it as the cap.
        self.memory_exceeded = true;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_share_one_budget() {
        let mut l = CallLimiter::new(100, 10, 1, 1, 4);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(
            !l.memory_growing(0, 60, None).unwrap(),
            "second memory must draw on the sum"
        );
        assert!(l.memory_exceeded);
        assert!(l.memory_growing(0, 40, None).unwrap());
        assert_eq!(l.memory_used(), 100);
    }

    #[test]
    fn growth_is_counted_from_the_current_size() {
        let mut l = CallLimiter::new(100, 10, 1, 1, 1);
        assert!(l.memory_growing(0, 50, None).unwrap());
        assert!(l.memory_growing(50, 100, None).unwrap());
        assert!(!l.memory_growing(100, 101, None).unwrap());
    }
}

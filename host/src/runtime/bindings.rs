//! Generated bindings for the `wasmrpc:tensor` world and the SDK's panic channel
//! (`wasmrpc:panic`); private to the runtime.
//!
//! Exports are async so that a guest can be paused at every epoch tick (see `Runtime::new_store` in `mod.rs`); the log
//! import is a plain synchronous host function.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tensor-function",
    exports: { default: async },
    // Arguments are lowered from borrowed slices (`TensorParam<'_>`): a tensor's bytes go from the
    // request body into the guest's memory with no owned copy in between.
    ownership: Borrowing { duplicate_if_necessary: true },
});

pub use wasmrpc::tensor::log::Level;
pub use wasmrpc::tensor::types::{Dtype, Error as GuestError, TensorParam};

/// `wit/panic/report.wit`: how the SDK's panic hook sends its message, in integers.
pub mod panic {
    wasmtime::component::bindgen!({
        path: "../wit/panic",
        world: "report-panics",
    });

    pub use wasmrpc::panic::report;
}

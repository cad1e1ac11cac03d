//! Generated bindings for the `wasmrpc:tensor` world; private to the runtime.
//!
//! Exports are async so that a guest can be paused at every epoch tick (see `Runtime::new_store` in `mod.rs`); the log
//! import is a plain synchronous host function.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tensor-function",
    exports: { default: async },
});

pub use wasmrpc::tensor::log::Level;
pub use wasmrpc::tensor::types::{Dtype, Error as GuestError, MethodSignature, Tensor, TensorSpec};

//! Where a call runs: the seam between the service and the sandbox.
//!
//! The service resolves a method to its [`Registration`] and hands the call to an [`Executor`].
//! [`LocalExecutor`] runs it in this process's runtime, admitted by this process's call slots; a
//! cluster executor will send it to another worker instead, with the same contract.

mod local;
pub mod modules;

pub use local::LocalExecutor;
pub use modules::ModuleCache;

use std::time::Duration;

use wasmrpc_proto::Tensor;

use crate::registry::Registration;
use crate::service::ServiceError;

/// Runs calls of registered methods.
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Run `registration`'s method with `args` (already checked against its signature), finishing
    /// within `deadline` from now, waiting for a slot included.
    ///
    /// Dropping the returned future abandons the call (the guest is stopped with it).
    ///
    /// # Errors
    /// The guest's failure, a refusal to admit the call, or a component that cannot be loaded.
    async fn execute(
        &self,
        registration: &Registration,
        args: Vec<Tensor>,
        deadline: Duration,
    ) -> Result<Vec<Tensor>, ServiceError>;
}

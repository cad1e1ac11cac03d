//! Where a call runs: the seam between the service and the sandbox.
//!
//! The service resolves a method to its [`Registration`] and hands the call to an [`Executor`].
//! [`LocalExecutor`] runs it in this process's runtime, admitted by this process's call slots; a
//! cluster executor will send it to another worker instead, with the same contract.

mod lanes;
mod local;
pub mod modules;
mod reserve;

pub(crate) use reserve::Reserve;

pub use local::LocalExecutor;
pub use modules::ModuleCache;

use std::time::Duration;

use wasmrpc_proto::Tensor;

use crate::admission::TenantShare;
use crate::registry::Registration;
use crate::service::ServiceError;

/// What one call may use: its caller's quota, made concrete.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// The call ends this long after it is handed over, waiting for a slot included.
    pub deadline: Duration,
    /// Linear memory it may hold, in bytes.
    pub memory: usize,
    /// Its tenant's share of the call slots.
    pub share: TenantShare,
}

/// Runs calls of registered methods.
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Run `registration`'s method with `args` (already checked against its signature), within
    /// `limits` (the deadline counts from now, waiting for a slot included), for the tenant that
    /// owns the registration.
    ///
    /// Dropping the returned future abandons the call (the guest is stopped with it).
    ///
    /// # Errors
    /// The guest's failure, a refusal to admit the call, or a component that cannot be loaded.
    async fn execute(
        &self,
        registration: &Registration,
        args: Vec<Tensor>,
        limits: CallLimits,
    ) -> Result<Vec<Tensor>, ServiceError>;
}

//! Running calls in this process: a call slot from admission, the compiled component from the
//! module cache, then a fresh instance in the runtime, on the lane its tenant's load puts it in
//! (`lanes.rs`).

use std::sync::Arc;
use std::time::Instant;

use wasmrpc_proto::Tensor;

use super::lanes::{LaneFailure, Lanes};
use super::{CallLimits, Executor, ModuleCache};
use crate::admission::Admission;
use crate::registry::Registration;
use crate::runtime::Runtime;
use crate::service::ServiceError;

/// The executor that runs every call here.
#[derive(Debug)]
pub struct LocalExecutor {
    runtime: Arc<Runtime>,
    modules: Arc<ModuleCache>,
    admission: Arc<Admission>,
    lanes: Lanes,
}

impl LocalExecutor {
    /// Run calls in `runtime`, with components from `modules`, admitted by `admission`.
    pub fn new(
        runtime: Arc<Runtime>,
        modules: Arc<ModuleCache>,
        admission: Arc<Admission>,
    ) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        LocalExecutor {
            runtime,
            modules,
            admission,
            lanes: Lanes::new(cpus),
        }
    }
}

#[async_trait::async_trait]
impl Executor for LocalExecutor {
    async fn execute(
        &self,
        registration: &Registration,
        args: Vec<Tensor>,
        limits: CallLimits,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let tenant = &registration.tenant;
        // Loading a component on first use does not count against the call's deadline.
        let module = self.modules.get(&registration.digest, tenant).await?;
        let started = Instant::now();
        let slot = self
            .admission
            .admit(tenant, limits.share, limits.deadline)
            .await?;
        let placement = self.lanes.place(tenant, self.admission.running_of(tenant));
        let runtime = self.runtime.clone();
        let export = registration.export.clone();
        let call = Box::pin(async move {
            // The slot goes with the guest: a call abandoned by its client (this future dropped
            // on its lane at the guest's next epoch tick, not at once) keeps it until its instance
            // is gone, so the instance pool never holds more than the admitted calls, besides
            // the finished calls' stores of `runtime/retire.rs`, which have slots of their own.
            let _slot = slot;
            runtime
                .call(
                    &module,
                    &export,
                    args,
                    limits.deadline,
                    started,
                    limits.memory,
                )
                .await
        });
        match self.lanes.run(placement, call).await {
            Ok(result) => Ok(result?),
            Err(LaneFailure::Start(e)) => Err(ServiceError::Unavailable(format!(
                "cannot start a thread to run the call: {e}"
            ))),
            // The guest's task panicked: a bug of the host, not the guest's (whose traps are
            // errors); let it surface as a panic would have.
            Err(LaneFailure::Stopped(e)) if e.is_panic() => {
                std::panic::resume_unwind(e.into_panic())
            }
            Err(LaneFailure::Stopped(e)) => Err(ServiceError::Unavailable(format!(
                "the call was stopped: {e}"
            ))),
        }
    }
}

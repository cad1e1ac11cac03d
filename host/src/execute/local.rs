//! Running calls in this process: the compiled component from the module cache, then a call
//! slot of this worker (admission's last step), then a fresh instance in the runtime, on the lane
//! its tenant's load puts it in (`lanes.rs`).

use std::sync::Arc;
use std::time::Instant;

use wasmrpc_proto::Tensor;

use super::{Call, Executed, Executor, ModuleCache};
use crate::admission::LocalSlots;
use crate::error::ServiceError;
use crate::runtime::{Phases, Runtime};
use crate::service::trace;
use crate::threads::lanes::{LaneFailure, Lanes};

/// The executor that runs every call here.
#[derive(Debug)]
pub struct LocalExecutor {
    runtime: Arc<Runtime>,
    modules: Arc<ModuleCache>,
    slots: Arc<LocalSlots>,
    lanes: Lanes,
}

impl LocalExecutor {
    /// Run calls in `runtime`, with components from `modules`, in this worker's call `slots`.
    pub fn new(runtime: Arc<Runtime>, modules: Arc<ModuleCache>, slots: Arc<LocalSlots>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        LocalExecutor {
            runtime,
            modules,
            slots,
            lanes: Lanes::new(cpus),
        }
    }
}

impl LocalExecutor {
    /// Run `call` here, whatever its placement says (the cluster's executor has decided).
    ///
    /// # Errors
    /// The guest's failure, a refusal of a slot, or a component that cannot be loaded.
    pub async fn run(&self, call: Call<'_>) -> Result<Vec<Tensor>, ServiceError> {
        let Call {
            registration,
            args,
            limits,
            ..
        } = call;
        let tenant = &registration.tenant;
        let traced = crate::otel::enabled();
        // Loading a component on first use does not count against the call's deadline; one
        // lookup when it is loaded already, as it nearly always is.
        let module = match self.modules.ready(&registration.digest) {
            Some(module) => module,
            None => {
                let loading = Instant::now();
                let module = self.modules.get(&registration.digest, tenant).await?;
                if traced {
                    trace::loaded(loading, registration);
                }
                module
            }
        };
        let started = Instant::now();
        let slot = self
            .slots
            .admit(tenant, limits.share, limits.deadline)
            .await?;
        let mut phases = Phases {
            keep_log: traced && trace::wants_log(),
            ..Phases::default()
        };
        let placement = self.lanes.place(tenant, self.slots.running_of(tenant));
        let runtime = self.runtime.clone();
        let export = registration.export.clone();
        let call = Box::pin(async move {
            // The slot goes with the guest: a call abandoned by its client (this future dropped
            // on its lane at the guest's next epoch tick, not at once) keeps it until its instance
            // is gone, so the instance pool never holds more than the admitted calls, besides
            // the finished calls' stores of `runtime/retire.rs`, which have slots of their own.
            let _slot = slot;
            let result = runtime
                .call_in_phases(
                    &module,
                    &export,
                    args,
                    limits.deadline,
                    started,
                    limits.memory,
                    &mut phases,
                )
                .await;
            (result, phases)
        });
        match self.lanes.run(placement, call).await {
            Ok((result, mut phases)) => {
                if traced {
                    trace::ran(started, &mut phases);
                }
                Ok(result?)
            }
            Err(LaneFailure::Start(e)) => Err(ServiceError::unavailable_because(
                "the server could not start a thread to run the call; try again",
                e,
            )),
            // The guest's task panicked: a bug of the host, not the guest's (whose traps are
            // errors); let it surface as a panic would have.
            Err(LaneFailure::Stopped(e)) if e.is_panic() => {
                std::panic::resume_unwind(e.into_panic())
            }
            Err(LaneFailure::Stopped(e)) => Err(ServiceError::unavailable_because(
                "the call was stopped before it finished",
                e,
            )),
        }
    }
}

#[async_trait::async_trait]
impl Executor for LocalExecutor {
    async fn execute(&self, call: Call<'_>) -> Executed {
        Executed::here(self.run(call).await)
    }
}

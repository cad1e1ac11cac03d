//! Running calls in this process: a call slot from admission, the compiled component from the
//! module cache, then a fresh instance in the runtime.

use std::sync::Arc;
use std::time::Instant;

use wasmrpc_proto::Tensor;

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
}

impl LocalExecutor {
    /// Run calls in `runtime`, with components from `modules`, admitted by `admission`.
    pub fn new(
        runtime: Arc<Runtime>,
        modules: Arc<ModuleCache>,
        admission: Arc<Admission>,
    ) -> Self {
        LocalExecutor {
            runtime,
            modules,
            admission,
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
        let _slot = self
            .admission
            .admit(tenant, limits.share, limits.deadline)
            .await?;
        Ok(self
            .runtime
            .call(
                &module,
                &registration.export,
                args,
                limits.deadline,
                started,
                limits.memory,
            )
            .await?)
    }
}

//! What the service asks of the cluster it is in, besides running calls: who the workers are, and
//! the barriers they meet at. The cluster (`cluster/`) implements it; the API reaches it only
//! through the service.

use wasmrpc_proto::cluster::WorkerInfo;

use crate::error::ServiceError;
use crate::tenancy::TenantId;

/// This server's view of its cluster.
#[async_trait::async_trait]
pub trait Peers: Send + Sync + std::fmt::Debug + 'static {
    /// Every live worker, by rank then name (this one included, unless it is leaving).
    fn workers(&self) -> Vec<WorkerInfo>;

    /// This worker's name.
    fn this_worker(&self) -> &str;

    /// Calls this worker is running for other workers now.
    fn serving_now(&self) -> usize;

    /// Arrive at barrier `name` of `tenant` as `member` and wait until `count` members have;
    /// returns the members.
    ///
    /// # Errors
    /// UNAVAILABLE when the cluster's store cannot be reached.
    async fn barrier(
        &self,
        tenant: &TenantId,
        name: &str,
        member: &str,
        count: usize,
    ) -> Result<Vec<String>, ServiceError>;
}

//! Where a call runs: the seam between the service and the sandbox.
//!
//! The service resolves a method to its [`Registration`], admits the call and hands it to an
//! [`Executor`] with its [`Placement`]. [`LocalExecutor`] runs it in this process's runtime, in
//! this process's call slots; the cluster's executor (`cluster::calls`) runs it here or sends it
//! to another worker, which hands it to its own local executor with the limits it carries.

mod local;
pub mod modules;

pub use local::LocalExecutor;
pub use modules::ModuleCache;

use wasmrpc_proto::Tensor;

use crate::admission::CallLimits;
use crate::error::ServiceError;
use crate::registry::Registration;

/// Where a call should run: what its caller asked (`?worker=`), decided once by the service
/// and carried out by its executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On this server (a call without `?worker=`).
    Here,
    /// On the cluster's worker of this name (which may be this one).
    Worker(String),
    /// On any live worker of the cluster (this one included).
    Any,
}

impl Placement {
    /// The placement `?worker=` asks for: none is here, `any` any worker, else that worker.
    pub fn from_worker(worker: Option<&str>) -> Placement {
        match worker {
            None => Placement::Here,
            Some("any") => Placement::Any,
            Some(name) => Placement::Worker(name.to_owned()),
        }
    }
}

/// One call handed to an executor.
#[derive(Debug)]
pub struct Call<'a> {
    /// The registration whose method runs, for the tenant that owns it.
    pub registration: &'a Registration,
    /// Its arguments, already checked against its signature.
    pub args: Vec<Tensor>,
    /// What it may use; the deadline counts from now, waiting for a slot included.
    pub limits: CallLimits,
    /// Where it should run.
    pub placement: &'a Placement,
}

/// What became of a call, and who counted it.
#[derive(Debug)]
pub struct Executed {
    /// The outputs, or why there are none.
    pub result: Result<Vec<Tensor>, ServiceError>,
    /// Another worker answered for the call (it ran there, or was refused there) and counted
    /// it in its own metrics; this server does not count it again.
    pub counted_elsewhere: bool,
}

impl Executed {
    /// A call that ran (or failed) on this server.
    pub fn here(result: Result<Vec<Tensor>, ServiceError>) -> Self {
        Executed {
            result,
            counted_elsewhere: false,
        }
    }
}

/// Runs calls of registered methods.
#[async_trait::async_trait]
pub trait Executor: Send + Sync + 'static {
    /// Run `call` where its placement says. Dropping the returned future abandons the call (the
    /// guest is stopped with it).
    async fn execute(&self, call: Call<'_>) -> Executed;
}

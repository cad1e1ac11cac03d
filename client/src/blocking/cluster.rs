//! The cluster's routes on the blocking client: the mirror of [`crate::cluster`]'s `Client`
//! methods, run on the client's runtime thread.

use std::time::Duration;

use super::Client;
use crate::cluster::{Target, WorkerList};
use crate::error::Error;
use crate::tensor::Tensor;

impl Client {
    /// The live workers of the server's cluster (see [`crate::Client::workers`]).
    ///
    /// # Errors
    /// FAILED_PRECONDITION when the server is not in a cluster; UNAVAILABLE when it cannot be
    /// reached.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    #[track_caller]
    pub fn workers(&self) -> Result<WorkerList, Error> {
        let inner = self.inner.clone();
        self.worker
            .run("Client::workers", async move { inner.workers().await })
    }

    /// Call `method_name` on `target` (see [`crate::Client::call_worker`]).
    ///
    /// # Errors
    /// As [`crate::Client::call_worker`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    ///
    /// ```no_run
    /// # fn demo(client: wasmrpc_client::blocking::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::{Tensor, cluster::Target};
    /// let sum = client.call_worker(Target::Any, "add",
    ///     vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call_worker(
        &self,
        target: Target<'_>,
        method_name: &str,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let inner = self.inner.clone();
        let worker = match target {
            Target::Any => None,
            Target::Worker(w) => Some(w.to_owned()),
        };
        let method_name = method_name.to_owned();
        self.worker.run("Client::call_worker", async move {
            let target = worker.as_deref().map_or(Target::Any, Target::Worker);
            inner.call_worker(target, &method_name, args, timeout).await
        })
    }

    /// Arrive at barrier `name` as `member` and wait for `count` members (see
    /// [`crate::Client::barrier`]).
    ///
    /// # Errors
    /// As [`crate::Client::barrier`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module documentation](super)).
    #[track_caller]
    pub fn barrier(
        &self,
        name: &str,
        member: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<String>, Error> {
        let inner = self.inner.clone();
        let (name, member) = (name.to_owned(), member.to_owned());
        self.worker.run("Client::barrier", async move {
            inner.barrier(&name, &member, count, timeout).await
        })
    }
}

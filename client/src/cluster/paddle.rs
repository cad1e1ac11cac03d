//! Paddle's `paddle.distributed.rpc` over a wasmrpc cluster: [`init_rpc`] connects to any worker
//! (`master_endpoint`) and waits for the cluster to have `world_size` workers; [`Rpc::rpc_sync`]
//! and [`Rpc::rpc_async`] run a registered method on a named worker; the `get_*_worker_info`
//! functions list the workers.
//!
//! | Paddle | wasmrpc-client |
//! |---|---|
//! | `rpc.init_rpc(name, rank, world_size, master_endpoint)` | [`init_rpc`]`(name, rank, world_size, master_endpoint)` |
//! | `rpc.rpc_sync(to, fn, args, timeout)` | [`Rpc::rpc_sync`]`(to, method, args, timeout_s)` |
//! | `rpc.rpc_async(to, fn, args, timeout).wait()` | [`Rpc::rpc_async`]`(..).`[`wait`](RpcFuture::wait)`()` |
//! | `rpc.get_worker_info(name)` | [`Rpc::get_worker_info`] |
//! | `rpc.get_all_worker_infos()` | [`Rpc::get_all_worker_infos`] |
//! | `rpc.get_current_worker_info()` | [`Rpc::get_current_worker_info`] |
//! | `rpc.shutdown()` | [`Rpc::shutdown`] |
//!
//! In Paddle `fn` is a Python function; here it is the name of a method registered in the
//! cluster. A timeout of 0 or less means none, as in Paddle ([`NO_TIMEOUT`]). [`Rpc::shutdown`]
//! waits for this process's own calls, then for the other processes (a barrier of `world_size`
//! members, by name). `init_rpc` makes this process a client of the cluster; to serve functions
//! of its own, a program starts the embeddable server as a worker of the same name and
//! [`Rpc::attach`]es a client of it (docs/cluster.md). A client that is not a worker and calls
//! its own name (Paddle's `rpc_sync("worker0", ...)` in `worker0`) reaches the worker it is
//! connected to.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Target, WorkerInfo};
use crate::client::{Client, StatusOrResult};
use crate::code::Code;
use crate::error::Error;
use crate::tensor::Tensor;

/// Paddle's default timeout: none.
pub const NO_TIMEOUT: f64 = -1.0;

/// The barrier [`Rpc::shutdown`] meets at.
pub const SHUTDOWN_BARRIER: &str = "paddle-shutdown";

/// How often [`init_rpc`] looks at the member list while it waits for `world_size` workers.
const MEMBERS_POLL: Duration = Duration::from_millis(100);

/// This process's handle on the cluster, from [`init_rpc`].
#[derive(Debug, Clone)]
pub struct Rpc {
    client: Client,
    name: String,
    /// The worker calls addressed to `name` go to, when no worker is named `name` (this process
    /// is a client of the cluster, not a worker of it).
    self_alias: Option<String>,
    /// The number of processes `shutdown` waits for (from `init_rpc`).
    world_size: Option<usize>,
    outstanding: Arc<Outstanding>,
}

#[derive(Debug, Default)]
struct Outstanding {
    count: AtomicUsize,
    idle: Notify,
}

/// A call started by [`Rpc::rpc_async`] (Paddle's `FutureWrapper`).
#[derive(Debug)]
pub struct RpcFuture(StatusOrResult);

impl RpcFuture {
    /// The call's outputs, once it completes.
    ///
    /// # Errors
    /// As [`Rpc::rpc_sync`].
    pub async fn wait(&self) -> Result<Vec<Tensor>, Error> {
        self.0.get_value().await
    }
}

/// Connect to the cluster through the worker at `master_endpoint` (`host:port`) as `name`, and
/// wait until it has at least `world_size` live workers (when given).
///
/// `rank` is kept for Paddle's signature; this process is a client, not a worker, so it has no
/// rank in the cluster.
///
/// # Errors
/// UNAVAILABLE when the endpoint cannot be reached; FAILED_PRECONDITION when it is not a worker
/// of a cluster.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmrpc_client::Error> {
/// use wasmrpc_client::Tensor;
/// use wasmrpc_client::cluster::paddle::{NO_TIMEOUT, init_rpc};
/// let rpc = init_rpc("trainer", None, Some(3), "127.0.0.1:8081").await?;
/// let sum = rpc.rpc_sync("w2", "add", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], NO_TIMEOUT).await?;
/// rpc.shutdown().await?;
/// # Ok(()) }
/// ```
pub async fn init_rpc(
    name: &str,
    rank: Option<u32>,
    world_size: Option<usize>,
    master_endpoint: &str,
) -> Result<Rpc, Error> {
    let _ = rank;
    let client = Client::create("http", master_endpoint, name, Duration::from_secs(30)).await?;
    Rpc::attach(client, name, world_size).await
}

/// Paddle's timeout in seconds as a call timeout (0 or less: none).
fn timeout_of(timeout_s: f64) -> Duration {
    if timeout_s > 0.0 {
        Duration::from_secs_f64(timeout_s)
    } else {
        Duration::ZERO
    }
}

impl Rpc {
    /// [`init_rpc`] over a client already connected to a worker (one with a key or TLS, or
    /// one connected to this process's own embedded server): named `name`, it waits until the
    /// cluster has at least `world_size` live workers (when given).
    ///
    /// # Errors
    /// As [`init_rpc`].
    pub async fn attach(
        client: Client,
        name: &str,
        world_size: Option<usize>,
    ) -> Result<Rpc, Error> {
        let list = client.workers().await?;
        // A process that is not itself a worker calls itself through the worker it is
        // connected to (Paddle's `rpc_sync("worker0", ...)` from `worker0`).
        let self_alias = (!list.workers.iter().any(|w| w.name == name)).then_some(list.this);
        let rpc = Rpc {
            client,
            name: name.to_owned(),
            self_alias,
            world_size,
            outstanding: Arc::default(),
        };
        if let Some(world_size) = world_size {
            // The member list has no change feed over HTTP: it is read until it is full.
            while rpc.get_all_worker_infos().await?.len() < world_size {
                tokio::time::sleep(MEMBERS_POLL).await;
            }
        }
        Ok(rpc)
    }

    /// This process's name in the cluster (`init_rpc`'s `name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The worker a call addressed to `to` runs on: `to`, except this process's own name when
    /// no worker has it (then the worker this process is connected to).
    fn route<'a>(&'a self, to: &'a str) -> &'a str {
        match &self.self_alias {
            Some(connected) if to == self.name => connected,
            _ => to,
        }
    }

    /// Run `method` on worker `to` and wait for its outputs.
    ///
    /// # Errors
    /// UNAVAILABLE when `to` is gone (within about 3 s of its death, whatever the timeout);
    /// DEADLINE_EXCEEDED past `timeout_s`; the method's error otherwise.
    pub async fn rpc_sync(
        &self,
        to: &str,
        method: &str,
        args: Vec<Tensor>,
        timeout_s: f64,
    ) -> Result<Vec<Tensor>, Error> {
        self.client
            .call_worker(
                Target::Worker(self.route(to)),
                method,
                args,
                timeout_of(timeout_s),
            )
            .await
    }

    /// Start `method` on worker `to`; [`RpcFuture::wait`] gives its outputs.
    ///
    /// # Panics
    /// Outside a tokio runtime (the call runs as a task).
    pub fn rpc_async(
        &self,
        to: &str,
        method: &str,
        args: Vec<Tensor>,
        timeout_s: f64,
    ) -> RpcFuture {
        let (client, to, method) = (
            self.client.clone(),
            self.route(to).to_owned(),
            method.to_owned(),
        );
        let outstanding = self.outstanding.clone();
        outstanding.count.fetch_add(1, Ordering::AcqRel);
        let timeout = timeout_of(timeout_s);
        RpcFuture(StatusOrResult::spawn_on(
            &tokio::runtime::Handle::current(),
            async move {
                let result = client
                    .call_worker(Target::Worker(&to), &method, args, timeout)
                    .await;
                if outstanding.count.fetch_sub(1, Ordering::AcqRel) == 1 {
                    outstanding.idle.notify_waiters();
                }
                result
            },
        ))
    }

    /// The live worker named `name` (this process's own name, when no worker has it: the
    /// worker it is connected to, as for calls).
    ///
    /// # Errors
    /// NOT_FOUND when no live worker has that name.
    pub async fn get_worker_info(&self, name: &str) -> Result<WorkerInfo, Error> {
        let name = self.route(name);
        self.get_all_worker_infos()
            .await?
            .into_iter()
            .find(|w| w.name == name)
            .ok_or_else(|| Error::new(Code::NotFound, format!("no live worker is named `{name}`")))
    }

    /// Every live worker, by rank then name.
    ///
    /// # Errors
    /// The endpoint cannot be reached.
    pub async fn get_all_worker_infos(&self) -> Result<Vec<WorkerInfo>, Error> {
        Ok(self.client.workers().await?.workers)
    }

    /// The worker named as this process (when a worker of that name serves from it), else the
    /// worker this process is connected to.
    ///
    /// # Errors
    /// The endpoint cannot be reached.
    pub async fn get_current_worker_info(&self) -> Result<WorkerInfo, Error> {
        let list = self.client.workers().await?;
        let this = list.this.clone();
        list.workers
            .iter()
            .find(|w| w.name == self.name)
            .or_else(|| list.workers.iter().find(|w| w.name == this))
            .cloned()
            .ok_or_else(|| Error::new(Code::Unavailable, "the connected worker is not listed"))
    }

    /// Wait for every call this process started with [`Rpc::rpc_async`] to finish, then (when
    /// `init_rpc` was given a `world_size`) for `world_size` processes to call `shutdown` under
    /// distinct names: a barrier, on any worker of the cluster.
    ///
    /// # Errors
    /// UNAVAILABLE when the cluster cannot be reached; DEADLINE_EXCEEDED when the others do not
    /// arrive within the server's longest deadline.
    pub async fn shutdown(&self) -> Result<(), Error> {
        loop {
            let idle = self.outstanding.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.outstanding.count.load(Ordering::Acquire) == 0 {
                break;
            }
            idle.await;
        }
        match self.world_size {
            Some(count) => self
                .client
                .barrier(SHUTDOWN_BARRIER, &self.name, count, Duration::ZERO)
                .await
                .map(|_| ()),
            None => Ok(()),
        }
    }
}

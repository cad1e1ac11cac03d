//! A wasmrpc cluster seen from the client: its workers ([`Client::workers`]), calls on a named
//! worker or on any ([`Client::call_worker`]), and the two distributed APIs built on them:
//! Paddle's `paddle.distributed.rpc` ([`paddle`]) and TensorFlow's `ClusterCoordinator`
//! ([`coordinator`]). Any worker's address reaches the whole cluster (docs/cluster.md).

pub mod coordinator;
pub mod paddle;

use std::time::Duration;

use http::Method;

use crate::client::Client;
use crate::code::Code;
use crate::error::Error;
use crate::tensor::Tensor;

/// One worker of the cluster: Paddle's `WorkerInfo` (name, rank, ip, port).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct WorkerInfo {
    /// Its unique name.
    pub name: String,
    /// Its rank.
    pub rank: u32,
    /// The address it serves HTTP on.
    pub ip: String,
    /// The port it serves HTTP on.
    pub port: u16,
}

/// The answer of `GET /v1/cluster/workers`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct WorkerList {
    /// Every live worker, by rank then name.
    pub workers: Vec<WorkerInfo>,
    /// The worker that answered (the one this client is connected to).
    pub this: String,
}

/// Where a call runs: `Worker("w1")` on that worker, `Any` on any live worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target<'a> {
    /// On the worker of this name.
    Worker(&'a str),
    /// On any live worker (retried on another when the one running it dies).
    Any,
}

impl Client {
    /// The live workers of the cluster the server belongs to.
    ///
    /// # Errors
    /// FAILED_PRECONDITION when the server is not in a cluster; UNAVAILABLE when it cannot be
    /// reached.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// for w in client.workers().await?.workers { println!("{} {}:{}", w.name, w.ip, w.port); }
    /// # Ok(()) }
    /// ```
    pub async fn workers(&self) -> Result<WorkerList, Error> {
        let body = self
            .transport()
            .send(Method::GET, "/v1/cluster/workers", None)
            .await?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                Code::Internal,
                format!("the server's answer could not be read: {e}"),
            )
        })
    }

    /// Arrive at barrier `name` as `member` and wait until `count` members have (`timeout` zero:
    /// the server's longest deadline); returns the members.
    ///
    /// # Errors
    /// DEADLINE_EXCEEDED when they do not arrive in time; FAILED_PRECONDITION outside a cluster.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// let all = client.barrier("epoch-1", "trainer-0", 3, Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn barrier(
        &self,
        name: &str,
        member: &str,
        count: usize,
        timeout: Duration,
    ) -> Result<Vec<String>, Error> {
        wasmrpc_proto::names::check_name(name)
            .map_err(|why| Error::new(Code::InvalidArgument, why))?;
        #[derive(serde::Serialize)]
        struct Arrive<'a> {
            member: &'a str,
            count: usize,
            timeout_ms: u64,
        }
        #[derive(serde::Deserialize)]
        struct Passed {
            arrived: Vec<String>,
        }
        let body = serde_json::to_vec(&Arrive {
            member,
            count,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })
        .map_err(|e| Error::new(Code::InvalidArgument, e.to_string()))?;
        let answer = self
            .transport()
            .send(
                Method::POST,
                &format!("/v1/cluster/barriers/{name}"),
                Some((bytes::Bytes::from(body), wasmrpc_proto::headers::JSON)),
            )
            .await?;
        let passed: Passed = serde_json::from_slice(&answer).map_err(|e| {
            Error::new(
                Code::Internal,
                format!("the server's answer could not be read: {e}"),
            )
        })?;
        Ok(passed.arrived)
    }

    /// Call `method_name` on `target` (`timeout` zero: the server's default deadline).
    ///
    /// # Errors
    /// UNAVAILABLE when the named worker is gone (or, for [`Target::Any`], none is left);
    /// DEADLINE_EXCEEDED past the timeout; the method's or the server's error otherwise.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::{Tensor, cluster::Target};
    /// let sum = client
    ///     .call_worker(Target::Worker("w2"), "add", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
    ///                  Duration::from_secs(5))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_worker(
        &self,
        target: Target<'_>,
        method_name: &str,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        wasmrpc_proto::names::check_name(method_name)
            .map_err(|why| Error::new(Code::InvalidArgument, why))?;
        let worker = match target {
            Target::Any => "any".to_owned(),
            Target::Worker(w) => {
                if w.is_empty()
                    || w.bytes()
                        .any(|b| !(b.is_ascii_alphanumeric() || b"-_/".contains(&b)))
                {
                    return Err(Error::new(
                        Code::InvalidArgument,
                        format!("`{w}` is not a worker name"),
                    ));
                }
                w.replace('/', "%2F")
            }
        };
        // In the client's encoding: binary tensors on the v2 route (the default), or JSON.
        let call = async {
            if self.binary() {
                self.send_binary_call_on(method_name, None, Some(&worker), args, timeout)
                    .await
            } else {
                let path = format!("/v1/methods/{method_name}/call?worker={worker}");
                self.send_json_call_to(&path, args, timeout).await
            }
        };
        if timeout.is_zero() {
            return call.await;
        }
        // The server answers within the timeout (UNAVAILABLE for a dead worker within about 3 s);
        // the grace covers the way back.
        tokio::time::timeout(timeout + Duration::from_secs(5), call)
            .await
            .map_err(|_| {
                Error::new(
                    Code::DeadlineExceeded,
                    format!(
                        "the call to `{method_name}` did not finish within its timeout of {} ms",
                        timeout.as_millis()
                    ),
                )
            })?
    }
}

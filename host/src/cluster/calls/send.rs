//! Sending a call to another worker: the worker named, or the live workers in turn for any,
//! moving on when the one a call went to dies or stops listening; this worker's own turn runs on
//! its local executor.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::{HeaderMap, Request, RequestErrorKind};
use bytes::Bytes;
use wasmrpc_proto::{Code, Tensor, tensor_list};

use super::{
    ANSWER_GRACE, Attempt, Calls, CarriedLimits, LEAVING_ANSWER_GRACE, LIMITS, LIVENESS_CHECK,
    METHOD, TENANT, TIMEOUT_MS, VERSION, subject,
};
use crate::admission::CallLimits;
use crate::error::ServiceError;
use crate::execute::{Call, Executed, LocalExecutor, Placement};
use crate::registry::Registration;

impl Calls {
    /// Run `call` where its placement says: here when that is this worker (by name, or, for any
    /// worker, when this one's turn comes), else on that worker, within the call's deadline.
    ///
    /// An answer from another worker was counted there ([`Executed::counted_elsewhere`]); a call
    /// no worker answered for is this worker's to count.
    pub async fn send(&self, call: Call<'_>, local: &LocalExecutor) -> Executed {
        let started = Instant::now();
        let Call {
            registration,
            args,
            limits,
            placement,
        } = call;
        let here = |args| Call {
            registration,
            args,
            limits,
            placement,
        };
        let carried = CarriedLimits::of(&limits);
        let outgoing = Outgoing {
            registration,
            carried,
            deadline: limits.deadline,
            started,
        };
        match placement {
            // `ClusterExecutor` runs a call placed here itself; this arm keeps `send` whole.
            Placement::Here => Executed::here(local.run(here(args)).await),
            Placement::Worker(worker) if *worker == self.me => {
                Executed::here(local.run(here(args)).await)
            }
            Placement::Worker(worker) => {
                match self.members.get(worker) {
                    None => {
                        return Executed::here(Err(ServiceError::unavailable(format!(
                            "worker `{worker}` is not a live member of the cluster"
                        ))));
                    }
                    Some(w) if w.draining => {
                        return Executed::here(Err(ServiceError::unavailable(format!(
                            "worker `{worker}` is leaving the cluster and takes no new calls"
                        ))));
                    }
                    Some(_) => {}
                }
                let body = match encoded(&args) {
                    Ok(body) => body,
                    Err(e) => return Executed::here(Err(e)),
                };
                match self.attempt(worker, &outgoing, &body).await {
                    Attempt::Done(result) => answered(result),
                    Attempt::Failed(e) => Executed::here(Err(e)),
                    Attempt::Gone(why) => Executed::here(Err(ServiceError::unavailable(why))),
                }
            }
            Placement::Any => {
                let body = match encoded(&args) {
                    Ok(body) => body,
                    Err(e) => return Executed::here(Err(e)),
                };
                let mut tried = HashSet::new();
                loop {
                    let Some(worker) = self.pick(&tried) else {
                        return Executed::here(Err(ServiceError::unavailable(
                            "no live worker is left to run the call",
                        )));
                    };
                    if worker == self.me {
                        let limits = CallLimits {
                            deadline: limits.deadline.saturating_sub(started.elapsed()),
                            ..limits
                        };
                        return Executed::here(
                            local
                                .run(Call {
                                    limits,
                                    ..here(args)
                                })
                                .await,
                        );
                    }
                    match self.attempt(&worker, &outgoing, &body).await {
                        Attempt::Done(result) => return answered(result),
                        Attempt::Failed(e) => return Executed::here(Err(e)),
                        Attempt::Gone(why) => {
                            tracing::info!(worker, why, "retrying a call on another worker");
                            tried.insert(worker);
                        }
                    }
                }
            }
        }
    }

    /// The next live worker in turn that has not been tried. Cut off from NATS, this worker is
    /// the only one a call can reach (a request would wait in the client for the connection).
    fn pick(&self, tried: &HashSet<String>) -> Option<String> {
        if !self.nats_connected() && !tried.contains(&self.me) {
            let here = self.members.get(&self.me).is_some_and(|w| !w.draining);
            if here {
                return Some(self.me.clone());
            }
        }
        let live: Vec<String> = self
            .members
            .serving()
            .into_iter()
            .map(|w| w.name)
            .filter(|n| !tried.contains(n))
            .collect();
        if live.is_empty() {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % live.len();
        Some(live[i].clone())
    }

    /// Whether the connection to NATS is up now.
    fn nats_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Why `worker` is no longer the process a call was sent to (`instance`, as the member list
    /// showed it then), or `None` while it is. Its name alone is not enough: a worker killed
    /// and started again under its name within the TTL is a new process, and the call sent to
    /// the dead one will never be answered.
    fn vanished(&self, worker: &str, instance: Option<&str>) -> Option<String> {
        match (self.members.get(worker), instance) {
            (Some(now), Some(then)) if now.instance == then => None,
            (Some(_), Some(_)) => Some(format!(
                "worker `{worker}` died during the call (a new worker of that name has taken \
                 its place)"
            )),
            _ => Some(format!("worker `{worker}` died during the call")),
        }
    }

    async fn attempt(&self, worker: &str, call: &Outgoing<'_>, body: &Bytes) -> Attempt {
        let left = call.deadline.saturating_sub(call.started.elapsed());
        if left.is_zero() {
            return Attempt::Failed(ServiceError::Remote {
                code: Code::DeadlineExceeded,
                message: "the call's deadline passed before a worker took it".to_owned(),
            });
        }
        let registration = call.registration;
        let mut headers = HeaderMap::new();
        headers.insert(TENANT, registration.tenant.as_str());
        headers.insert(METHOD, registration.name.as_str());
        headers.insert(VERSION, registration.version.to_string().as_str());
        headers.insert(TIMEOUT_MS, left.as_millis().max(1).to_string().as_str());
        headers.insert(
            LIMITS,
            serde_json::to_string(&call.carried)
                .expect("limits serialise")
                .as_str(),
        );
        // A request made while the connection is down would wait in the NATS client and go out
        // when it is back, however long after the caller was answered: never send it.
        if !self.nats_connected() {
            return Attempt::Gone(format!(
                "NATS is not connected: the call was not sent to worker `{worker}`"
            ));
        }
        // The process the call goes to: if the name comes to stand for another, this one died.
        let instance = self.members.get(worker).map(|w| w.instance);
        let payload = match self.outgoing(&mut headers, body).await {
            Ok(p) => p,
            Err(e) => return Attempt::Failed(e),
        };
        let request = Request::new()
            .headers(headers)
            .payload(payload)
            .timeout(Some(left + ANSWER_GRACE));
        // NATS core messages are sent at most once: a request or reply in flight when the
        // connection drops is lost, so an interrupted connection ends the attempt like a death.
        let stats = self.client.statistics();
        let connects = stats.connects.load(Ordering::Relaxed);
        let mut sent = std::pin::pin!(self.client.send_request(subject(worker), request));
        let gone = async {
            let mut tick = tokio::time::interval(LIVENESS_CHECK);
            loop {
                tick.tick().await;
                if let Some(why) = self.vanished(worker, instance.as_deref()) {
                    return why;
                }
                let connected =
                    self.client.connection_state() == async_nats::connection::State::Connected;
                if !connected || stats.connects.load(Ordering::Relaxed) != connects {
                    return format!(
                        "the connection to NATS was interrupted during the call to worker \
                         `{worker}` (it may or may not have run)"
                    );
                }
            }
        };
        let reply = tokio::select! {
            biased;
            reply = &mut sent => reply,
            why = gone => {
                // A worker that leaves answers its last calls first, but its leaving can be
                // seen here before the answer is: wait a moment for an answer on its way.
                match tokio::time::timeout(LEAVING_ANSWER_GRACE, &mut sent).await {
                    Ok(reply) => reply,
                    Err(_) => return Attempt::Gone(why),
                }
            }
        };
        match reply {
            Ok(msg) => Attempt::Done(self.answer(msg).await),
            Err(e) if e.kind() == RequestErrorKind::NoResponders => {
                Attempt::Gone(format!("worker `{worker}` is not serving calls"))
            }
            Err(e) if e.kind() == RequestErrorKind::TimedOut => {
                if let Some(why) = self.vanished(worker, instance.as_deref()) {
                    Attempt::Gone(why)
                } else {
                    Attempt::Done(Err(ServiceError::Remote {
                        code: Code::DeadlineExceeded,
                        message: format!("worker `{worker}` did not answer in time"),
                    }))
                }
            }
            Err(e) => Attempt::Failed(ServiceError::unavailable_because(
                format!("the call could not be sent to worker `{worker}`; try again"),
                e,
            )),
        }
    }
}

/// What every attempt of one call sends.
struct Outgoing<'a> {
    registration: &'a Registration,
    carried: CarriedLimits,
    /// The call's deadline, counted from `started`.
    deadline: Duration,
    started: Instant,
}

/// The outcome of a call another worker took: counted there, whatever it was (one that did not
/// answer in time counts it when it ends).
fn answered(result: Result<Vec<Tensor>, ServiceError>) -> Executed {
    Executed {
        result,
        counted_elsewhere: true,
    }
}

/// A call's arguments as the tensor list another worker reads. Every way a tensor arrives holds
/// it to `MAX_RANK` dimensions, so this cannot fail for a call that was admitted; were it to,
/// the caller's arguments are at fault (INVALID_ARGUMENT), and nothing panics.
fn encoded(args: &[wasmrpc_proto::Tensor]) -> Result<bytes::Bytes, ServiceError> {
    tensor_list::encode(args).map_err(|e| ServiceError::Arguments(e.to_string()))
}

//! Sending a call to another worker: the worker named, or the live workers in turn for any,
//! moving on when the one a call went to dies or stops listening.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::{HeaderMap, Request, RequestErrorKind};
use bytes::Bytes;
use wasmrpc_proto::{Code, Tensor};

use super::{
    ANSWER_GRACE, Attempt, Calls, LEAVING_ANSWER_GRACE, LIVENESS_CHECK, METHOD, QUOTA, TENANT,
    TIMEOUT_MS, Target, VERSION, local, subject,
};
use crate::cluster::wire;
use crate::service::{Caller, Service, ServiceError};

impl Calls {
    /// Run `name` for `caller` on `target`, within `deadline` (already resolved: never zero).
    ///
    /// # Errors
    /// UNAVAILABLE when the named worker is not a member or dies, or no worker is left to try;
    /// DEADLINE_EXCEEDED when no answer came in time; otherwise the callee's own error.
    #[allow(clippy::too_many_arguments)]
    pub async fn call(
        &self,
        service: &Service,
        caller: &Caller,
        target: &Target,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        deadline: Duration,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let started = Instant::now();
        match target {
            Target::Named(worker) if *worker == self.me => {
                local(service, caller, name, version, args, deadline).await
            }
            Target::Named(worker) => {
                match self.members.get(worker) {
                    None => {
                        return Err(ServiceError::Unavailable(format!(
                            "worker `{worker}` is not a live member of the cluster"
                        )));
                    }
                    Some(w) if w.draining => {
                        return Err(ServiceError::Unavailable(format!(
                            "worker `{worker}` is leaving the cluster and takes no new calls"
                        )));
                    }
                    Some(_) => {}
                }
                let body = wire::encode(&args);
                match self
                    .attempt(worker, caller, name, version, &body, deadline, started)
                    .await
                {
                    Attempt::Done(result) => result,
                    Attempt::Gone(why) => Err(ServiceError::Unavailable(why)),
                }
            }
            Target::Any => {
                let body = wire::encode(&args);
                let mut tried = HashSet::new();
                loop {
                    let Some(worker) = self.pick(&tried) else {
                        return Err(ServiceError::Unavailable(
                            "no live worker is left to run the call".to_owned(),
                        ));
                    };
                    if worker == self.me {
                        return local(service, caller, name, version, args, deadline).await;
                    }
                    match self
                        .attempt(&worker, caller, name, version, &body, deadline, started)
                        .await
                    {
                        Attempt::Done(result) => return result,
                        Attempt::Gone(why) => {
                            tracing::info!(worker, why, "retrying a call on another worker");
                            tried.insert(worker);
                        }
                    }
                }
            }
        }
    }

    /// The next live worker in turn that has not been tried.
    fn pick(&self, tried: &HashSet<String>) -> Option<String> {
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

    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        worker: &str,
        caller: &Caller,
        name: &str,
        version: Option<u32>,
        body: &Bytes,
        deadline: Duration,
        started: Instant,
    ) -> Attempt {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Attempt::Done(Err(ServiceError::Remote {
                code: Code::DeadlineExceeded,
                message: "the call's deadline passed before a worker took it".to_owned(),
            }));
        }
        let mut headers = HeaderMap::new();
        headers.insert(TENANT, caller.tenant.as_str());
        headers.insert(METHOD, name);
        if let Some(v) = version {
            headers.insert(VERSION, v.to_string().as_str());
        }
        headers.insert(TIMEOUT_MS, left.as_millis().max(1).to_string().as_str());
        headers.insert(
            QUOTA,
            serde_json::to_string(&caller.quota)
                .expect("a quota serialises")
                .as_str(),
        );
        let payload = match self.outgoing(&mut headers, body).await {
            Ok(p) => p,
            Err(e) => return Attempt::Done(Err(e)),
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
                if self.members.get(worker).is_none() {
                    return format!("worker `{worker}` died during the call");
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
                if self.members.get(worker).is_none() {
                    Attempt::Gone(format!("worker `{worker}` left during the call"))
                } else {
                    Attempt::Done(Err(ServiceError::Remote {
                        code: Code::DeadlineExceeded,
                        message: format!("worker `{worker}` did not answer in time"),
                    }))
                }
            }
            Err(e) => Attempt::Done(Err(ServiceError::Unavailable(format!(
                "the call could not be sent to worker `{worker}`: {e}"
            )))),
        }
    }
}

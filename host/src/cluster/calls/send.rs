//! Sending a call to another worker: the worker named, or the live workers in turn for any,
//! moving on when the one a call went to dies or stops listening; this worker's own turn runs on
//! its local executor.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;

use crate::otel;
use bytes::Bytes;
use futures_util::StreamExt as _;
use wasmrpc_proto::{Code, Tensor, tensor_list};

use super::{
    ANSWER_GRACE, Attempt, Calls, CarriedLimits, LEAVING_ANSWER_GRACE, LIMITS, LIVENESS_CHECK,
    METHOD, OBJECT, TENANT, TIMEOUT_MS, UNTRUSTED_REPLY_GRACE, VERSION, header, subject,
};
use crate::admission::CallLimits;
use crate::cluster::calls::payload::Leftover;
use crate::cluster::trust::Trust;
use crate::cluster::trust::{Refused, Untrusted};
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

    /// Send `call` to `worker` once, in a `forward` span (when traced) whose context goes with
    /// it: the spans there are its children.
    async fn attempt(&self, worker: &str, call: &Outgoing<'_>, body: &Bytes) -> Attempt {
        let Some(parent) = crate::otel::request::current_context() else {
            return self.attempt_in(worker, call, body, None).await;
        };
        let name = &call.registration.name;
        let started = Instant::now();
        let Some(mut span) = otel::start(
            Some(&parent),
            format!("forward {name}"),
            otel::Kind::Client,
            started,
        ) else {
            return self.attempt_in(worker, call, body, Some(&parent)).await;
        };
        span.set("rpc.system", "wasmrpc");
        span.set("rpc.method", name.clone());
        span.set("messaging.system", "nats");
        span.set("messaging.destination.name", subject(worker));
        span.set("wasmrpc.worker", worker.to_owned());
        span.set("wasmrpc.bytes_in", body.len());
        let attempt = self
            .attempt_in(worker, call, body, Some(&span.context()))
            .await;
        match &attempt {
            Attempt::Done(Ok(_)) => span.set("wasmrpc.code", "OK"),
            Attempt::Done(Err(e)) | Attempt::Failed(e) => {
                span.set("wasmrpc.code", e.code().as_str());
                span.fail(e.public_message().unwrap_or_default());
            }
            Attempt::Gone(why) => {
                span.set("wasmrpc.code", "UNAVAILABLE");
                span.fail(why.clone());
            }
        }
        span.end_at(Instant::now());
        attempt
    }

    async fn attempt_in(
        &self,
        worker: &str,
        call: &Outgoing<'_>,
        body: &Bytes,
        trace: Option<&otel::SpanContext>,
    ) -> Attempt {
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
        if let Some(trace) = trace {
            headers.insert(otel::context::TRACEPARENT, trace.traceparent().as_str());
            if let Some(state) = &trace.state {
                headers.insert(otel::context::TRACESTATE, &**state);
            }
        }
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
        // The body's object, if it went through the payload store, goes when this attempt ends,
        // however it ends: read or not, its client there or gone.
        let _request_object = headers.get(OBJECT).map(|name| Leftover {
            payloads: self.payloads.clone(),
            name: name.as_str().to_owned(),
        });
        let subject = subject(worker);
        // Signed once every header is set; the digest covers the body wherever it travels.
        self.trust.sign(&subject, &mut headers, body);
        // The reply comes to an inbox of this call's own, where a reply this worker cannot trust
        // (another secret, a forgery racing the real one) is passed over.
        let inbox = self.client.new_inbox();
        let replies = match self.client.subscribe(inbox.clone()).await {
            Ok(replies) => AwaitedReply {
                replies: Some(replies),
                payloads: self.payloads.clone(),
                trust: self.trust.clone(),
                until: Instant::now() + left + ANSWER_GRACE,
            },
            Err(e) => {
                return Attempt::Failed(ServiceError::unavailable_because(
                    format!("the call could not be sent to worker `{worker}`; try again"),
                    e,
                ));
            }
        };
        // NATS core messages are sent at most once: a request or reply in flight when the
        // connection drops is lost, so an interrupted connection ends the attempt like a death.
        let stats = self.client.statistics();
        let connects = stats.connects.load(Ordering::Relaxed);
        if let Err(e) = self
            .client
            .publish_with_reply_and_headers(subject, inbox, headers, payload)
            .await
        {
            return Attempt::Failed(ServiceError::unavailable_because(
                format!("the call could not be sent to worker `{worker}`; try again"),
                e,
            ));
        }
        let mut replies = replies;
        // In a block of its own: `sent` borrows `replies` until the reply is in.
        let reply = {
            let mut sent = std::pin::pin!(self.reply(&mut replies, left + ANSWER_GRACE));
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
            tokio::select! {
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
            }
        };
        match reply {
            Ok(msg) => {
                let answer = self.answer(msg).await;
                // Read (its object, if any, deleted by the reading): nothing left to collect.
                replies.replies = None;
                Attempt::Done(answer)
            }
            Err(NoReply::NoResponders) => {
                Attempt::Gone(format!("worker `{worker}` is not serving calls"))
            }
            Err(NoReply::Untrusted(why)) => Attempt::Failed(ServiceError::unavailable(format!(
                "worker `{worker}` answered, but not with this worker's cluster secret ({why}): \
                 every worker needs the same --cluster-secret-file; the call may or may not \
                 have run"
            ))),
            Err(NoReply::TimedOut) => {
                if let Some(why) = self.vanished(worker, instance.as_deref()) {
                    Attempt::Gone(why)
                } else {
                    Attempt::Done(Err(ServiceError::Remote {
                        code: Code::DeadlineExceeded,
                        message: format!("worker `{worker}` did not answer in time"),
                    }))
                }
            }
            Err(NoReply::Closed) => Attempt::Failed(ServiceError::unavailable(format!(
                "the connection to NATS closed during the call to worker `{worker}` (it may or \
                 may not have run)"
            ))),
        }
    }

    /// The first reply on `replies` this worker can trust, within `within`. One it cannot
    /// trust is logged and passed over; if no trusted one follows within
    /// [`UNTRUSTED_REPLY_GRACE`], the call ends with why.
    async fn reply(
        &self,
        awaited: &mut AwaitedReply,
        within: Duration,
    ) -> Result<async_nats::Message, NoReply> {
        let Some(replies) = awaited.replies.as_mut() else {
            return Err(NoReply::Closed);
        };
        let until = Instant::now() + within;
        let mut untrusted: Option<(Instant, Untrusted)> = None;
        loop {
            let wait_until =
                untrusted.map_or(until, |(at, _)| until.min(at + UNTRUSTED_REPLY_GRACE));
            match tokio::time::timeout_at(wait_until.into(), replies.next()).await {
                Ok(Some(msg)) => {
                    if msg.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
                        return Err(NoReply::NoResponders);
                    }
                    match self.trust.check(msg.subject.as_str(), msg.headers.as_ref()) {
                        Ok(()) => return Ok(msg),
                        Err(why) => {
                            self.trust.refused(Refused::Reply, why);
                            untrusted.get_or_insert((Instant::now(), why));
                        }
                    }
                }
                Ok(None) => return Err(NoReply::Closed),
                Err(_) => {
                    return Err(
                        untrusted.map_or(NoReply::TimedOut, |(_, why)| NoReply::Untrusted(why))
                    );
                }
            }
        }
    }
}

/// The subscription a call's reply comes to. Dropped before the reply was read (the attempt
/// given up, or its client gone and the call's future dropped), it keeps listening until the
/// call's time is up, in a task of its own, to delete the reply's object from the payload store
/// as soon as it comes, rather than leave it there for the store's whole max age.
struct AwaitedReply {
    replies: Option<async_nats::Subscriber>,
    payloads: async_nats::jetstream::object_store::ObjectStore,
    trust: Trust,
    until: Instant,
}

impl Drop for AwaitedReply {
    fn drop(&mut self) {
        let Some(mut replies) = self.replies.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (payloads, trust, until) = (self.payloads.clone(), self.trust.clone(), self.until);
        runtime.spawn(async move {
            while let Ok(Some(msg)) = tokio::time::timeout_at(until.into(), replies.next()).await {
                if trust
                    .check(msg.subject.as_str(), msg.headers.as_ref())
                    .is_err()
                {
                    continue;
                }
                if let Some(name) = header(&msg, OBJECT) {
                    let _ = payloads.delete(&name).await;
                }
                return;
            }
        });
    }
}

/// Why a call's attempt got no reply it could use.
enum NoReply {
    /// Nobody listens on the worker's subject.
    NoResponders,
    /// None within the time.
    TimedOut,
    /// Only replies this worker cannot trust.
    Untrusted(Untrusted),
    /// The subscription ended (the connection closed).
    Closed,
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

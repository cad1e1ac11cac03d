//! Calls between workers, over NATS request/reply: worker `W` answers on the subject
//! `wasmrpc.call.W`; the request carries the tenant, the method, the version, the time left and the
//! caller's quota in headers, and the arguments in the binary encoding of [`super::wire`]; the
//! reply carries the canonical code and message, and the outputs the same way.
//!
//! A body over the NATS server's max payload travels through the object store `wasmrpc_payloads`
//! instead (the message names the object; its reader deletes it). A call to a named worker that
//! is not a live member, or that dies during the call, is UNAVAILABLE as soon as that is known; a
//! call to any worker goes to the live workers in turn and moves on to another when the one it
//! was sent to dies or stops serving, so it runs at least once (it may run twice when a worker
//! dies after running it but before its reply arrived).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::object_store::{self, ObjectStore};
use async_nats::{HeaderMap, Request, RequestErrorKind};
use bytes::Bytes;
use futures_util::StreamExt as _;
use tokio::io::AsyncReadExt as _;
use tokio::sync::{Notify, Semaphore};
use wasmrpc_proto::{Code, Tensor};

use super::members::{Members, subject_token};
use super::{ClusterError, wire};
use crate::service::{Caller, Service, ServiceError};
use crate::tenancy::{Quota, TenantId};

/// The object store of bodies too large for one message.
pub const PAYLOADS: &str = "wasmrpc_payloads";
/// Room left in a message for its headers when deciding whether its body fits.
const HEADER_ROOM: usize = 8 << 10;
/// How long past its deadline a call may take to answer: the callee loads a component it has not
/// compiled yet outside the call's deadline.
const ANSWER_GRACE: Duration = Duration::from_secs(30);
/// How often a caller checks that the worker running its call is still a member.
const LIVENESS_CHECK: Duration = Duration::from_millis(200);
/// How long leaving waits for one NATS operation (NATS may be down).
pub const NATS_STEP: Duration = Duration::from_secs(2);
/// Calls served at once for other workers (a bound on tasks; admission bounds the running).
const MAX_SERVED: usize = 4096;

const TENANT: &str = "Wasmrpc-Tenant";
const METHOD: &str = "Wasmrpc-Method";
const VERSION: &str = "Wasmrpc-Version";
const TIMEOUT_MS: &str = "Wasmrpc-Timeout-Ms";
const QUOTA: &str = "Wasmrpc-Quota";
const OBJECT: &str = "Wasmrpc-Object";
const CODE: &str = "Wasmrpc-Code";
const MESSAGE: &str = "Wasmrpc-Message";
const WORKER: &str = "Wasmrpc-Worker";

/// The subject worker `name` takes calls on.
pub fn subject(name: &str) -> String {
    format!("wasmrpc.call.{}", subject_token(name))
}

/// Where a call should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// On this worker.
    Named(String),
    /// On any live worker.
    Any,
}

impl Target {
    /// `?worker=any` or `?worker=NAME`.
    pub fn parse(worker: &str) -> Target {
        if worker == "any" {
            Target::Any
        } else {
            Target::Named(worker.to_owned())
        }
    }
}

/// What one attempt on one worker came to.
enum Attempt {
    Done(Result<Vec<Tensor>, ServiceError>),
    /// The worker is gone (not serving, or no longer a member): another may be tried.
    Gone(String),
}

/// This worker's side of calls between workers.
pub struct Calls {
    client: async_nats::Client,
    payloads: ObjectStore,
    me: String,
    members: Arc<Members>,
    next: AtomicUsize,
    /// One permit per call being served for another worker; draining takes them all.
    served: Arc<Semaphore>,
    stop: Arc<Notify>,
    serving: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Set when another worker took this one's name: its calls are left to that worker.
    lost: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

impl Calls {
    /// Calls over `client`, as worker `me`.
    ///
    /// # Errors
    /// The payload store cannot be opened.
    pub async fn new(
        client: async_nats::Client,
        js: async_nats::jetstream::Context,
        me: String,
        members: Arc<Members>,
        replicas: usize,
        lost: Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Calls, ClusterError> {
        let payloads = match js.get_object_store(PAYLOADS).await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: PAYLOADS.to_owned(),
                    description: Some("wasmrpc: call bodies over the max payload".to_owned()),
                    // Bodies are deleted by their reader; this collects those of dead workers.
                    max_age: Duration::from_secs(600),
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::nats("creating the payload store", e))?,
        };
        Ok(Calls {
            client,
            payloads,
            me,
            members,
            next: AtomicUsize::new(0),
            served: Arc::new(Semaphore::new(MAX_SERVED)),
            stop: Arc::new(Notify::new()),
            serving: Mutex::new(None),
            lost,
        })
    }

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
        let sent = self.client.send_request(subject(worker), request);
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
        tokio::select! {
            reply = sent => match reply {
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
            },
            why = gone => Attempt::Gone(why),
        }
    }

    /// The body to send: `body` itself, or (over the max payload) an empty one, the bytes put in
    /// the payload store under a name the headers give.
    async fn outgoing(&self, headers: &mut HeaderMap, body: &Bytes) -> Result<Bytes, ServiceError> {
        let max = self.client.server_info().max_payload;
        if body.len() + HEADER_ROOM <= max {
            return Ok(body.clone());
        }
        let name = format!(
            "{}-{}",
            subject_token(&self.me),
            hex::encode(super::rand_id())
        );
        let mut reader: &[u8] = body;
        self.payloads
            .put(name.as_str(), &mut reader)
            .await
            .map_err(|e| ServiceError::Unavailable(format!("storing a large call body: {e}")))?;
        headers.insert(OBJECT, name.as_str());
        Ok(Bytes::new())
    }

    /// The body of a received message: its payload, or the object it names (deleted once read).
    async fn incoming(&self, msg: &async_nats::Message) -> Result<Bytes, String> {
        let Some(name) = header(msg, OBJECT) else {
            return Ok(msg.payload.clone());
        };
        let mut object = self
            .payloads
            .get(&name)
            .await
            .map_err(|e| format!("fetching a large call body: {e}"))?;
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| format!("fetching a large call body: {e}"))?;
        if let Err(e) = self.payloads.delete(&name).await {
            tracing::warn!(error = %e, "could not delete a read call body; it expires by itself");
        }
        Ok(Bytes::from(bytes))
    }

    /// A reply's outcome.
    async fn answer(&self, msg: async_nats::Message) -> Result<Vec<Tensor>, ServiceError> {
        let code = header(&msg, CODE).unwrap_or_default();
        if code != "OK" {
            let code = code.parse::<Code>().unwrap_or(Code::Unknown);
            let message = header(&msg, MESSAGE).unwrap_or_default();
            return Err(ServiceError::Remote { code, message });
        }
        let body = self
            .incoming(&msg)
            .await
            .map_err(ServiceError::Unavailable)?;
        wire::decode(&body).map_err(|e| ServiceError::Remote {
            code: Code::Internal,
            message: e.to_string(),
        })
    }

    /// Serve calls sent to this worker with `service`, until [`Calls::drain`].
    ///
    /// # Errors
    /// NATS refused the subscription.
    pub async fn serve(self: &Arc<Self>, service: Arc<Service>) -> Result<(), ClusterError> {
        let mut subscriber = self
            .client
            .subscribe(subject(&self.me))
            .await
            .map_err(|e| ClusterError::nats("subscribing to this worker's calls", e))?;
        let this = self.clone();
        let task = tokio::spawn(async move {
            let stopped = this.stop.notified();
            tokio::pin!(stopped);
            let mut draining = false;
            loop {
                let msg = tokio::select! {
                    msg = subscriber.next() => msg,
                    () = &mut stopped, if !draining => {
                        // No new calls; those already delivered are still answered.
                        draining = true;
                        if let Err(e) = subscriber.drain().await {
                            tracing::warn!(error = %e, "draining this worker's calls");
                            break;
                        }
                        continue;
                    }
                };
                let Some(msg) = msg else { break };
                if this.lost.load(Ordering::Acquire) {
                    // The name is another worker's now, and so are its calls (both receive
                    // them; only the holder answers).
                    continue;
                }
                let Ok(permit) = this.served.clone().acquire_owned().await else {
                    break;
                };
                let (this, service) = (this.clone(), service.clone());
                tokio::spawn(async move {
                    this.handle(&service, msg).await;
                    drop(permit);
                });
            }
        });
        *self.serving.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        Ok(())
    }

    /// Calls this worker is running for other workers now.
    pub fn serving_now(&self) -> usize {
        MAX_SERVED - self.served.available_permits()
    }

    /// Stop taking calls and wait (at most `timeout`) for those being served to finish.
    pub async fn drain(&self, timeout: Duration) {
        self.stop.notify_one();
        let task = self
            .serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let finished = async {
            if let Some(mut task) = task {
                // The subscription ends once NATS confirms the drain; without NATS it never
                // does, and nothing more can arrive anyway.
                let connected =
                    self.client.connection_state() == async_nats::connection::State::Connected;
                if !connected || tokio::time::timeout(NATS_STEP, &mut task).await.is_err() {
                    task.abort();
                }
            }
            let _ = self.served.acquire_many(MAX_SERVED as u32).await;
        };
        if tokio::time::timeout(timeout, finished).await.is_err() {
            tracing::warn!("drain timeout passed with calls from other workers still running");
        }
    }

    async fn handle(&self, service: &Service, msg: async_nats::Message) {
        let Some(reply_to) = msg.reply.clone() else {
            return;
        };
        let result = self.run(service, &msg).await;
        let mut headers = HeaderMap::new();
        headers.insert(WORKER, self.me.as_str());
        let body = match result {
            Ok(outputs) => {
                let body = wire::encode(&outputs);
                match self.outgoing(&mut headers, &body).await {
                    Ok(body) => {
                        headers.insert(CODE, "OK");
                        body
                    }
                    Err(e) => {
                        set_error(&mut headers, e.code(), &e.to_string());
                        Bytes::new()
                    }
                }
            }
            Err(e) => {
                let message = e.public_message().unwrap_or_else(|| {
                    tracing::error!(error = %e, "a call from another worker failed");
                    format!("internal error (logged by worker `{}`)", self.me)
                });
                set_error(&mut headers, e.code(), &message);
                Bytes::new()
            }
        };
        if let Err(e) = self
            .client
            .publish_with_headers(reply_to, headers, body)
            .await
        {
            tracing::warn!(error = %e, "could not send a call's reply");
        }
    }

    async fn run(
        &self,
        service: &Service,
        msg: &async_nats::Message,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let bad = |what: &str| ServiceError::Remote {
            code: Code::InvalidArgument,
            message: format!("a call between workers without a valid {what}"),
        };
        let tenant = TenantId::new(header(msg, TENANT).ok_or_else(|| bad("tenant"))?);
        let name = header(msg, METHOD).ok_or_else(|| bad("method"))?;
        let version = match header(msg, VERSION) {
            Some(v) => Some(v.parse::<u32>().map_err(|_| bad("version"))?),
            None => None,
        };
        let timeout_ms: u64 = header(msg, TIMEOUT_MS)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("timeout"))?;
        let quota: Quota = header(msg, QUOTA)
            .and_then(|q| serde_json::from_str(&q).ok())
            .ok_or_else(|| bad("quota"))?;
        let body = self
            .incoming(msg)
            .await
            .map_err(ServiceError::Unavailable)?;
        let args = wire::decode(&body).map_err(|e| ServiceError::Arguments(e.to_string()))?;
        let caller = Caller { tenant, quota };
        local(
            service,
            &caller,
            &name,
            version,
            args,
            Duration::from_millis(timeout_ms),
        )
        .await
    }
}

async fn local(
    service: &Service,
    caller: &Caller,
    name: &str,
    version: Option<u32>,
    args: Vec<Tensor>,
    deadline: Duration,
) -> Result<Vec<Tensor>, ServiceError> {
    let method = service.resolve(&caller.tenant, name, version)?;
    service.invoke(caller, &method, args, deadline).await
}

fn set_error(headers: &mut HeaderMap, code: Code, message: &str) {
    headers.insert(CODE, code.as_str());
    // A header value is one line.
    let line: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(4096)
        .collect();
    headers.insert(MESSAGE, line.as_str());
}

fn header(msg: &async_nats::Message, name: &str) -> Option<String> {
    msg.headers
        .as_ref()?
        .get(name)
        .map(|v| v.as_str().to_owned())
}

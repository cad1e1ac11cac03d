//! Calls between workers, over NATS request/reply, and [`ClusterExecutor`], the executor of a
//! server in a cluster: it runs a call here or sends it where its placement says. Worker `W`
//! answers on the subject `wasmrpc.call.W`; the request carries the tenant, the method, the
//! version the first worker resolved, the time left and the limits the call was admitted with in
//! headers, and the arguments in the contract crate's binary `tensor_list` encoding; the reply
//! carries the canonical code and message, and the outputs the same way. The worker that runs a
//! call hands it to its own local executor (`Service::serve_peer`): the first worker has checked
//! its arguments, its rate and its cluster slot already.
//!
//! With a cluster secret every call and reply is signed and checked ([`super::trust`]): a call
//! that fails is refused unrun, a reply that fails passed over (each call has an inbox of its
//! own, so a forged reply cannot stand in for the real one).
//!
//! A body over the NATS server's max payload travels through the object store `wasmrpc_payloads`
//! instead (the message names the object; its reader deletes it; its writer too, once its call
//! is over, see [`payload::Leftover`] and `UNREAD_REPLY_AFTER`), within the store's byte cap. A call to a named worker that
//! is not a live member, or that dies during the call, is UNAVAILABLE as soon as that is known; a
//! call to any worker goes to the live workers in turn and moves on to another when the one it
//! was sent to dies or stops serving, so it runs at least once (it may run twice when a worker
//! dies after running it but before its reply arrived).

mod payload;
mod send;
mod serve;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::object_store::{self, ObjectStore};
use tokio::sync::{Notify, Semaphore};
use wasmrpc_proto::{Code, Tensor};

use super::ClusterError;
use super::members::{Members, subject_token};
use super::trust::Trust;
use crate::admission::{CallLimits, TenantShare};
use crate::error::ServiceError;
use crate::execute::{Call, Executed, Executor, LocalExecutor, Placement};

/// The object store of bodies too large for one message.
pub const PAYLOADS: &str = "wasmrpc_payloads";
/// The default of `--cluster-payload-store-mib`: the most the payload store holds, in MiB. A
/// body stays there only while its call is in flight, so this bounds the large calls in flight
/// at once across the cluster (and what anyone could pile up in NATS's storage).
pub const PAYLOAD_STORE_MIB: u64 = 1024;
/// How long after its reply is sent a reply's object in the payload store is deleted by the
/// worker that wrote it, read or not: a caller reads it at once, so one still there is its
/// caller's that has gone (killed, or cut off) and would otherwise stay for the store's max age.
pub const UNREAD_REPLY_AFTER: Duration = Duration::from_secs(10);
/// How long a body may stay in the payload store: it collects those of dead workers.
const PAYLOAD_MAX_AGE: Duration = Duration::from_secs(600);

/// How the payload store is set up.
#[derive(Debug, Clone, Copy)]
pub struct PayloadStore {
    /// Replicas of its stream.
    pub replicas: usize,
    /// The most it holds, in bytes.
    pub max_bytes: u64,
}
/// Room left in a message for its headers when deciding whether its body fits.
const HEADER_ROOM: usize = 8 << 10;
/// How long past its deadline a call may take to answer: the callee loads a component it has not
/// compiled yet outside the call's deadline.
const ANSWER_GRACE: Duration = Duration::from_secs(30);
/// How often a caller checks that the worker running its call is still a member.
const LIVENESS_CHECK: Duration = Duration::from_millis(200);
/// How long a caller still waits for an answer once the worker is seen gone: a worker that
/// leaves gracefully sends its last answers just before its member entry is deleted, and the
/// caller may see the deletion first.
const LEAVING_ANSWER_GRACE: Duration = Duration::from_secs(1);
/// How long a caller waits for a trusted reply once one it cannot trust came (another worker's
/// secret differs, or a forged reply raced the real one).
const UNTRUSTED_REPLY_GRACE: Duration = Duration::from_secs(2);
/// How long leaving waits for one NATS operation (NATS may be down).
pub const NATS_STEP: Duration = Duration::from_secs(2);
/// Calls served at once for other workers (a bound on tasks; admission bounds the running).
const MAX_SERVED: usize = 4096;

const TENANT: &str = "Wasmrpc-Tenant";
const METHOD: &str = "Wasmrpc-Method";
const VERSION: &str = "Wasmrpc-Version";
const TIMEOUT_MS: &str = "Wasmrpc-Timeout-Ms";
/// The limits the call was admitted with, but its deadline (which is `TIMEOUT_MS`).
const LIMITS: &str = "Wasmrpc-Limits";
const OBJECT: &str = "Wasmrpc-Object";
const CODE: &str = "Wasmrpc-Code";
const MESSAGE: &str = "Wasmrpc-Message";
const WORKER: &str = "Wasmrpc-Worker";

/// The subject worker `name` takes calls on.
pub fn subject(name: &str) -> String {
    format!("wasmrpc.call.{}", subject_token(name))
}

/// What a call may use besides its deadline, as it travels between workers.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct CarriedLimits {
    /// Linear memory, in bytes.
    memory: usize,
    /// The tenant's calls running at once on the worker that runs it.
    max_running: usize,
    /// The tenant's calls waiting at once there.
    max_queued: usize,
}

impl CarriedLimits {
    fn of(limits: &CallLimits) -> Self {
        CarriedLimits {
            memory: limits.memory,
            max_running: limits.share.max_running,
            max_queued: limits.share.max_queued,
        }
    }

    fn with_deadline(self, deadline: Duration) -> CallLimits {
        CallLimits {
            deadline,
            memory: self.memory,
            share: TenantShare {
                max_running: self.max_running,
                max_queued: self.max_queued,
            },
        }
    }
}

/// The executor of a server in a cluster: a call placed here (or on this worker by name, or on
/// any worker when this one's turn comes) goes to the local executor; one placed on another
/// worker is sent there.
#[derive(Debug)]
pub struct ClusterExecutor {
    calls: Arc<Calls>,
    local: Arc<LocalExecutor>,
}

impl ClusterExecutor {
    /// Place calls over `calls`, running this worker's share on `local`.
    pub fn new(calls: Arc<Calls>, local: Arc<LocalExecutor>) -> Self {
        ClusterExecutor { calls, local }
    }
}

#[async_trait::async_trait]
impl Executor for ClusterExecutor {
    async fn execute(&self, call: Call<'_>) -> Executed {
        match call.placement {
            Placement::Here => Executed::here(self.local.run(call).await),
            // Boxed: the cluster's call future is large, and inline it would make every local
            // call's future as large, copied at each move.
            Placement::Worker(_) | Placement::Any => {
                Box::pin(self.calls.send(call, &self.local)).await
            }
        }
    }
}

/// What one attempt on one worker came to.
enum Attempt {
    /// The worker took the call: its answer, or no answer in time.
    Done(Result<Vec<Tensor>, ServiceError>),
    /// The call never reached a worker (its deadline had passed, its body could not be stored,
    /// NATS refused to send it).
    Failed(ServiceError),
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
    /// Signs what this worker sends and checks what it receives.
    trust: Trust,
    js: async_nats::jetstream::Context,
    /// The payload store's cap, in bytes.
    payload_max_bytes: u64,
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
        store: PayloadStore,
        lost: Arc<std::sync::atomic::AtomicBool>,
        trust: Trust,
    ) -> Result<Calls, ClusterError> {
        let max_bytes = i64::try_from(store.max_bytes).unwrap_or(i64::MAX);
        let payloads = match js.get_object_store(PAYLOADS).await {
            Ok(payloads) => {
                // A store made before the cap (or with another): this worker's cap applies.
                let stream = format!("OBJ_{PAYLOADS}");
                let mut config = js
                    .get_stream(&stream)
                    .await
                    .map_err(|e| ClusterError::nats("reading the payload store", e))?
                    .info()
                    .await
                    .map_err(|e| ClusterError::nats("reading the payload store", e))?
                    .config
                    .clone();
                if config.max_bytes != max_bytes {
                    config.max_bytes = max_bytes;
                    js.update_stream(config)
                        .await
                        .map_err(|e| ClusterError::nats("capping the payload store", e))?;
                }
                payloads
            }
            Err(_) => js
                .create_object_store(object_store::Config {
                    bucket: PAYLOADS.to_owned(),
                    description: Some("wasmrpc: call bodies over the max payload".to_owned()),
                    // Bodies are deleted by their reader; this collects those of dead workers.
                    max_age: PAYLOAD_MAX_AGE,
                    max_bytes,
                    num_replicas: store.replicas,
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
            trust,
            js,
            payload_max_bytes: store.max_bytes,
        })
    }
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

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
use crate::service::{Caller, Service, ServiceError};

/// The object store of bodies too large for one message.
pub const PAYLOADS: &str = "wasmrpc_payloads";
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

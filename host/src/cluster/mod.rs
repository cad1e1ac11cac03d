//! Past one machine: workers that share one NATS server (or NATS cluster) with JetStream form a
//! wasmrpc cluster (`wasmrpc serve --cluster nats://HOST:PORT --name W`).
//!
//! [`members`] keeps the list of live workers, [`store`] is the module store every worker shares,
//! [`calls`] carries calls between workers (in the contract crate's binary `tensor_list`
//! encoding) and is this server's executor for calls placed on another worker. docs/cluster.md
//! describes the subjects, buckets and failure handling.

pub mod barrier;
pub mod calls;
pub mod members;
pub mod rates;
pub mod slots;
pub mod store;
pub mod tenants;
pub mod trust;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::ServerAddr;

pub use members::WorkerInfo;
use members::{Members, Membership};
pub use store::NatsRegistry;

use crate::error::ServiceError;
use crate::execute::{Executor, LocalExecutor};
use crate::service::{Peers, Service};
use crate::tenancy::TenantId;

/// A key-value bucket whose entries expire `ttl` after their last write (created, or its
/// settings brought up to date): the members' heartbeats and the barriers' arrivals. `what` names
/// the step in an error.
///
/// # Errors
/// JetStream is not enabled or not reachable.
pub(crate) async fn expiring_bucket(
    js: &async_nats::jetstream::Context,
    name: &str,
    description: &str,
    ttl: Duration,
    replicas: usize,
    what: &'static str,
) -> Result<async_nats::jetstream::kv::Store, ClusterError> {
    js.create_or_update_key_value(async_nats::jetstream::kv::Config {
        bucket: name.to_owned(),
        description: description.to_owned(),
        history: 1,
        max_age: ttl,
        num_replicas: replicas,
        ..Default::default()
    })
    .await
    .map_err(|e| ClusterError::nats(what, e))
}

/// A key-value bucket whose entries stay until deleted (its settings brought up to date): the
/// tenant directory, the call slots. `what` names the step in an error.
///
/// # Errors
/// JetStream is not enabled or not reachable.
pub(crate) async fn lasting_bucket(
    js: &async_nats::jetstream::Context,
    name: &str,
    description: &str,
    replicas: usize,
    what: &'static str,
) -> Result<async_nats::jetstream::kv::Store, ClusterError> {
    // A maximum age of zero is none.
    expiring_bucket(js, name, description, Duration::ZERO, replicas, what).await
}

/// How long joining waits for NATS to be reachable and JetStream available (a NATS cluster
/// electing its leader).
const JETSTREAM_WAIT: Duration = Duration::from_secs(30);

/// How this server joins a cluster (`--cluster`, `--name`, `--rank`, `--advertise`). Its `Debug`
/// shows the URLs redacted, so printing the settings never prints NATS credentials.
#[derive(Clone)]
pub struct ClusterSettings {
    /// NATS server URLs, comma-separated (`nats://host:4222,nats://other:4222`).
    pub urls: String,
    /// This worker's unique name.
    pub name: String,
    /// Its rank.
    pub rank: u32,
    /// The `host:port` other machines reach its HTTP port at (default: the listen address).
    pub advertise: Option<String>,
    /// Replicas of the buckets (1 for a single NATS server; up to the NATS cluster's size).
    pub replicas: usize,
    /// CA certificates to trust for NATS over TLS (`--cluster-ca`).
    pub ca: Option<std::path::PathBuf>,
    /// The secret every worker signs with (`--cluster-secret-file`, `WASMRPC_CLUSTER_SECRET`).
    pub secret: Option<trust::ClusterSecret>,
    /// The most the payload store may hold, in bytes (`--cluster-payload-store-mib`).
    pub payload_store_bytes: u64,
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSettings")
            .field("urls", &self.urls_for_display())
            .field("name", &self.name)
            .field("rank", &self.rank)
            .field("advertise", &self.advertise)
            .field("replicas", &self.replicas)
            .field("ca", &self.ca)
            .field("secret", &self.secret)
            .field("payload_store_bytes", &self.payload_store_bytes)
            .finish()
    }
}

impl ClusterSettings {
    /// The NATS URLs as they may be shown: any user, password or token replaced by `***`.
    pub fn urls_for_display(&self) -> String {
        crate::redact::redact_urls(&self.urls)
    }

    /// How to connect: the worker's name, the credentials from the URLs and the CAs to trust.
    fn connect_options(
        &self,
        addrs: &[ServerAddr],
    ) -> Result<async_nats::ConnectOptions, ClusterError> {
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("wasmrpc {}", self.name))
            .connection_timeout(Duration::from_secs(5));
        if let Some(addr) = addrs.iter().find(|a| a.username().is_some()) {
            let user = addr.username().unwrap_or_default().to_owned();
            options = match addr.password() {
                Some(password) => options.user_and_password(user, password.to_owned()),
                // `nats://TOKEN@HOST`: a user without a password is a token.
                None => options.token(user),
            };
        }
        if let Some(ca) = &self.ca {
            if !ca.is_file() {
                return Err(ClusterError::Settings(format!(
                    "--cluster-ca {}: no such file",
                    ca.display()
                )));
            }
            options = options.add_root_certificates(ca.clone()).require_tls(true);
        }
        Ok(options)
    }
}

/// Why joining or working in the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// NATS or JetStream refused or failed an operation.
    #[error("{what}: {reason}")]
    Nats {
        /// What was being done.
        what: &'static str,
        /// NATS's own words.
        reason: String,
    },
    /// A live worker already holds this name.
    #[error(
        "the worker name `{name}` is taken by a live worker{}: choose another --name, or stop that \
         worker (a dead worker's name frees within a few seconds)",
        .holder.as_ref().map(|h| format!(" (serving {h})")).unwrap_or_default()
    )]
    NameTaken {
        /// The name.
        name: String,
        /// Where its holder serves HTTP.
        holder: Option<String>,
    },
    /// A setting is not usable (the message says which and why).
    #[error("{0}")]
    Settings(String),
    /// The shared store holds something this build cannot read.
    #[error("the cluster's module store: {0}")]
    Store(String),
}

impl ClusterError {
    fn nats(what: &'static str, e: impl std::fmt::Display) -> ClusterError {
        ClusterError::Nats {
            what,
            reason: e.to_string(),
        }
    }
}

/// This server's part in a cluster: its connection, its membership, the shared store, and the
/// calls it serves for other workers.
#[derive(Debug)]
pub struct Cluster {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    members: Arc<Members>,
    membership: Membership,
    registry: NatsRegistry,
    calls: Arc<calls::Calls>,
    barriers: async_nats::jetstream::kv::Store,
    rates: rates::NatsRates,
    slots: Arc<slots::NatsSlots>,
    /// Signs and checks what this worker exchanges over NATS.
    trust: trust::Trust,
}

impl Cluster {
    /// Connect to NATS, open the shared store (loading every registration) and join as
    /// `settings.name`, advertising `listen` (or `settings.advertise`) as the HTTP address.
    ///
    /// # Errors
    /// Bad settings, NATS unreachable or without JetStream, a name a live worker holds.
    pub async fn join(
        settings: &ClusterSettings,
        listen: SocketAddr,
    ) -> Result<Cluster, ClusterError> {
        if !members::is_valid_worker_name(&settings.name) {
            return Err(ClusterError::Settings(format!(
                "`{}` is not a worker name: 1 to 64 of A-Z a-z 0-9 - _ /",
                settings.name
            )));
        }
        let (ip, port) = advertised(settings.advertise.as_deref(), listen)?;
        let addrs = settings
            .urls
            .split(',')
            .map(|u| u.trim().parse::<ServerAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                ClusterError::Settings(format!(
                    "--cluster `{}` is not a NATS URL: {e}",
                    settings.urls_for_display()
                ))
            })?;
        let trust = trusted(settings, &addrs)?;
        // NATS started alongside the workers may not listen yet, and a NATS cluster that has just
        // started elects its JetStream leader first: both are waited for, within JETSTREAM_WAIT.
        let give_up = std::time::Instant::now() + JETSTREAM_WAIT;
        let client = loop {
            let connected = settings
                .connect_options(&addrs)?
                .connect(addrs.clone())
                .await;
            match connected {
                Ok(client) => break client,
                Err(e) if e.kind() == async_nats::ConnectErrorKind::AuthorizationViolation => {
                    return Err(ClusterError::nats(
                        "NATS refused this worker's credentials (the user and password, or \
                         token, in the --cluster URL)",
                        e,
                    ));
                }
                Err(e) if std::time::Instant::now() < give_up => {
                    tracing::warn!(error = %e, "NATS is not reachable yet; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(ClusterError::nats("connecting to NATS", e)),
            }
        };
        let js = async_nats::jetstream::new(client.clone());
        let (registry, workers, barriers, rates) = loop {
            let opened = async {
                Ok::<_, ClusterError>((
                    NatsRegistry::open(&js, settings.replicas, trust.clone()).await?,
                    members::bucket(&js, settings.replicas).await?,
                    barrier::bucket(&js, settings.replicas).await?,
                    rates::NatsRates::open(&js, settings.replicas, trust.clone()).await?,
                ))
            };
            match opened.await {
                Ok(opened) => break opened,
                Err(e @ ClusterError::Nats { .. }) if std::time::Instant::now() < give_up => {
                    tracing::warn!(error = %e, "JetStream is not ready yet; trying again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        };
        let members = Arc::new(Members::default());
        tokio::spawn(members::watch(
            workers.clone(),
            members.clone(),
            trust.clone(),
        ));
        let info = WorkerInfo {
            name: settings.name.clone(),
            rank: settings.rank,
            ip,
            port,
            joined_ms: u64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis(),
            )
            .unwrap_or(0),
            instance: hex::encode(rand_id()),
            draining: false,
        };
        let membership = Membership::join(workers, info, members.clone(), trust.clone()).await?;
        // Once the name is this worker's: holdings an earlier process of the name left go.
        let slots = slots::NatsSlots::open(
            &js,
            settings.replicas,
            settings.name.clone(),
            members.clone(),
            trust.clone(),
        )
        .await?;
        let calls = Arc::new(
            calls::Calls::new(
                client.clone(),
                js.clone(),
                settings.name.clone(),
                members.clone(),
                calls::PayloadStore {
                    replicas: settings.replicas,
                    max_bytes: settings.payload_store_bytes,
                },
                membership.lost(),
                trust.clone(),
            )
            .await?,
        );
        tracing::info!(
            name = settings.name,
            rank = settings.rank,
            "joined the cluster"
        );
        Ok(Cluster {
            client,
            js,
            members,
            membership,
            registry,
            calls,
            barriers,
            rates,
            slots,
            trust,
        })
    }

    /// The cluster's count of running calls (`max_concurrent_calls` across workers).
    pub fn slots(&self) -> Arc<slots::NatsSlots> {
        self.slots.clone()
    }

    /// The cluster's call-rate buckets (`calls_per_second` across workers).
    pub fn rates(&self) -> rates::NatsRates {
        self.rates.clone()
    }

    /// The shared module store.
    pub fn registry(&self) -> NatsRegistry {
        self.registry.clone()
    }

    /// The executor of this worker's calls: here through `local`, or on another worker.
    pub fn executor(&self, local: Arc<LocalExecutor>) -> Arc<dyn Executor> {
        Arc::new(calls::ClusterExecutor::new(self.calls.clone(), local))
    }

    /// Share `directory` (tenants and their keys) with the other workers.
    ///
    /// # Errors
    /// NATS failed, or the cluster's copy is unreadable.
    pub async fn share_tenants(
        &self,
        directory: Arc<crate::tenancy::TenantDirectory>,
        replicas: usize,
    ) -> Result<(), ClusterError> {
        tenants::share(&self.js, replicas, directory, self.trust.clone()).await
    }

    /// Serve calls other workers send here, with `service`.
    ///
    /// # Errors
    /// NATS refused the subscription.
    pub async fn serve(&self, service: Arc<Service>) -> Result<(), ClusterError> {
        self.calls.serve(service).await
    }

    /// Leave: say so in the member list (nobody sends new calls here), stop taking calls,
    /// finish those running (at most `drain`), then drop out of the list.
    pub async fn leave(&self, drain: Duration) {
        self.membership.drain();
        self.calls.drain(drain).await;
        // NATS may be down: leaving never waits for it long (the entry expires by itself).
        if self.client.connection_state() != async_nats::connection::State::Connected {
            tracing::warn!("NATS is not reachable; this worker's entry expires by itself");
            return;
        }
        if tokio::time::timeout(calls::NATS_STEP, self.membership.leave())
            .await
            .is_err()
        {
            tracing::warn!(
                "NATS did not confirm this worker's leaving; its entry expires by itself"
            );
        }
        if let Ok(Err(e)) = tokio::time::timeout(calls::NATS_STEP, self.client.flush()).await {
            tracing::warn!(error = %e, "flushing the NATS connection at exit");
        }
        tracing::info!("left the cluster");
    }
}

#[async_trait::async_trait]
impl Peers for Cluster {
    fn workers(&self) -> Vec<WorkerInfo> {
        self.members.live()
    }

    fn this_worker(&self) -> &str {
        &self.membership.info().name
    }

    fn serving_now(&self) -> usize {
        self.calls.serving_now()
    }

    async fn barrier(
        &self,
        tenant: &TenantId,
        name: &str,
        member: &str,
        count: usize,
    ) -> Result<Vec<String>, ServiceError> {
        barrier::arrive(&self.barriers, &self.trust, tenant, name, member, count)
            .await
            .map_err(|e| {
                ServiceError::unavailable_because(
                    "the cluster's barrier store failed; try again",
                    e,
                )
            })
    }
}

/// How this worker trusts what comes over NATS: by the cluster's secret, or (without one, only
/// with NATS on this machine) not at all, which it says loudly. It also warns when NATS asks for
/// neither credentials nor TLS.
fn trusted(settings: &ClusterSettings, addrs: &[ServerAddr]) -> Result<trust::Trust, ClusterError> {
    let local = |a: &ServerAddr| {
        let host = a.host().trim_matches(['[', ']']);
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    };
    if addrs
        .iter()
        .any(|a| a.username().is_none() && !a.tls_required())
        && settings.ca.is_none()
    {
        tracing::warn!(
            cluster = settings.urls_for_display(),
            "NATS is reached without credentials and without TLS: anyone who reaches it can read \
             the calls' arguments and results; give NATS a user and password (in the --cluster \
             URL) and TLS (docs/cluster.md, \"Trust\")"
        );
    }
    match &settings.secret {
        Some(secret) => Ok(trust::Trust::new(Some(secret))),
        None if addrs.iter().all(local) => {
            tracing::warn!(
                "no cluster secret: calls and shared entries on NATS are NOT authenticated, and \
                 any process of this machine that reaches NATS can run calls as any tenant; give \
                 every worker the same --cluster-secret-file (or WASMRPC_CLUSTER_SECRET)"
            );
            Ok(trust::Trust::new(None))
        }
        None => Err(ClusterError::Settings(format!(
            "--cluster {}: NATS is not on this machine and no cluster secret was given: anyone \
             who reaches NATS could run calls as any tenant. Give every worker the same secret \
             with --cluster-secret-file FILE (or WASMRPC_CLUSTER_SECRET); docs/cluster.md, \
             \"Trust\"",
            settings.urls_for_display()
        ))),
    }
}

/// The (ip, port) to advertise: `--advertise HOST:PORT`, else the listen address (a wildcard
/// listen address advertises loopback; give --advertise on a real network).
fn advertised(advertise: Option<&str>, listen: SocketAddr) -> Result<(String, u16), ClusterError> {
    match advertise {
        None => {
            let ip = if listen.ip().is_unspecified() {
                "127.0.0.1".to_owned()
            } else {
                listen.ip().to_string()
            };
            Ok((ip, listen.port()))
        }
        Some(a) => {
            let (host, port) = a.rsplit_once(':').ok_or_else(|| {
                ClusterError::Settings(format!("--advertise `{a}` is not HOST:PORT"))
            })?;
            let port = port
                .parse()
                .map_err(|_| ClusterError::Settings(format!("--advertise `{a}`: bad port")))?;
            Ok((host.trim_matches(['[', ']']).to_owned(), port))
        }
    }
}

pub(crate) fn rand_id() -> [u8; 8] {
    let mut id = [0u8; 8];
    // The OS's randomness; a failure leaves zeros, which only weakens a sanity check.
    let _ = getrandom::fill(&mut id);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printing_the_settings_never_prints_the_credentials() {
        let settings = ClusterSettings {
            urls: "nats://worker:hunter2@nats.internal:4222,nats://s3cr3t-token@other:4222".into(),
            name: "w1".into(),
            rank: 0,
            advertise: None,
            replicas: 1,
            ca: None,
            secret: Some(trust::ClusterSecret::new("a-cluster-secret-of-length", "test").unwrap()),
            payload_store_bytes: 1 << 30,
        };
        let shown = format!("{settings:?}");
        for secret in ["hunter2", "worker:", "s3cr3t-token", "a-cluster-secret"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("nats.internal:4222"), "{shown}");
    }
}

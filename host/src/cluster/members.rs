//! Membership: each worker's [`WorkerInfo`] in the key-value bucket `wasmrpc_workers`, refreshed by a
//! heartbeat; a worker whose heartbeat stops is gone after [`MEMBER_TTL`].
//!
//! Joining is a compare-and-set create of the worker's name, so a name is held by one live worker at
//! a time. The bucket's max age drops an entry nobody refreshes, which frees the name; the live view
//! of the members ([`Members`]) comes from a watch of the bucket and counts a member as present
//! while its last heartbeat is younger than the TTL. A worker always counts itself while it holds
//! its name, NATS reachable or not: it can run calls whatever the bucket says. Entries are sealed
//! with the cluster's secret ([`super::trust`]) at each heartbeat; one not sealed by a worker of
//! the cluster, or sealed long ago (a replay), is never counted.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation};
use bytes::Bytes;
use futures_util::StreamExt as _;

use super::ClusterError;
use super::trust::{Refused, Trust, Untrusted};

/// The bucket of worker infos.
pub const BUCKET: &str = "wasmrpc_workers";
/// How often a worker refreshes its entry.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long a worker counts as present after its last heartbeat: three missed beats.
pub const MEMBER_TTL: Duration = Duration::from_secs(3);

/// What the cluster knows of one worker (Paddle's `WorkerInfo`, plus where it serves HTTP): a
/// type of the contract, since `GET /v1/cluster/workers` answers with it.
pub use wasmrpc_proto::cluster::WorkerInfo;

/// Whether `name` may name a worker: 1 to 64 of `A-Z a-z 0-9 - _ /` (it is a NATS subject token
/// and a key of the bucket; `/` allows TensorFlow's `job/task` names).
pub fn is_valid_worker_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/'))
}

/// A worker name as one key of the bucket and one token of a subject: `/` becomes `=`.
pub fn subject_token(name: &str) -> String {
    name.replace('/', "=")
}

fn key_of(name: &str) -> String {
    subject_token(name)
}

/// The live view of the cluster's members, fed by a watch of the bucket, and this worker itself.
#[derive(Debug, Default)]
pub struct Members {
    seen: RwLock<HashMap<String, (WorkerInfo, Instant)>>,
    /// This worker while it holds its name (as its heartbeat writes it), and since when. It is
    /// live whatever the watch last saw: cut off from NATS longer than the TTL, its own entry
    /// ages out of `seen`, but it still runs calls (`?worker=any` here, not "no live worker").
    me: RwLock<Option<(WorkerInfo, Instant)>>,
}

impl Members {
    /// Every worker whose last heartbeat is younger than [`MEMBER_TTL`] (draining ones included),
    /// and this worker while it holds its name, sorted by rank, then name.
    pub fn live(&self) -> Vec<WorkerInfo> {
        let me = self.me();
        let seen = self
            .seen
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<WorkerInfo> = seen
            .values()
            .filter(|(_, at)| at.elapsed() < MEMBER_TTL)
            .filter(|(info, at)| {
                me.as_ref()
                    .is_none_or(|me| info.name != me.0.name || taken_from(me, info, *at))
            })
            .map(|(info, _)| info.clone())
            .collect();
        if let Some((me, _)) = me
            && !out.iter().any(|w| w.name == me.name)
        {
            out.push(me);
        }
        out.sort_by(|a, b| (a.rank, &a.name).cmp(&(b.rank, &b.name)));
        out
    }

    /// The live workers that take new calls (not draining).
    pub fn serving(&self) -> Vec<WorkerInfo> {
        let mut live = self.live();
        live.retain(|w| !w.draining);
        live
    }

    /// The live worker named `name` (maybe draining). Its `instance` tells one process of the
    /// name from the next: a worker killed and replaced under its name within the TTL is gone
    /// although the name is live.
    pub fn get(&self, name: &str) -> Option<WorkerInfo> {
        let me = self.me().filter(|(me, _)| me.name == name);
        let seen = self
            .seen
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = seen.get(name).filter(|(_, at)| at.elapsed() < MEMBER_TTL);
        match (me, seen) {
            (Some(me), Some((info, at))) if taken_from(&me, info, *at) => Some(info.clone()),
            (Some((me, _)), _) => Some(me),
            (None, seen) => seen.map(|(info, _)| info.clone()),
        }
    }

    /// This worker, while it holds its name.
    fn me(&self) -> Option<(WorkerInfo, Instant)> {
        self.me
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Count this worker as `info` (joined at `since`), or no more (`None`: it left, or another
    /// worker took its name).
    fn hold(&self, info: Option<WorkerInfo>, since: Instant) {
        let mut me = self
            .me
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *me = info.map(|info| {
            // A change of the value (draining) keeps the time the name was taken.
            let since = me.as_ref().map_or(since, |(_, at)| *at);
            (info, since)
        });
    }

    fn saw(&self, info: WorkerInfo, at: Instant) {
        let mut seen = self
            .seen
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.insert(info.name.clone(), (info, at));
    }

    fn left(&self, key: &str) {
        let mut seen = self
            .seen
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.retain(|name, _| key_of(name) != key);
    }
}

/// Whether `info`, seen at `at` under this worker's name, is another process's taking of the name
/// after this one held it (this one lost it), rather than an earlier holder's last heartbeat or
/// this worker's own entry.
fn taken_from(me: &(WorkerInfo, Instant), info: &WorkerInfo, at: Instant) -> bool {
    info.instance != me.0.instance && at > me.1
}

/// The bucket of worker infos (created on first use; every worker asks with the same settings).
///
/// # Errors
/// JetStream is not enabled or not reachable.
pub async fn bucket(
    js: &async_nats::jetstream::Context,
    replicas: usize,
) -> Result<kv::Store, ClusterError> {
    let description = "wasmrpc: one entry per live worker, refreshed by its heartbeat";
    super::expiring_bucket(
        js,
        BUCKET,
        description,
        MEMBER_TTL,
        replicas,
        "creating the workers bucket",
    )
    .await
}

/// Keep `members` up to date from the bucket until the watch ends (the connection closed).
pub async fn watch(kv: kv::Store, members: Arc<Members>, trust: Trust) {
    loop {
        let mut entries = match kv.watch_with_history(">").await {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the workers bucket; retrying");
                tokio::time::sleep(HEARTBEAT).await;
                continue;
            }
        };
        while let Some(entry) = entries.next().await {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    tracing::warn!(error = %e, "the workers watch failed; restarting it");
                    break;
                }
            };
            match entry.operation {
                Operation::Put => match open(&trust, &entry.key, &entry.value).and_then(|v| {
                    serde_json::from_slice::<WorkerInfo>(v).map_err(|e| e.to_string())
                }) {
                    Ok(info) => {
                        // A change seen as it happens counts from now, by this machine's clock
                        // alone. An entry from before the watch counts from when it was written
                        // (by the NATS server's clock): a clock skew then only delays a live
                        // worker's appearance until its next heartbeat.
                        let at = if entry.seen_current {
                            Instant::now()
                        } else {
                            let age = time_since(entry.created);
                            Instant::now().checked_sub(age).unwrap_or_else(Instant::now)
                        };
                        members.saw(info, at);
                    }
                    Err(e) => tracing::debug!(key = entry.key, error = %e, "ignored worker info"),
                },
                Operation::Delete | Operation::Purge => members.left(&entry.key),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of a worker's entry, if this cluster's worker wrote it within the trust window
/// (a heartbeat rewrites it every second: an older one is a replay); refusals are logged.
fn open<'a>(trust: &Trust, key: &str, value: &'a [u8]) -> Result<&'a [u8], String> {
    match trust.open(BUCKET, key, value) {
        Ok((value, at)) if trust.fresh(at) => Ok(value),
        Ok(_) => {
            trust.refused(Refused::Entry(BUCKET), Untrusted::Stale);
            Err(Untrusted::Stale.to_string())
        }
        Err(why) => {
            trust.refused(Refused::Entry(BUCKET), why);
            Err(why.to_string())
        }
    }
}

fn time_since(created: async_nats::datetime::DateTime) -> Duration {
    let now = std::time::SystemTime::now();
    let created = std::time::SystemTime::UNIX_EPOCH
        + Duration::from_nanos(u64::try_from(created.unix_timestamp_nanos()).unwrap_or(0));
    now.duration_since(created).unwrap_or_default()
}

/// This worker's hold on its name: refreshed every [`HEARTBEAT`] until [`Membership::leave`].
#[derive(Debug)]
pub struct Membership {
    kv: kv::Store,
    info: WorkerInfo,
    /// What the heartbeat writes: the info, then (when leaving) the info marked draining.
    value: Arc<RwLock<Bytes>>,
    /// Wakes the heartbeat at once (the value changed).
    beat_now: Arc<tokio::sync::Notify>,
    /// Set when another worker took this worker's name (after this one was cut off from NATS
    /// longer than the TTL): from then on this worker must not answer for the name.
    lost: Arc<std::sync::atomic::AtomicBool>,
    /// The live view, which counts this worker while it holds its name.
    members: Arc<Members>,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Membership {
    /// Take `info.name` in the bucket. A name held by a live worker stays taken; one whose holder
    /// died frees within [`MEMBER_TTL`], so joining waits that long for it before giving up.
    /// From then on `members` counts this worker as live until it leaves or loses its name.
    ///
    /// # Errors
    /// [`ClusterError::NameTaken`] when a live worker holds the name; NATS failures.
    pub async fn join(
        kv: kv::Store,
        info: WorkerInfo,
        members: Arc<Members>,
        trust: Trust,
    ) -> Result<Membership, ClusterError> {
        let key = key_of(&info.name);
        let value = Bytes::from(serde_json::to_vec(&info).expect("a worker info serialises"));
        let give_up = Instant::now() + MEMBER_TTL + HEARTBEAT * 2;
        let revision = loop {
            match kv.create(&key, trust.seal(BUCKET, &key, &value)).await {
                Ok(revision) => break revision,
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {
                    if Instant::now() >= give_up {
                        let holder = kv.get(&key).await.ok().flatten().and_then(|v| {
                            let v = trust.open(BUCKET, &key, &v).ok()?.0;
                            serde_json::from_slice::<WorkerInfo>(v).ok()
                        });
                        return Err(ClusterError::NameTaken {
                            name: info.name.clone(),
                            holder: holder.map(|h| format!("{}:{}", h.ip, h.port)),
                        });
                    }
                    tokio::time::sleep(HEARTBEAT / 4).await;
                }
                Err(e) => return Err(ClusterError::nats("joining the workers bucket", e)),
            }
        };
        members.hold(Some(info.clone()), Instant::now());
        let value = Arc::new(RwLock::new(value));
        let beat_now = Arc::new(tokio::sync::Notify::new());
        let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let heart = Heart {
            kv: kv.clone(),
            me: info.clone(),
            value: value.clone(),
            now: beat_now.clone(),
            lost: lost.clone(),
            members: members.clone(),
            trust,
        };
        let heartbeat = tokio::spawn(beat(heart, revision));
        Ok(Membership {
            kv,
            info,
            value,
            beat_now,
            lost,
            members,
            heartbeat,
        })
    }

    /// Whether another worker has taken this worker's name (see [`Membership::join`]).
    pub fn lost(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.lost.clone()
    }

    /// This worker's info.
    pub fn info(&self) -> &WorkerInfo {
        &self.info
    }

    /// Say that this worker is leaving: other workers send it no new calls, and still wait for
    /// those it runs (its heartbeat goes on).
    pub fn drain(&self) {
        let info = WorkerInfo {
            draining: true,
            ..self.info.clone()
        };
        self.members.hold(Some(info.clone()), Instant::now());
        *self
            .value
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Bytes::from(serde_json::to_vec(&info).expect("a worker info serialises"));
        self.beat_now.notify_one();
    }

    /// Stop the heartbeat and remove the entry: the name is free at once.
    pub async fn leave(&self) {
        self.heartbeat.abort();
        self.members.hold(None, Instant::now());
        if let Err(e) = self.kv.delete(key_of(&self.info.name)).await {
            tracing::warn!(error = %e, "could not remove this worker's entry; it expires by itself");
        }
    }
}

/// What the heartbeat works with.
struct Heart {
    kv: kv::Store,
    me: WorkerInfo,
    value: Arc<RwLock<Bytes>>,
    now: Arc<tokio::sync::Notify>,
    lost: Arc<std::sync::atomic::AtomicBool>,
    members: Arc<Members>,
    trust: Trust,
}

/// Refresh the entry every [`HEARTBEAT`] (and when woken), re-taking it after NATS lost it.
async fn beat(heart: Heart, mut revision: u64) {
    let Heart {
        kv,
        me,
        value,
        now,
        lost,
        members,
        trust,
    } = heart;
    let key = key_of(&me.name);
    loop {
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            () = now.notified() => {}
        }
        let current = value
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // Sealed afresh each time: an entry sealed long ago is taken for a replay.
        let current = trust.seal(BUCKET, &key, &current);
        match kv.update(&key, current.clone(), revision).await {
            Ok(r) => revision = r,
            Err(e) => {
                // NATS was down, or the entry expired meanwhile: take the name again unless
                // another worker did.
                tracing::warn!(error = %e, "heartbeat failed");
                if let Ok(r) = kv.create(&key, current).await {
                    revision = r;
                } else if let Ok(Some(entry)) = kv.entry(&key).await {
                    let Ok((value, _)) = trust.open(BUCKET, &key, &entry.value) else {
                        // Not a worker's (forged): it holds no name; the next beat overwrites it.
                        revision = entry.revision;
                        continue;
                    };
                    match serde_json::from_slice::<WorkerInfo>(value) {
                        Ok(i) if i.instance == me.instance => revision = entry.revision,
                        Ok(_) => {
                            tracing::error!(
                                key,
                                "another worker took this worker's name while it was cut off \
                                 from NATS: it no longer answers calls for it; restart it"
                            );
                            lost.store(true, std::sync::atomic::Ordering::Release);
                            members.hold(None, Instant::now());
                            return;
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

//! What `GET /v1/cluster/workers` answers: the live workers of a cluster (Paddle's `WorkerInfo`,
//! with where each serves HTTP) and the worker that answered.

/// One worker of the cluster, as its member entry and `GET /v1/cluster/workers` give it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerInfo {
    /// Its unique name.
    pub name: String,
    /// Its rank (given at start, or 0).
    pub rank: u32,
    /// The address it serves HTTP on.
    pub ip: String,
    /// The port it serves HTTP on.
    pub port: u16,
    /// When it joined, milliseconds since the Unix epoch.
    pub joined_ms: u64,
    /// A random id of its process: a worker that takes a dead one's name has another, so nobody
    /// mistakes the successor for the process it replaced.
    pub instance: String,
    /// It is leaving: it takes no new calls, and finishes those it runs.
    #[serde(default)]
    pub draining: bool,
}

/// The body of `GET /v1/cluster/workers`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerList {
    /// Every live worker, by rank then name.
    pub workers: Vec<WorkerInfo>,
    /// The worker that answered.
    pub this: String,
    /// Calls it is running for other workers now.
    pub serving: usize,
}

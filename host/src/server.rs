//! The embeddable server, a mirror of `tf.distribute.experimental.rpc.Server`.
//!
//! `Server::create("http", "127.0.0.1:0")` or `Server::create_local_server()`, then `register`,
//! `start`, `join` / `shutdown`. Unlike TensorFlow, registering after `start` is allowed (hot
//! registration), and registering a name again creates a new version.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use wasmrpc_proto::{Code, MethodInfo, Status};

use crate::app::App;
use crate::config::ServeSettings;
use crate::service::Caller;
use crate::tenancy::TenantId;

/// What [`Server::register`] accepts: component bytes, or a path to a `.wasm` file.
#[derive(Debug, Clone)]
pub enum ComponentSource {
    /// The component's bytes.
    Bytes(Vec<u8>),
    /// A file to read them from.
    Path(PathBuf),
}

impl From<Vec<u8>> for ComponentSource {
    fn from(b: Vec<u8>) -> Self {
        ComponentSource::Bytes(b)
    }
}

impl From<&[u8]> for ComponentSource {
    fn from(b: &[u8]) -> Self {
        ComponentSource::Bytes(b.to_vec())
    }
}

impl From<&Path> for ComponentSource {
    fn from(p: &Path) -> Self {
        ComponentSource::Path(p.to_path_buf())
    }
}

impl From<PathBuf> for ComponentSource {
    fn from(p: PathBuf) -> Self {
        ComponentSource::Path(p)
    }
}

/// An in-process wasmrpc server.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmrpc_proto::Status> {
/// use wasmrpc_host::Server;
/// let server = Server::create_local_server().await?;
/// server.register("addition", std::path::Path::new("example_add.wasm")).await?;
/// server.start()?;
/// println!("serving on {}", server.address());
/// server.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Server {
    app: Arc<App>,
    address: SocketAddr,
    listener: Mutex<Option<std::net::TcpListener>>,
    stop: watch::Sender<bool>,
    stopped: watch::Sender<bool>,
    _store: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::new(Code::Internal, e.to_string())
}

impl Server {
    /// A server for `address` (`host:port`; port 0 picks a free port) speaking `rpc_layer`
    /// (`"http"`), with its store in a temporary directory removed on drop.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for an unsupported rpc layer or a bad address; UNAVAILABLE when the
    /// address cannot be bound; INTERNAL when the engine or store cannot be created.
    pub async fn create(rpc_layer: &str, address: &str) -> Result<Server, Status> {
        if rpc_layer != "http" {
            return Err(Status::new(
                Code::InvalidArgument,
                format!("unsupported rpc_layer `{rpc_layer}`; supported layers: http"),
            ));
        }
        let listen: SocketAddr = address.parse().map_err(|_| {
            Status::new(
                Code::InvalidArgument,
                format!("`{address}` is not an address like 127.0.0.1:8080"),
            )
        })?;
        let store = tempfile::tempdir().map_err(internal)?;
        let settings = ServeSettings {
            listen: Some(listen),
            data_dir: Some(store.path().to_path_buf()),
            ..ServeSettings::default()
        };
        Server::build(settings, Some(store)).await
    }

    /// The server of task `task_index` of job `job_name` in a TensorFlow cluster spec
    /// (`tf.distribute.Server(cluster_spec, job_name, task_index)`): it listens on that task's
    /// address, with a temporary store, and joins the wasmrpc cluster on the NATS servers `nats`
    /// as worker `job/task`, its rank the task's place in the spec (jobs in name order, tasks in
    /// order).
    ///
    /// # Errors
    /// INVALID_ARGUMENT when the spec has no such job or task, or a bad address; UNAVAILABLE when
    /// the address cannot be bound or the cluster cannot be joined (its name taken included).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), wasmrpc_proto::Status> {
    /// use std::collections::BTreeMap;
    /// let spec = BTreeMap::from([("worker".to_owned(), vec!["127.0.0.1:2222".to_owned(),
    ///                                                      "127.0.0.1:2223".to_owned()])]);
    /// let server = wasmrpc_host::Server::from_cluster_spec(&spec, "worker", 1, "nats://127.0.0.1:4222").await?;
    /// server.start()?;  // worker `worker/1`, rank 1
    /// # Ok(()) }
    /// ```
    pub async fn from_cluster_spec(
        cluster_spec: &std::collections::BTreeMap<String, Vec<String>>,
        job_name: &str,
        task_index: usize,
        nats: &str,
    ) -> Result<Server, Status> {
        let tasks = cluster_spec.get(job_name).ok_or_else(|| {
            Status::new(
                Code::InvalidArgument,
                format!("the cluster spec has no job `{job_name}`"),
            )
        })?;
        let address = tasks.get(task_index).ok_or_else(|| {
            Status::new(
                Code::InvalidArgument,
                format!(
                    "job `{job_name}` has {} tasks; there is no task {task_index}",
                    tasks.len()
                ),
            )
        })?;
        let before: usize = cluster_spec
            .iter()
            .take_while(|(job, _)| job.as_str() < job_name)
            .map(|(_, tasks)| tasks.len())
            .sum();
        let rank = u32::try_from(before + task_index).unwrap_or(u32::MAX);
        Server::join_cluster(address, nats, &format!("{job_name}/{task_index}"), rank).await
    }

    /// A server for `address` (port 0 picks a free one) with a temporary store that joins the
    /// wasmrpc cluster on the NATS servers `nats` as worker `name` of rank `rank`, advertising
    /// the bound address: how a program (Python's `init_rpc` included) becomes a worker.
    ///
    /// # Errors
    /// As [`Server::from_cluster_spec`].
    pub async fn join_cluster(
        address: &str,
        nats: &str,
        name: &str,
        rank: u32,
    ) -> Result<Server, Status> {
        let listen: SocketAddr = address.parse().map_err(|_| {
            Status::new(
                Code::InvalidArgument,
                format!("`{address}` is not an address like 127.0.0.1:2222"),
            )
        })?;
        let store = tempfile::tempdir().map_err(internal)?;
        let settings = ServeSettings {
            listen: Some(listen),
            data_dir: Some(store.path().to_path_buf()),
            cluster: Some(nats.to_owned()),
            name: Some(name.to_owned()),
            rank: Some(rank),
            ..ServeSettings::default()
        };
        Server::build(settings, Some(store)).await
    }

    /// A server on a free loopback port with a temporary store: TF's `create_local_server`.
    ///
    /// # Errors
    /// As [`Server::create`].
    pub async fn create_local_server() -> Result<Server, Status> {
        Server::create("http", "127.0.0.1:0").await
    }

    /// A server from full settings (a persistent `data_dir`, limits, TLS with `tls_cert` and
    /// `tls_key`…). Without a `data_dir`, the store is the default one of `wasmrpc serve`
    /// (`$XDG_DATA_HOME/wasmrpc` or `~/.local/share/wasmrpc`).
    ///
    /// # Errors
    /// As [`Server::create`]; also INVALID_ARGUMENT for a non-loopback address (no authentication
    /// yet) or TLS settings that cannot be used (one of certificate and key missing, a file that
    /// cannot be read or is not PEM).
    pub async fn with_settings(settings: ServeSettings) -> Result<Server, Status> {
        Server::build(settings, None).await
    }

    /// Build, bind and load; `store` is a temporary directory to remove with the server.
    async fn build(
        settings: ServeSettings,
        store: Option<tempfile::TempDir>,
    ) -> Result<Server, Status> {
        let config = settings
            .resolve()
            .map_err(|e| Status::new(Code::InvalidArgument, format!("{e:#}")))?;
        let listen = config.listen;
        // Build first: it refuses a non-loopback address before anything is bound. A worker of a
        // cluster is built once bound, since it advertises its address.
        let in_cluster = config.cluster.is_some();
        let local = if in_cluster {
            None
        } else {
            Some(
                App::build(config.clone())
                    .map_err(|e| Status::new(Code::InvalidArgument, format!("{e:#}")))?,
            )
        };
        let listener = std::net::TcpListener::bind(listen).map_err(|e| {
            Status::new(Code::Unavailable, format!("cannot listen on {listen}: {e}"))
        })?;
        listener.set_nonblocking(true).map_err(internal)?;
        let address = listener.local_addr().map_err(internal)?;
        let app = match local {
            Some(app) => app,
            None => App::build_in_cluster(config, address)
                .await
                .map_err(|e| Status::new(Code::Unavailable, format!("{e:#}")))?,
        };
        app.service.warm().await;
        Ok(Server {
            app: Arc::new(app),
            address,
            listener: Mutex::new(Some(listener)),
            stop: watch::Sender::new(false),
            stopped: watch::Sender::new(false),
            _store: store,
        })
    }

    /// The address the server listens on (known from creation, also for port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Who `register` acts for: the implicit tenant, `default` (with keys configured, the tenant
    /// of that name, if the admin creates one).
    fn caller(&self) -> Caller {
        let tenant = TenantId::default_tenant();
        Caller {
            quota: self.app.access.quota(&tenant),
            tenant,
        }
    }

    /// Register a component under `name`; a new version if `name` exists. Allowed before and
    /// after [`Server::start`]. A multi-method component needs [`Server::register_export`].
    ///
    /// # Errors
    /// The component's refusal (INVALID_ARGUMENT with the reason), or a file that cannot be read.
    pub async fn register(
        &self,
        name: &str,
        component: impl Into<ComponentSource>,
    ) -> Result<MethodInfo, Status> {
        self.register_export(name, component, None).await
    }

    /// Register one `export` of a multi-method component under `name`.
    ///
    /// # Errors
    /// As [`Server::register`].
    pub async fn register_export(
        &self,
        name: &str,
        component: impl Into<ComponentSource>,
        export: Option<&str>,
    ) -> Result<MethodInfo, Status> {
        let bytes = match component.into() {
            ComponentSource::Bytes(b) => b,
            ComponentSource::Path(p) => tokio::fs::read(&p).await.map_err(|e| {
                Status::new(
                    Code::InvalidArgument,
                    format!("reading {}: {e}", p.display()),
                )
            })?,
        };
        let (info, _) = self
            .app
            .service
            .register(&self.caller(), name, export, bytes)
            .await?;
        Ok(info)
    }

    /// Start serving in the background; returns at once. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// FAILED_PRECONDITION when already started.
    pub fn start(&self) -> Result<(), Status> {
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| {
                Status::new(Code::FailedPrecondition, "the server was already started")
            })?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(internal)?;
        let app = self.app.clone();
        let mut stop = self.stop.subscribe();
        let stopped = self.stopped.clone();
        tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = app.run(listener, shutdown).await {
                tracing::error!(error = %e, "the embedded server stopped with an error");
            }
            stopped.send_replace(true);
        });
        Ok(())
    }

    /// Wait until the server has shut down (after [`Server::shutdown`] from elsewhere).
    pub async fn join(&self) {
        let mut stopped = self.stopped.subscribe();
        let _ = stopped.wait_for(|s| *s).await;
    }

    /// Stop accepting connections, let in-flight calls finish (within the drain timeout), and
    /// wait for that. Returns at once if the server was never started.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let never_started = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some();
        if never_started {
            self.stopped.send_replace(true);
        }
        self.join().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A dropped server stops serving; in-flight requests drain in the background.
        self.stop.send_replace(true);
    }
}

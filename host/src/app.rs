//! Putting the rooms together: store, tenants, runtime, service and router, from a
//! [`ServerConfig`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::accept::serve_connections;
use crate::admission::BytesBudget;
use crate::api::{AppState, AppStateParts, grpc_router, largest_load_body, metrics_router, router};
use crate::cluster::Cluster;
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::registry::{LocalRegistry, Registry};
use crate::runtime::Runtime;
use crate::service::Service;
use crate::tenancy::{Access, TenantDirectory, admin_key};

/// A built server, not yet listening.
#[derive(Debug)]
pub struct App {
    /// The operations, for embedding programs.
    pub service: Arc<Service>,
    /// Who may do what.
    pub access: Access,
    /// Things the operator should hear about at start-up (a new admin key was written…).
    pub notices: Vec<String>,
    /// This server's part in a cluster (`--cluster`).
    pub cluster: Option<Arc<Cluster>>,
    config: ServerConfig,
}

impl App {
    /// Open the store and the tenant directory and create the engine.
    ///
    /// # Errors
    /// A non-loopback address without authentication configured; the admin key file cannot be
    /// read or written; the data directory cannot be opened (or another server holds it); the
    /// engine fails.
    pub fn build(config: ServerConfig) -> anyhow::Result<App> {
        App::check_listen(&config)?;
        App::make_data_dir_private(&config)?;
        let registry = LocalRegistry::open(&config.data_dir).map_err(|e| {
            anyhow::anyhow!("opening the store in {}: {e}", config.data_dir.display())
        })?;
        App::assemble(config, Arc::new(registry), None)
    }

    /// Join the cluster of `config.cluster` (advertising `listen` as this worker's HTTP address
    /// unless told otherwise), with the cluster's shared module store, and serve calls other
    /// workers send here.
    ///
    /// # Errors
    /// As [`App::build`], and: NATS unreachable or without JetStream, a worker name a live worker
    /// holds.
    pub async fn build_in_cluster(config: ServerConfig, listen: SocketAddr) -> anyhow::Result<App> {
        App::check_listen(&config)?;
        App::make_data_dir_private(&config)?;
        let settings = config
            .cluster
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no cluster to join: give --cluster and --name"))?;
        let cluster = Cluster::join(&settings, listen).await.map_err(|e| {
            anyhow::anyhow!(
                "joining the cluster at {}: {e}",
                settings.urls_for_display()
            )
        })?;
        let registry = Arc::new(cluster.registry());
        let cluster = Arc::new(cluster);
        // Tenants (with keys) limited below the default concurrency quota are limited across
        // the cluster; the default bounds each worker's share of its own slots.
        let slots_default = config
            .admin_key_file
            .is_some()
            .then_some(config.tenant_defaults.max_concurrent_calls);
        let app = App::assemble(config, registry, Some(cluster.clone()))?;
        let admission = app.service.admission();
        admission.share_rates(Arc::new(cluster.rates()));
        if let Some(per_worker) = slots_default {
            admission.share_slots(Arc::new(cluster.slots()), per_worker);
        }
        if let Some(directory) = app.access.directory() {
            cluster
                .share_tenants(directory.clone(), settings.replicas)
                .await
                .map_err(|e| anyhow::anyhow!("sharing the tenant directory: {e}"))?;
        }
        cluster
            .serve(app.service.clone())
            .await
            .map_err(|e| anyhow::anyhow!("serving calls from the cluster: {e}"))?;
        Ok(app)
    }

    /// The data directory owner-only, before anything is stored in it (`data_dir.rs`).
    fn make_data_dir_private(config: &ServerConfig) -> anyhow::Result<()> {
        let changed = crate::data_dir::make_private(&config.data_dir).map_err(|e| {
            anyhow::anyhow!(
                "making the data directory {} owner-only: {e}",
                config.data_dir.display()
            )
        })?;
        if changed > 0 {
            tracing::warn!(
                dir = %config.data_dir.display(),
                changed,
                "the data directory was readable by other users: made it owner-only (0700/0600)"
            );
        }
        Ok(())
    }

    fn check_listen(config: &ServerConfig) -> anyhow::Result<()> {
        // The gRPC address serves the same methods as the main one: the same rule.
        let open = std::iter::once(config.listen)
            .chain(config.grpc_listen)
            .find(|a| !a.ip().is_loopback());
        if let (Some(address), None) = (open, &config.admin_key_file) {
            anyhow::bail!(
                "refusing to listen on {address} without authentication: anyone who reaches it \
                 could upload and run code and see every method. Give --admin-key-file FILE (or \
                 WASMRPC_ADMIN_KEY_FILE): the server writes a new admin key there if FILE does \
                 not exist, and every request then needs a key (README.md, \"Tenants and keys\"). \
                 Or listen on a loopback address (e.g. 127.0.0.1:8080)."
            );
        }
        Ok(())
    }

    fn assemble(
        config: ServerConfig,
        registry: Arc<dyn Registry>,
        cluster: Option<Arc<Cluster>>,
    ) -> anyhow::Result<App> {
        let mut notices = Vec::new();
        let access = match &config.admin_key_file {
            None => Access::open(config.open_defaults),
            Some(path) => {
                let (key, created) = admin_key::load_or_create(path)?;
                if created {
                    notices.push(format!(
                        "wrote a new admin key to {} (owner-only); it manages tenants: keep it \
                         secret",
                        path.display()
                    ));
                }
                if !config.listen.ip().is_loopback() && config.serve.tls.is_none() {
                    notices.push(format!(
                        "serving {} without TLS: API keys and tensors cross the network in \
                         clear text; give --tls-cert and --tls-key",
                        config.listen
                    ));
                }
                let directory = TenantDirectory::open(
                    &config.data_dir,
                    &key,
                    config.tenant_defaults,
                    config.server_limits,
                )?;
                Access::with_keys(Arc::new(directory), config.tenant_defaults)
            }
        };
        let mut runtime_config = config.runtime.clone();
        if runtime_config.artifact_cache.is_none() {
            runtime_config.artifact_cache = Some(config.data_dir.join("artifacts"));
        }
        let runtime = Runtime::new(runtime_config)?;
        // What the store, the tenant directory and the runtime just created there (the
        // database file follows the umask) is owner-only too.
        crate::data_dir::make_private(&config.data_dir)?;
        let mut service = Service::new(
            Arc::new(runtime),
            registry,
            Arc::new(Metrics::default()),
            config.tenant_max_queued,
        );
        if let Some(cluster) = &cluster {
            // Calls placed on a worker go through the cluster's executor, which runs this
            // worker's share on the service's own local executor.
            service.join_cluster(cluster.executor(service.local_executor()), cluster.clone());
        }
        let service = Arc::new(service);
        if let Some(traces) = &config.traces {
            let worker = config.cluster.as_ref().map(|c| c.name.as_str());
            if !crate::otel::install(traces, worker)? {
                notices.push(
                    "traces of this server go where the first server of this process sends                      them: one exporter a process"
                        .to_owned(),
                );
            }
        }
        for notice in &notices {
            tracing::warn!("{notice}");
        }
        Ok(App {
            service,
            access,
            notices,
            cluster,
            config,
        })
    }

    /// Compile the registered components in the background (readiness follows it) and serve on
    /// `listener` (and `/metrics` on its own address, if configured) until `shutdown` resolves,
    /// draining in-flight requests.
    ///
    /// # Errors
    /// The metrics address cannot be bound, or accepting connections failed for good.
    pub async fn run(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let grpc = match self.config.grpc_listen {
            Some(address) => Some(TcpListener::bind(address).await?),
            None => None,
        };
        self.serve(listener, grpc, shutdown).await
    }

    /// [`App::run`] with the `--grpc-listen` listener already bound (`wasmrpc serve` binds it
    /// first, to print its address).
    ///
    /// # Errors
    /// As [`App::run`].
    pub async fn serve(
        &self,
        listener: TcpListener,
        grpc: Option<TcpListener>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        if !self.service.is_ready() {
            let service = self.service.clone();
            tokio::spawn(async move {
                service.warm().await;
            });
        }
        let metrics = match self.config.metrics_listen {
            Some(address) => {
                let listener = TcpListener::bind(address).await?;
                let router = metrics_router(self.service.clone(), address.ip().is_loopback());
                let options = crate::accept::ServeOptions {
                    tls: None,
                    ..self.config.serve.clone()
                };
                Some(tokio::spawn(serve_connections(
                    listener,
                    router,
                    std::future::pending(),
                    options,
                )))
            }
            None => None,
        };
        let state = AppState::new(AppStateParts {
            service: self.service.clone(),
            limits: self.config.http.clone(),
            access: self.access.clone(),
            bytes_in_flight: BytesBudget::for_bodies(
                self.config.http.max_bytes_in_flight,
                // The largest body any request may have: a call's, or a KServe load's.
                self.config
                    .http
                    .max_request_bytes
                    .max(largest_load_body(self.config.runtime.max_component_bytes)),
                self.config.admin_key_file.is_some(),
            ),
        });
        // The gRPC port stops when the main one does, and drains the same way.
        let (stopping, stop) = tokio::sync::watch::channel(false);
        let grpc = grpc.map(|listener| {
            let mut stop = stop.clone();
            tokio::spawn(serve_connections(
                listener,
                grpc_router(state.clone()),
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
                self.config.serve.clone(),
            ))
        });
        let app = router(state);
        // A worker leaves its cluster when shutdown begins (no new calls come from other workers;
        // those running finish), while HTTP drains its own.
        let leaving = Arc::new(std::sync::Mutex::new(None));
        let shutdown = {
            let (cluster, leaving) = (self.cluster.clone(), leaving.clone());
            let drain = self.config.serve.drain_timeout;
            async move {
                shutdown.await;
                stopping.send_replace(true);
                if let Some(cluster) = cluster {
                    let task = tokio::spawn(async move { cluster.leave(drain).await });
                    *leaving
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task);
                }
            }
        };
        let served = serve_connections(listener, app, shutdown, self.config.serve.clone()).await;
        let task = leaving
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            let _ = task.await;
        }
        if let Some(task) = grpc {
            let _ = task.await;
        }
        if let Some(task) = metrics {
            task.abort();
        }
        // The spans of the last requests.
        crate::otel::export::flush(crate::otel::export::FLUSH_TIMEOUT).await;
        served
    }
}

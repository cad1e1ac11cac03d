//! Putting the rooms together: store, tenants, runtime, service and router, from a
//! [`ServerConfig`].

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::accept::serve_connections;
use crate::api::{AppState, metrics_router, router};
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::registry::LocalRegistry;
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
        let mut notices = Vec::new();
        if !config.listen.ip().is_loopback() && config.admin_key_file.is_none() {
            anyhow::bail!(
                "refusing to listen on {} without authentication: anyone who reaches it could \
                 upload and run code and see every method. Give --admin-key-file FILE (or \
                 WASMRPC_ADMIN_KEY_FILE): the server writes a new admin key there if FILE does \
                 not exist, and every request then needs a key (README.md, \"Tenants and keys\"). \
                 Or listen on a loopback address (e.g. 127.0.0.1:8080).",
                config.listen
            );
        }
        let registry = LocalRegistry::open(&config.data_dir).map_err(|e| {
            anyhow::anyhow!("opening the store in {}: {e}", config.data_dir.display())
        })?;
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
        let service = Arc::new(Service::new(
            Arc::new(runtime),
            Arc::new(registry),
            Arc::new(Metrics::default()),
            config.tenant_max_queued,
        ));
        for notice in &notices {
            tracing::warn!("{notice}");
        }
        Ok(App {
            service,
            access,
            notices,
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
        if !self.service.is_ready() {
            let service = self.service.clone();
            tokio::spawn(async move {
                service.warm().await;
            });
        }
        let metrics = match self.config.metrics_listen {
            Some(address) => {
                let listener = TcpListener::bind(address).await?;
                let router = metrics_router(self.service.clone());
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
        let app = router(AppState {
            service: self.service.clone(),
            limits: self.config.http.clone(),
            access: self.access.clone(),
        });
        let served = serve_connections(listener, app, shutdown, self.config.serve.clone()).await;
        if let Some(task) = metrics {
            task.abort();
        }
        served
    }
}

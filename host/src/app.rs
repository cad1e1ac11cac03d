//! Putting the rooms together: store, runtime, service and router, from a [`ServerConfig`].

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::accept::serve_connections;
use crate::api::{AppState, router};
use crate::config::ServerConfig;
use crate::metrics::Metrics;
use crate::registry::LocalRegistry;
use crate::runtime::Runtime;
use crate::service::Service;

/// A built server, not yet listening.
#[derive(Debug)]
pub struct App {
    /// The operations, for embedding programs.
    pub service: Arc<Service>,
    config: ServerConfig,
}

impl App {
    /// Open the store and create the engine.
    ///
    /// # Errors
    /// The data directory cannot be opened (or another server holds it), or the engine fails.
    pub fn build(config: ServerConfig) -> anyhow::Result<App> {
        if !config.listen.ip().is_loopback() {
            anyhow::bail!(
                "refusing to listen on {} without authentication: this version serves one \
                 implicit tenant with no keys, so it only binds loopback addresses \
                 (e.g. 127.0.0.1:8080)",
                config.listen
            );
        }
        let registry = LocalRegistry::open(&config.data_dir).map_err(|e| {
            anyhow::anyhow!("opening the store in {}: {e}", config.data_dir.display())
        })?;
        let runtime = Runtime::new(config.runtime.clone())?;
        let service = Arc::new(Service::new(
            Arc::new(runtime),
            Arc::new(registry),
            Arc::new(Metrics::default()),
        ));
        Ok(App { service, config })
    }

    /// Compile the registered components in the background (readiness follows it) and serve on `listener` until
    /// `shutdown` resolves, draining in-flight requests.
    ///
    /// # Errors
    /// Accepting connections failed for good.
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
        let app = router(AppState {
            service: self.service.clone(),
            limits: self.config.http.clone(),
        });
        serve_connections(listener, app, shutdown, self.config.serve.clone()).await
    }
}

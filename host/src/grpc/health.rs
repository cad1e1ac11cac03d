//! gRPC health checking (`grpc.health.v1.Health`, tonic-health): the server (`""`) and the
//! inference service are SERVING once the registry is loaded, as `/readyz` and
//! `/v2/health/ready` are 200 then, and NOT_SERVING before. Open to anyone, as those are.

use std::sync::Arc;
use std::time::Duration;

use tonic_health::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::server::HealthReporter;

use crate::service::Service;

/// The health service's full name.
pub const SERVICE_NAME: &str = "grpc.health.v1.Health";

/// How often readiness is looked at until the registry is loaded.
const READINESS_POLL: Duration = Duration::from_millis(20);

/// The health service, following `service`'s readiness.
pub fn service(service: Arc<Service>) -> HealthServer<impl Health> {
    let (reporter, server) = tonic_health::server::health_reporter();
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(follow_readiness(reporter, service));
        }
        // Built outside a runtime (a test of the router alone): it says SERVING.
        Err(_) => tracing::debug!("gRPC health reports SERVING without following readiness"),
    }
    server
}

/// NOT_SERVING until `service` is ready, then SERVING.
async fn follow_readiness(reporter: HealthReporter, service: Arc<Service>) {
    let set = |status| {
        let reporter = reporter.clone();
        async move {
            for name in ["", wasmrpc_proto::grpc::SERVICE_NAME] {
                reporter.set_service_status(name, status).await;
            }
        }
    };
    if !service.is_ready() {
        set(ServingStatus::NotServing).await;
        while !service.is_ready() {
            tokio::time::sleep(READINESS_POLL).await;
        }
    }
    set(ServingStatus::Serving).await;
}

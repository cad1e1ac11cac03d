//! KServe v2 (the Open Inference Protocol) over gRPC: `inference.GRPCInferenceService` over the
//! same service and the same v2 code as the HTTP routes (`api/v2*.rs`), with gRPC health checking
//! and server reflection beside it. Its routes join the API's router, so the main port answers
//! `application/grpc` requests with them and every layer of the API applies; `--grpc-listen`
//! serves them alone on a port of their own.

mod deadline;
mod frames;
mod gate;
mod health;
mod inference;
mod status;

use axum::Router;
use axum::http::HeaderMap;
use axum::response::{IntoResponse as _, Response};
use wasmrpc_proto::grpc::grpc_inference_service_server::GrpcInferenceServiceServer;

use crate::api::AppState;
use crate::api::v2_repository::{LOAD_BODY_SLACK, MAX_CONTROL_BODY};

/// The gRPC services' routes (`/inference.GRPCInferenceService/…`, `/grpc.health.v1.Health/…`,
/// `/grpc.reflection.v1[alpha].ServerReflection/…`); the inference service behind the gate that
/// checks keys and reads the request within its limits (`gate.rs`).
pub fn routes(state: &AppState) -> Router<AppState> {
    // The gate has read and bounded every message already; this bounds only what a compressed
    // one may grow to once decompressed.
    let server_component_limit = state
        .service
        .component_limit(&crate::tenancy::Quota {
            max_component_bytes: u64::MAX,
            ..state
                .access
                .quota(&crate::tenancy::TenantId::default_tenant())
        })
        .bytes;
    let largest = state
        .limits
        .max_request_bytes
        .max(server_component_limit.saturating_add(LOAD_BODY_SLACK))
        .max(MAX_CONTROL_BODY);
    let inference = GrpcInferenceServiceServer::new(inference::Inference::new(state.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .max_decoding_message_size(largest)
        .max_encoding_message_size(usize::MAX);
    let router = Router::new()
        .route_service(&path_of(wasmrpc_proto::grpc::SERVICE_NAME), inference)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            gate::gate,
        ));
    let router = router.route_service(
        &path_of(health::SERVICE_NAME),
        health::service(state.service.clone()),
    );
    reflection(router)
}

/// The route of every method of the service named `name`.
fn path_of(name: &str) -> String {
    format!("/{name}/{{*rest}}")
}

/// Server reflection, v1 and v1alpha, listing the inference and health services (and itself),
/// so that `grpcurl` and other tools need no `.proto` file.
fn reflection(router: Router<AppState>) -> Router<AppState> {
    // Each version lists both, since both are served.
    let builder = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(wasmrpc_proto::grpc::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(
                tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
            )
            .include_reflection_service(false)
    };
    let router = match builder().build_v1() {
        Ok(v1) => router.route_service(&path_of("grpc.reflection.v1.ServerReflection"), v1),
        Err(e) => {
            tracing::error!(error = %e, "gRPC reflection (v1) is not served");
            router
        }
    };
    match builder().build_v1alpha() {
        Ok(v1alpha) => router.route_service(
            &path_of("grpc.reflection.v1alpha.ServerReflection"),
            v1alpha,
        ),
        Err(e) => {
            tracing::error!(error = %e, "gRPC reflection (v1alpha) is not served");
            router
        }
    }
}

/// Whether a request speaks gRPC: its content type is `application/grpc`, alone or with a
/// `+format` or parameters after it.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("application/grpc"))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['+', ';']))
}

/// The answer to a gRPC request for a service or method not served here: UNIMPLEMENTED.
pub fn unimplemented(path: &str) -> Response {
    tonic::Status::unimplemented(format!(
        "no gRPC method {path} here; this server serves {} (with grpc.health.v1.Health and \
         server reflection)",
        wasmrpc_proto::grpc::SERVICE_NAME
    ))
    .into_http::<tonic::body::Body>()
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_is_told_by_its_content_type() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static(v),
            );
            is_grpc(&h)
        };
        assert!(with("application/grpc"));
        assert!(with("application/grpc+proto"));
        assert!(with("application/grpc;charset=utf-8"));
        assert!(!with("application/grpcx"));
        assert!(!with("application/json"));
        assert!(!is_grpc(&HeaderMap::new()));
    }
}

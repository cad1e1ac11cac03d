//! The Open Inference Protocol (KServe v2) routes over the same service as v1: every method is a
//! model, its versions the model's versions. Keys apply as on v1; health stays open, as
//! `/healthz` does.
//!
//! Errors are `{"error": "<message>"}`, the protocol's shape (tritonclient cannot even print
//! another), with the canonical code in `x-wasmrpc-code` for clients that want it. The handlers
//! return the API's own [`ApiError`] and one layer ([`protocol_errors`], around the whole router)
//! rewrites every error answer under `/v2`: the extractors', the authentication's and the
//! router's own (no such route, wrong verb) included.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use wasmrpc_proto::body::Chunks;
use wasmrpc_proto::kserve::{
    self, InferOutput, InferRequestError, InferResponse, ModelConfig, ModelMetadata, ServerMetadata,
};
use wasmrpc_proto::{Code, Tensor, headers};

use super::AppState;
use super::auth::Tenant;
use super::body::{hold_arguments, read_call_body};
use super::error::ApiError;
use super::routes::Routes;
use crate::admission::BytesHeld;
use crate::service::Caller;
use crate::service::Placement;

/// Error bodies above this size are not rewritten (none of ours comes near it).
const MAX_ERROR_BODY: usize = 64 << 10;

/// The protocol extensions `GET /v2` advertises, by Triton's names: exactly those implemented.
/// Binary tensor data is `infer` here, the repository routes are `v2_repository.rs`, the
/// statistics `v2_stats.rs`; `/config` is the Triton model configuration (read-only).
const EXTENSIONS: &[&str] = &[
    "binary_tensor_data",
    "model_repository",
    "model_configuration",
    "statistics",
];

/// The `/v2` routes: `keyed` behind the key check (`auth`), health open.
pub fn routes(state: &AppState) -> Routes {
    let keyed = Routes::new()
        .get("/v2", server_metadata)
        .get("/v2/models/{name}", model_metadata)
        .get("/v2/models/{name}/versions/{version}", model_metadata)
        .get("/v2/models/{name}/ready", model_ready)
        .get("/v2/models/{name}/versions/{version}/ready", model_ready)
        .get("/v2/models/{name}/config", model_config)
        .get("/v2/models/{name}/versions/{version}/config", model_config)
        .post("/v2/models/{name}/infer", infer)
        .post("/v2/models/{name}/versions/{version}/infer", infer)
        .merge(super::v2_repository::routes())
        .merge(super::v2_stats::routes())
        .map(|router| {
            router.route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                super::auth::authenticate,
            ))
        });
    Routes::new()
        .merge(keyed)
        .get("/v2/health/live", live)
        .get("/v2/health/ready", ready)
}

/// A model in the path, with its version when the route has one.
#[derive(Debug, serde::Deserialize)]
pub struct ModelPath {
    /// The model's (method's) name.
    pub name: String,
    version: Option<String>,
}

impl ModelPath {
    /// The version asked for: `None` for the newest.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a version that is not a positive whole number.
    pub fn version(&self) -> Result<Option<u32>, ApiError> {
        parse_version(self.version.as_deref())
    }
}

/// A model version as the protocol writes it (`None`, or empty over gRPC, for the newest).
///
/// # Errors
/// INVALID_ARGUMENT for a version that is not a positive whole number.
pub fn parse_version(version: Option<&str>) -> Result<Option<u32>, ApiError> {
    match version {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(ApiError::new(
                Code::InvalidArgument,
                format!("model version `{v}` is not a positive whole number"),
            )),
        },
    }
}

/// Who the server is and which protocol extensions it implements (`GET /v2`, gRPC's
/// `ServerMetadata`).
pub fn server_metadata_value() -> ServerMetadata {
    ServerMetadata {
        name: "wasmrpc".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        extensions: EXTENSIONS.iter().map(|&e| e.to_owned()).collect(),
    }
}

/// Whether the server is ready for calls (`/v2/health/ready`, gRPC's `ServerReady`).
///
/// # Errors
/// UNAVAILABLE while the registry is still loading.
pub fn check_ready(state: &AppState) -> Result<(), ApiError> {
    if state.service.is_ready() {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::Unavailable,
            "the registry is still loading",
        ))
    }
}

/// A model's metadata (the newest version, or `version`) as the caller sees it.
///
/// # Errors
/// NOT_FOUND for a model (or version) the caller has not registered.
pub fn model_metadata_of(
    state: &AppState,
    caller: &Caller,
    name: &str,
    version: Option<u32>,
) -> Result<ModelMetadata, ApiError> {
    let info = state.service.describe(&caller.tenant, name, version)?;
    Ok(ModelMetadata::from(&info))
}

/// A model's Triton configuration as the caller sees it.
///
/// # Errors
/// As [`model_metadata_of`].
pub fn model_config_of(
    state: &AppState,
    caller: &Caller,
    name: &str,
    version: Option<u32>,
) -> Result<ModelConfig, ApiError> {
    let info = state.service.describe(&caller.tenant, name, version)?;
    Ok(ModelConfig::from(&info))
}

/// Whether the caller's model (or that version of it) is ready: it is when it exists (a
/// registered method is always ready to be called; its first call compiles it if need be).
///
/// # Errors
/// As [`model_metadata_of`].
pub fn check_model_ready(
    state: &AppState,
    caller: &Caller,
    name: &str,
    version: Option<u32>,
) -> Result<(), ApiError> {
    state.service.resolve(&caller.tenant, name, version)?;
    Ok(())
}

/// `GET /v2`: server metadata, with exactly the protocol extensions implemented.
async fn server_metadata() -> Json<ServerMetadata> {
    Json(server_metadata_value())
}

/// `GET /v2/health/live`: the process serves HTTP.
async fn live() -> StatusCode {
    StatusCode::OK
}

/// `GET /v2/health/ready`: the registry is loaded (as `/readyz`).
async fn ready(State(state): State<AppState>) -> Result<StatusCode, ApiError> {
    check_ready(&state).map(|()| StatusCode::OK)
}

/// `GET /v2/models/{name}[/versions/{v}]`.
async fn model_metadata(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    Path(model): Path<ModelPath>,
) -> Result<Json<ModelMetadata>, ApiError> {
    model_metadata_of(&state, &caller, &model.name, model.version()?).map(Json)
}

/// `GET /v2/models/{name}[/versions/{v}]/ready`: 200 when the model exists (a registered
/// method is always ready to be called; its first call compiles it if need be).
async fn model_ready(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    Path(model): Path<ModelPath>,
) -> Result<StatusCode, ApiError> {
    check_model_ready(&state, &caller, &model.name, model.version()?).map(|()| StatusCode::OK)
}

/// `GET /v2/models/{name}[/versions/{v}]/config`: a minimal Triton-style model config.
async fn model_config(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    Path(model): Path<ModelPath>,
) -> Result<Json<ModelConfig>, ApiError> {
    model_config_of(&state, &caller, &model.name, model.version()?).map(Json)
}

/// `POST /v2/models/{name}[/versions/{v}]/infer`: inputs matched to the signature by name,
/// outputs named, selected and ordered by `outputs`, `id` echoed, `parameters.timeout`
/// (microseconds) as the deadline. Inputs come as JSON or as binary tensor data after a JSON
/// header (`Inference-Header-Content-Length`), outputs go back in the form each asks for.
async fn infer(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    Path(model): Path<ModelPath>,
    RawQuery(query): RawQuery,
    // The request itself rather than a `HeaderMap`, which axum would clone for every call.
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let version = model.version()?;
    // `?worker=W|any` runs the call on a worker of the cluster (wasmrpc's extension; other
    // query parameters are ignored, as before).
    let placement = Placement::from_worker(worker_of(query.as_deref()).as_deref());
    state.service.check_placement(&placement)?;
    let header_length = inference_header_length(headers)?;
    // Held until the call's arguments are dropped, when this returns.
    let (bytes, mut held) = read_call_body(&state, &caller.tenant, headers, body).await?;
    // Binary inputs keep slices of `bytes` alive; nothing else of the body is kept.
    let decoded = kserve::decode_infer_request(&bytes, header_length);
    drop(bytes);
    let response = run_infer(
        &state, &caller, model.name, version, decoded, None, &placement, &mut held,
    )
    .await?;
    let encoded = kserve::encode_infer_response(&response)
        .map_err(|e| ApiError::new(Code::Internal, format!("encoding the outputs failed: {e}")))?;
    Ok(infer_response(encoded))
}

/// Run a decoded infer request of `caller` on model `name` (HTTP's and gRPC's alike): inputs
/// matched to the signature by name, outputs selected and ordered by `outputs`, `id` echoed, the
/// deadline the tighter of `parameters.timeout` and `deadline` (the transport's own, if any).
/// `held` (the request's bytes in the budget of bytes in flight) becomes the arguments' bytes.
///
/// A request that is not an infer request is refused before the model is looked up; a bad input
/// after, so that an unknown model's answer does not depend on the body.
///
/// # Errors
/// INVALID_ARGUMENT for a bad request or inputs that do not fit the signature, NOT_FOUND for a
/// model the caller has not registered, and every failure of the call itself.
#[allow(clippy::too_many_arguments)]
pub async fn run_infer(
    state: &AppState,
    caller: &Caller,
    name: String,
    version: Option<u32>,
    decoded: Result<kserve::InferRequest, InferRequestError>,
    deadline: Option<Duration>,
    placement: &Placement,
    held: &mut BytesHeld,
) -> Result<InferResponse, ApiError> {
    if let Ok(request) = &decoded {
        let inputs: Vec<&Tensor> = request.inputs.iter().map(|i| &i.tensor).collect();
        hold_arguments(held, inputs)?;
    }
    if let Err(e @ InferRequestError::Body(_)) = &decoded {
        return Err(ApiError::new(Code::InvalidArgument, e.to_string()));
    }
    let method = state.service.resolve(&caller.tenant, &name, version)?;
    let request = decoded.map_err(|e| ApiError::new(Code::InvalidArgument, e.to_string()))?;
    let signature = method.signature();
    let wanted = wanted_outputs(&signature.outputs, &request)?;
    let asked = request.timeout_us.map(Duration::from_micros);
    let timeout = tighter(asked, deadline).unwrap_or(Duration::ZERO);
    let args = args_by_name(&signature.inputs, request.inputs)?;
    let outputs = state
        .service
        .invoke(caller, &method, args, timeout, placement)
        .await?;
    let mut outputs: Vec<Option<Tensor>> = outputs.into_iter().map(Some).collect();
    let outputs = wanted
        .into_iter()
        .map(|(i, binary)| InferOutput {
            name: signature.outputs[i].name.clone(),
            // Each index once (checked by `wanted_outputs`), within the checked output count.
            tensor: outputs[i]
                .take()
                .unwrap_or_else(|| Tensor::vector(Vec::<u8>::new())),
            binary,
        })
        .collect();
    Ok(InferResponse {
        model_name: name,
        model_version: method.registration.version.to_string(),
        id: request.id,
        outputs,
    })
}

/// The tighter of two deadlines, either of which may be absent; zero counts as absent (it asks
/// for the server's default).
fn tighter(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    let a = a.filter(|d| !d.is_zero());
    let b = b.filter(|d| !d.is_zero());
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The `worker` parameter of a query string, percent-decoded (`w%2F1` is `w/1`).
fn worker_of(query: Option<&str>) -> Option<String> {
    let value = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("worker="))?;
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// The `Inference-Header-Content-Length` request header, when there is one.
fn inference_header_length(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(headers::INFERENCE_HEADER_CONTENT_LENGTH) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                Code::InvalidArgument,
                format!(
                    "Inference-Header-Content-Length must be a whole number of bytes, not {:?}",
                    String::from_utf8_lossy(value.as_bytes())
                ),
            )
        })
}

/// An encoded infer response as HTTP: JSON, or a JSON header and binary outputs, sent as the
/// separate buffers they are (the outputs' bytes are not copied into one body).
fn infer_response(encoded: kserve::EncodedResponse) -> Response {
    let mut response = Response::new(Body::new(Chunks::new(encoded.chunks)));
    let headers = response.headers_mut();
    match encoded.header_length {
        None => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(headers::JSON),
            );
        }
        Some(n) => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(headers::OCTET_STREAM),
            );
            headers.insert(
                headers::INFERENCE_HEADER_CONTENT_LENGTH,
                HeaderValue::from(n),
            );
        }
    }
    response
}

/// The inputs in the signature's order, each found by its name.
fn args_by_name(
    specs: &[wasmrpc_proto::TensorSpec],
    inputs: Vec<kserve::InferInput>,
) -> Result<Vec<Tensor>, ApiError> {
    let invalid = |message: String| ApiError::new(Code::InvalidArgument, message);
    let expected = || {
        specs
            .iter()
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut slots: Vec<Option<Tensor>> = vec![None; specs.len()];
    for input in inputs {
        let Some(i) = specs.iter().position(|s| s.name == input.name) else {
            return Err(invalid(format!(
                "unknown input `{}`; the model takes {}",
                input.name,
                expected()
            )));
        };
        if slots[i].replace(input.tensor).is_some() {
            return Err(invalid(format!("input `{}` is given twice", input.name)));
        }
    }
    specs
        .iter()
        .zip(slots)
        .map(|(spec, slot)| {
            slot.ok_or_else(|| {
                invalid(format!(
                    "missing input `{}`; the model takes {}",
                    spec.name,
                    expected()
                ))
            })
        })
        .collect()
}

/// The outputs to answer with, as indices into the signature's outputs and whether each goes
/// in binary, in the order asked for (all, by default).
fn wanted_outputs(
    specs: &[wasmrpc_proto::TensorSpec],
    request: &kserve::InferRequest,
) -> Result<Vec<(usize, bool)>, ApiError> {
    let Some(requested) = &request.outputs else {
        return Ok((0..specs.len())
            .map(|i| (i, request.wants_binary(None)))
            .collect());
    };
    let mut wanted: Vec<(usize, bool)> = Vec::with_capacity(requested.len());
    for output in requested {
        let name = &output.name;
        let Some(i) = specs.iter().position(|s| &s.name == name) else {
            return Err(ApiError::new(
                Code::InvalidArgument,
                format!(
                    "unknown output `{name}`; the model returns {}",
                    specs
                        .iter()
                        .map(|s| format!("`{}`", s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if wanted.iter().any(|&(w, _)| w == i) {
            return Err(ApiError::new(
                Code::InvalidArgument,
                format!("output `{name}` is asked for twice"),
            ));
        }
        wanted.push((i, request.wants_binary(Some(output))));
    }
    Ok(wanted)
}

/// Rewrite every error answer under `/v2` into the protocol's `{"error": "<message>"}`, keeping
/// its status and headers, with the canonical code in `x-wasmrpc-code`. It wraps the whole
/// router, so that a path under `/v2` that no route serves (Triton's statistics, say) or a verb
/// a route does not take is answered in the protocol's shape too; other paths pass untouched.
pub async fn protocol_errors(req: Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path();
    let v2 = path == "/v2" || path.starts_with("/v2/");
    let response = next.run(req).await;
    if !v2 {
        return response;
    }
    if response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
    let (message, code) = match serde_json::from_slice::<wasmrpc_proto::ErrorBody>(&bytes) {
        Ok(v1) => (v1.error.message, Some(v1.error.code)),
        // An extractor's plain-text rejection, or an empty body.
        Err(_) => {
            let text = String::from_utf8_lossy(&bytes).trim().to_string();
            let text = if text.is_empty() {
                parts
                    .status
                    .canonical_reason()
                    .unwrap_or("request failed")
                    .to_string()
            } else {
                text
            };
            (text, None)
        }
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(headers::JSON),
    );
    if let Some(code) = code.and_then(|c| HeaderValue::from_str(c.as_str()).ok()) {
        parts.headers.insert(headers::CODE, code);
    }
    let body = serde_json::to_vec(&kserve::ErrorBody { error: message }).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::worker_of;

    #[test]
    fn the_worker_parameter_is_found_and_percent_decoded() {
        assert_eq!(worker_of(None), None);
        assert_eq!(worker_of(Some("a=1&b=2")), None);
        assert_eq!(worker_of(Some("worker=any")).as_deref(), Some("any"));
        assert_eq!(
            worker_of(Some("x=1&worker=job%2F1")).as_deref(),
            Some("job/1")
        );
        assert_eq!(worker_of(Some("worker=w%2")).as_deref(), Some("w%2"));
        assert_eq!(worker_of(Some("worker=%zz")).as_deref(), Some("%zz"));
    }
}

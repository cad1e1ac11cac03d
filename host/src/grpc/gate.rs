//! The gate in front of the inference service, doing for a gRPC request what the API's
//! middleware and body readers do for an HTTP one, with the same code: the key checked from the
//! `authorization` metadata before anything is read (`ServerLive` and `ServerReady` are open, as
//! the health routes are), then the whole request read within its limit and the body read
//! timeout, its bytes taken from the budget of bytes in flight. A refusal is the request's whole
//! gRPC answer; an admitted request carries [`Gated`] to the service.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;

use super::{deadline, frames, status};
use crate::admission::BytesHeld;
use crate::api::AppState;
use crate::api::auth::{caller_of, principal_of};
use crate::api::body::read_budgeted;
use crate::api::error::ApiError;
use crate::api::v2_repository::{LOAD_BODY_SLACK, MAX_CONTROL_BODY};
use crate::service::Caller;

/// The trailer (or, trailers only, header) with a gRPC answer's status code.
const GRPC_STATUS: &str = "grpc-status";

/// The 5 bytes before a gRPC message (a compression flag and its length): a message may be the
/// whole limit, its frame these bytes more.
const FRAME_HEADER: usize = 5;

/// What the gate found out about an admitted request, for the service.
#[derive(Clone)]
pub struct Gated {
    /// Who sent it.
    pub caller: Caller,
    /// When it arrived, for the deadline.
    pub arrived: Instant,
    /// The client's deadline (`grpc-timeout`), counted from `arrived`.
    pub timeout: Option<Duration>,
    /// The request's bytes in the budget of bytes in flight, for the service to keep until the
    /// call's arguments are dropped.
    held: Arc<Mutex<Option<BytesHeld>>>,
}

impl Gated {
    /// The request's hold on the budget of bytes in flight (once; `None` after).
    pub fn take_held(&self) -> Option<BytesHeld> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// The methods of the service, as the gate tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rpc {
    /// Health: open to anyone, as `/v2/health/*` is.
    Open,
    /// `ModelInfer`: a call's request, up to `--max-request-bytes`.
    Infer,
    /// `RepositoryModelLoad`: a component, up to the caller's component limit.
    Load,
    /// Everything else: a few fields.
    Control,
}

impl Rpc {
    fn of(path: &str) -> Rpc {
        match path.rsplit('/').next() {
            Some("ServerLive" | "ServerReady") => Rpc::Open,
            Some("ModelInfer") => Rpc::Infer,
            Some("RepositoryModelLoad") => Rpc::Load,
            _ => Rpc::Control,
        }
    }
}

/// The middleware: admit the request (see the module's documentation) or answer it with the
/// refusal. An admitted `ModelInfer` is answered with the gate's own framing (`frames.rs`) when
/// it can be, anything else by tonic.
pub async fn gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let arrived = Instant::now();
    let rpc = Rpc::of(req.uri().path());
    if rpc == Rpc::Open {
        return next.run(req).await;
    }
    let (parts, bytes, gated) = match admit(&state, req, rpc, arrived).await {
        Ok(admitted) => admitted,
        Err(e) => return status::response(e),
    };
    if rpc == Rpc::Infer
        && let Some(message) = frames::one_message(&parts.headers, &bytes)
    {
        return frames::serve(&state, &gated, message).await;
    }
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(gated);
    client_faults_as_invalid_argument(next.run(req).await)
}

/// tonic answers a message it cannot decode (not protobuf, no message at all) with INTERNAL,
/// though the fault is the client's: the request was read whole by the gate, so an INTERNAL that
/// the service did not make (each of those carries a request id) can only be that. It becomes
/// INVALID_ARGUMENT, its message (what is wrong with the message) kept.
fn client_faults_as_invalid_argument(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let internal = headers
        .get(GRPC_STATUS)
        .is_some_and(|v| v.as_bytes() == b"13");
    if internal && !headers.contains_key(wasmrpc_proto::headers::REQUEST_ID) {
        headers.insert(GRPC_STATUS, HeaderValue::from_static("3"));
    }
    response
}

async fn admit(
    state: &AppState,
    req: Request,
    rpc: Rpc,
    arrived: Instant,
) -> Result<(Parts, Bytes, Gated), ApiError> {
    let principal = principal_of(state, req.headers())?;
    let caller = caller_of(state, &principal)?;
    let component = (rpc == Rpc::Load).then(|| state.service.component_limit(&caller.quota));
    let limit = match (rpc, &component) {
        (Rpc::Infer, _) => state.limits.max_request_bytes,
        (Rpc::Load, Some(component)) => component.bytes.saturating_add(LOAD_BODY_SLACK),
        _ => MAX_CONTROL_BODY,
    };
    // Worded only when needed: most requests are within their limit.
    let too_large = || match (rpc, &component) {
        (Rpc::Infer, _) => format!(
            "the ModelInfer request is over the server's limit of {limit} bytes \
             (--max-request-bytes)"
        ),
        (Rpc::Load, Some(component)) => format!(
            "{}: the load request may be {limit} bytes, the component and {LOAD_BODY_SLACK} \
             bytes besides",
            component.refusal()
        ),
        _ => format!("the request is over the limit of {limit} bytes"),
    };
    let (parts, body) = req.into_parts();
    let (bytes, held) = read_budgeted(
        state,
        &caller.tenant,
        &parts.headers,
        body,
        limit.saturating_add(FRAME_HEADER),
    )
    .await
    .map_err(|e| e.with_message_if_too_large(too_large()))?;
    let timeout = deadline::grpc_timeout(&parts.headers);
    let gated = Gated {
        caller,
        arrived,
        timeout,
        held: Arc::new(Mutex::new(Some(held))),
    };
    Ok((parts, bytes, gated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_health_methods_are_open() {
        let rpc = |m: &str| Rpc::of(&format!("/inference.GRPCInferenceService/{m}"));
        assert_eq!(rpc("ServerLive"), Rpc::Open);
        assert_eq!(rpc("ServerReady"), Rpc::Open);
        assert_eq!(rpc("ModelInfer"), Rpc::Infer);
        assert_eq!(rpc("RepositoryModelLoad"), Rpc::Load);
        for m in ["ModelReady", "ServerMetadata", "ModelMetadata", "Nope", ""] {
            assert_eq!(rpc(m), Rpc::Control, "{m}");
        }
    }
}

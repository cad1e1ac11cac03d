//! The `/v1/methods` routes: register, list, describe, delete, call.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use wasmrpc_proto::json::{self, CallRequestError};
use wasmrpc_proto::{CallRequest, CallResponse, Code, DeleteResponse, MethodList, headers};

use super::AppState;
use super::auth::Tenant;
use super::body::{hold_arguments, read_budgeted, read_call_body};
use super::error::ApiError;
use super::lifecycle;
use super::path::MethodName;
use super::query::ApiQuery;
use crate::service::Placement;

/// `?export=M` on registration.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterQuery {
    export: Option<String>,
}

/// `?version=N` on calls and descriptions.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionQuery {
    version: Option<u32>,
}

/// `PUT /v1/methods/{name}`: register a component (201 for a new name, 200 for a new version).
pub async fn register(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    ApiQuery(query): ApiQuery<RegisterQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // The tenant's quota, within the server's own limit: refused before the body is read past it.
    let limit = state.service.component_limit(&caller.quota);
    // The body's bytes stay held in the budget of bytes in flight until it is registered.
    let (bytes, _held) = read_budgeted(&state, &caller.tenant, &headers, body, limit.bytes)
        .await
        .map_err(|e| {
            if limit.by_quota {
                e.with_message_if_too_large(limit.refusal())
            } else {
                e
            }
        })?;
    let (info, created) = state
        .service
        .register(&caller, &name, query.export.as_deref(), bytes.to_vec())
        .await?;
    lifecycle::undo_if_tenant_deleted(&state, &caller).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(info)).into_response())
}

/// `GET /v1/methods`: every method with its signature.
pub async fn list(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
) -> Result<Json<MethodList>, ApiError> {
    let methods = state.service.list(&caller.tenant);
    Ok(Json(MethodList { methods }))
}

/// `GET /v1/methods/{name}`: one method's signature, versions, digest, size and time.
pub async fn describe(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    ApiQuery(query): ApiQuery<VersionQuery>,
) -> Result<Response, ApiError> {
    let info = state
        .service
        .describe(&caller.tenant, &name, query.version)?;
    Ok(Json(info).into_response())
}

/// `DELETE /v1/methods/{name}[?version=N]`: unregister every version, or only version N.
pub async fn delete(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    ApiQuery(query): ApiQuery<VersionQuery>,
) -> Result<Response, ApiError> {
    let deleted_versions = state
        .service
        .delete(&caller.tenant, &name, query.version)
        .await?;
    Ok(Json(DeleteResponse {
        deleted_versions,
        name,
    })
    .into_response())
}

/// `?version=N` and `?worker=W|any` on calls.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallQuery {
    version: Option<u32>,
    /// Run the call on this worker of the cluster, or on any (`any`); without it, here.
    worker: Option<String>,
}

/// `POST /v1/methods/{name}/call`: `{"args": [...], "timeout_ms": 0}` → `{"outputs": [...]}`.
pub async fn call(
    State(state): State<AppState>,
    Tenant(caller): Tenant,
    MethodName(name): MethodName,
    ApiQuery(query): ApiQuery<CallQuery>,
    // The request itself rather than a `HeaderMap`, which axum would clone for every call.
    request: Request,
) -> Result<Response, ApiError> {
    let placement = Placement::from_worker(query.worker.as_deref());
    // Refused before the body is read.
    state.service.check_placement(&placement)?;
    let (parts, body) = request.into_parts();
    // Held until the call's arguments are dropped, when this returns.
    let (bytes, mut held) = read_call_body(&state, &caller.tenant, &parts.headers, body).await?;
    // One pass over the body: each argument goes straight into its tensor. A body that is not a
    // call request is refused before the method is looked up; a bad argument after, so that its
    // message can name the argument.
    let decoded = json::decode_call_request(&bytes);
    drop(bytes);
    if let Ok(request) = &decoded {
        hold_arguments(&mut held, &request.args)?;
    }
    let request = match decoded {
        Err(CallRequestError::Body(e)) => {
            return Err(ApiError::new(
                Code::InvalidArgument,
                format!(
                    "the body is not a valid call request ({{\"args\": [tensor, ...], \"timeout_ms\": N}}): {e}"
                ),
            ));
        }
        other => other,
    };
    let method = state
        .service
        .resolve(&caller.tenant, &name, query.version)?;
    let CallRequest { args, timeout_ms } = request.map_err(|e| match e {
        CallRequestError::Argument { index, error } => {
            let arg = method
                .signature()
                .inputs
                .get(index)
                .map_or_else(String::new, |s| format!(" (`{}`)", s.name));
            ApiError::new(
                Code::InvalidArgument,
                format!("argument {index}{arg}: {error}"),
            )
        }
        CallRequestError::Body(e) => ApiError::new(Code::InvalidArgument, e),
    })?;
    let outputs = state
        .service
        .invoke(
            &caller,
            &method,
            args,
            Duration::from_millis(timeout_ms),
            &placement,
        )
        .await?;
    let body = serde_json::to_vec(&CallResponse { outputs })
        .map_err(|e| ApiError::new(Code::Internal, format!("encoding the outputs failed: {e}")))?;
    Ok(([(header::CONTENT_TYPE, headers::JSON)], body).into_response())
}

//! The `{name}` path segment, refused with the API's JSON error when it is not valid UTF-8.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use wasmrpc_proto::Code;

use super::error::ApiError;

/// The method name from the route.
#[derive(Debug)]
pub struct MethodName(pub String);

impl<S: Send + Sync> FromRequestParts<S> for MethodName {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(name)) => Ok(MethodName(name)),
            Err(rejection) => Err(ApiError::new(
                Code::InvalidArgument,
                format!("bad method name in the path: {}", rejection.body_text()),
            )),
        }
    }
}

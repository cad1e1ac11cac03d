//! A query-string extractor whose refusals are the API's JSON errors, not axum's plain text.

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use wasmrpc_proto::Code;

use super::error::ApiError;

/// `?key=value` parameters, refused as INVALID_ARGUMENT when unknown or malformed.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::new(
                Code::InvalidArgument,
                format!("bad query string: {}", rejection.body_text()),
            )),
        }
    }
}

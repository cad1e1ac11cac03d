//! Errors as gRPC statuses: the API's one error type, decided in the one place that decides it
//! for HTTP too ([`ApiError::answer`]), its canonical code sent as the gRPC status code of the
//! same number. A withheld internal error's request id and a `Retry-After` go as metadata.

use axum::response::{IntoResponse as _, Response};
use tonic::metadata::{MetadataKey, MetadataValue};

use crate::api::error::ApiError;

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        let answer = e.answer();
        // The canonical codes are gRPC's, number for number.
        let code = tonic::Code::from_i32(i32::from(answer.status.code().number()));
        let mut status = tonic::Status::new(code, answer.status.message());
        let metadata = status.metadata_mut();
        if let Some(id) = answer
            .request_id
            .and_then(|id| MetadataValue::try_from(id.as_str()).ok())
        {
            metadata.insert(wasmrpc_proto::headers::REQUEST_ID, id);
        }
        if let Some((name, value)) = answer.header
            && let (Ok(key), Ok(value)) = (
                MetadataKey::from_bytes(name.as_str().as_bytes()),
                MetadataValue::try_from(value.as_bytes()),
            )
        {
            metadata.insert(key, value);
        }
        status
    }
}

/// An error as the whole answer to a gRPC request (trailers only), for refusals made before the
/// service runs.
pub fn response(e: ApiError) -> Response {
    tonic::Status::from(e)
        .into_http::<tonic::body::Body>()
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmrpc_proto::Code;

    #[test]
    fn every_canonical_code_is_the_grpc_code_of_its_number_with_its_message() {
        for code in Code::ALL {
            let status = tonic::Status::from(ApiError::new(code, "the client's own words"));
            assert_eq!(status.code() as i32, i32::from(code.number()), "{code:?}");
            assert_eq!(format!("{:?}", status.code()).to_lowercase(), {
                let name = code.as_str().replace('_', "");
                name.to_lowercase()
            });
            assert_eq!(status.message(), "the client's own words");
        }
    }

    #[test]
    fn an_internal_failure_says_only_its_request_id() {
        let status = tonic::Status::from(ApiError::internal("redb: /var/lib/wasmrpc is corrupt"));
        assert_eq!(status.code(), tonic::Code::Internal);
        let id = status
            .metadata()
            .get(wasmrpc_proto::headers::REQUEST_ID)
            .expect("a request id")
            .to_str()
            .unwrap()
            .to_owned();
        assert!(status.message().contains(&id), "{}", status.message());
        assert!(!status.message().contains("redb"), "{}", status.message());
    }
}

//! A status: a canonical code and a message, and the JSON error body that carries one.
//!
//! Every surface reports failures as a [`Status`]; the client re-exports it as its `Error`.

use crate::code::Code;
use crate::tensor::TensorError;

/// An error with its canonical code, as the server (or the client itself) reported it.
///
/// Every fallible operation of the client returns this type (as `wasmrpc_client::Error`),
/// whether the server refused the request, the guest failed, the deadline passed or the server
/// could not be reached; the predicates (`is_deadline_exceeded`, `is_not_found`…) test the code.
/// Its fields are private and it is `#[non_exhaustive]`, so it can grow (details, a request id)
/// without breaking anyone.
///
/// ```
/// use wasmrpc_proto::{Code, Status};
/// let e = Status::new(Code::DeadlineExceeded, "the call did not finish within 300 ms");
/// assert!(e.is_deadline_exceeded());
/// assert_eq!(e.to_string(), "DEADLINE_EXCEEDED: the call did not finish within 300 ms");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
#[non_exhaustive]
pub struct Status {
    code: Code,
    message: String,
}

impl Status {
    /// An error with this code and message.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// let e = Status::new(Code::NotFound, "no method named `nope` is registered");
    /// assert_eq!(e.code(), Code::NotFound);
    /// ```
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The canonical code.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert_eq!(Status::new(Code::Internal, "trap").code(), Code::Internal);
    /// ```
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert_eq!(Status::new(Code::Internal, "trap").message(), "trap");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The code and the message, taken apart.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// let (code, message) = Status::new(Code::NotFound, "gone").into_parts();
    /// assert_eq!((code, message.as_str()), (Code::NotFound, "gone"));
    /// ```
    pub fn into_parts(self) -> (Code, String) {
        (self.code, self.message)
    }

    /// Whether the call ran past its deadline (in the client or in the host).
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::DeadlineExceeded, "").is_deadline_exceeded());
    /// assert!(!Status::new(Code::Internal, "").is_deadline_exceeded());
    /// ```
    pub fn is_deadline_exceeded(&self) -> bool {
        self.code == Code::DeadlineExceeded
    }

    /// Whether the method (or the thing asked for) does not exist.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::NotFound, "").is_not_found());
    /// ```
    pub fn is_not_found(&self) -> bool {
        self.code == Code::NotFound
    }

    /// Whether the arguments were refused.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::InvalidArgument, "").is_invalid_argument());
    /// ```
    pub fn is_invalid_argument(&self) -> bool {
        self.code == Code::InvalidArgument
    }

    /// Whether a limit or quota was hit.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::ResourceExhausted, "").is_resource_exhausted());
    /// ```
    pub fn is_resource_exhausted(&self) -> bool {
        self.code == Code::ResourceExhausted
    }

    /// Whether the service is unavailable (retrying later may help).
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::Unavailable, "").is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        self.code == Code::Unavailable
    }

    /// Whether the guest trapped or the server failed internally.
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::Internal, "").is_internal());
    /// ```
    pub fn is_internal(&self) -> bool {
        self.code == Code::Internal
    }

    /// Whether the call was cancelled before it finished (for example because the blocking
    /// client's runtime thread stopped).
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::Cancelled, "").is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.code == Code::Cancelled
    }

    /// Whether the key was missing or refused (UNAUTHENTICATED) or does not allow the request
    /// (PERMISSION_DENIED).
    ///
    /// ```
    /// use wasmrpc_proto::{Code, Status};
    /// assert!(Status::new(Code::Unauthenticated, "").is_auth());
    /// assert!(Status::new(Code::PermissionDenied, "").is_auth());
    /// ```
    pub fn is_auth(&self) -> bool {
        matches!(self.code, Code::Unauthenticated | Code::PermissionDenied)
    }
}

/// A tensor that cannot be built or read is an INVALID_ARGUMENT, so `?` works on
/// [`Tensor`](crate::Tensor) constructors in functions returning [`Status`].
///
/// ```
/// use wasmrpc_proto::{Status, Tensor};
/// fn two_by_two() -> Result<Tensor, Status> {
///     Ok(Tensor::from_vec([2, 2], vec![1i32, 2, 3])?)
/// }
/// assert!(two_by_two().unwrap_err().is_invalid_argument());
/// ```
impl From<TensorError> for Status {
    fn from(e: TensorError) -> Self {
        Status::new(Code::InvalidArgument, e.to_string())
    }
}

/// The JSON error body of the native API: `{"error": {"code": "...", "message": "..."}}`.
///
/// ```
/// use wasmrpc_proto::{Code, ErrorBody, Status};
/// let body: ErrorBody =
///     serde_json::from_str(r#"{"error":{"code":"NOT_FOUND","message":"no such method"}}"#).unwrap();
/// assert_eq!(Status::from(body).code(), Code::NotFound);
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`]: the canonical code name and the message.
///
/// ```
/// use wasmrpc_proto::{Code, ErrorBody, Status};
/// let body = ErrorBody::from(Status::new(Code::Internal, "trap"));
/// assert_eq!(body.error.code, Code::Internal);
/// assert_eq!(body.error.message, "trap");
/// ```
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ErrorDetail {
    /// Canonical code name.
    pub code: Code,
    /// Message.
    pub message: String,
}

impl From<Status> for ErrorBody {
    fn from(e: Status) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code: e.code,
                message: e.message,
            },
        }
    }
}

impl From<ErrorBody> for Status {
    fn from(b: ErrorBody) -> Self {
        Status::new(b.error.code, b.error.message)
    }
}

//! The one error type of the client: a canonical code and a message.

use crate::code::Code;

/// An error with its canonical code, as the server (or the client itself) reported it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Error {
    /// The canonical code.
    pub code: Code,
    /// What went wrong, for people.
    pub message: String,
}

impl Error {
    /// An error with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    /// The canonical code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether the call ran past its deadline.
    pub fn is_deadline_exceeded(&self) -> bool {
        self.code == Code::DeadlineExceeded
    }

    /// Whether the method (or the thing asked for) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == Code::NotFound
    }

    /// Whether the arguments were refused.
    pub fn is_invalid_argument(&self) -> bool {
        self.code == Code::InvalidArgument
    }

    /// Whether a limit or quota was hit.
    pub fn is_resource_exhausted(&self) -> bool {
        self.code == Code::ResourceExhausted
    }

    /// Whether the service is unavailable (retrying later may help).
    pub fn is_unavailable(&self) -> bool {
        self.code == Code::Unavailable
    }

    /// Whether the guest trapped or the server failed internally.
    pub fn is_internal(&self) -> bool {
        self.code == Code::Internal
    }
}

/// The JSON error body of the native API: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ErrorDetail {
    /// Canonical code name.
    pub code: Code,
    /// Message.
    pub message: String,
}

impl From<Error> for ErrorBody {
    fn from(e: Error) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code: e.code,
                message: e.message,
            },
        }
    }
}

impl From<ErrorBody> for Error {
    fn from(b: ErrorBody) -> Self {
        Error::new(b.error.code, b.error.message)
    }
}

//! [`Error`]: why a method failed, one case per canonical code of the WIT `error` variant.
//!
//! The host maps each case onto the status of the same name (`invalid-argument` becomes
//! `INVALID_ARGUMENT`, HTTP 400, and so on); the message reaches the caller as written.

use std::fmt;

use crate::__private::WitError;

/// Why a method failed. Mirrors the WIT `error` variant case for case.
///
/// ```
/// use wasmrpc_guest::Error;
///
/// let err = Error::invalid_argument("shapes [2] and [3] differ");
/// assert_eq!(err.code(), "INVALID_ARGUMENT");
/// assert_eq!(err.message(), "shapes [2] and [3] differ");
/// assert_eq!(err.to_string(), "INVALID_ARGUMENT: shapes [2] and [3] differ");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The arguments are wrong regardless of state: dtype, shape, values.
    InvalidArgument(String),
    /// The call cannot run in the current state.
    FailedPrecondition(String),
    /// An index or value past the valid range.
    OutOfRange(String),
    /// The method (or a case of it) is not implemented.
    Unimplemented(String),
    /// A bug in the function.
    Internal(String),
    /// The function refused to allocate what the call needs.
    ResourceExhausted(String),
    /// The requested item does not exist.
    NotFound(String),
}

impl Error {
    /// The arguments are wrong regardless of state: dtype, shape, values.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// The call cannot run in the current state.
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Error::FailedPrecondition(message.into())
    }

    /// An index or value past the valid range.
    pub fn out_of_range(message: impl Into<String>) -> Self {
        Error::OutOfRange(message.into())
    }

    /// The method (or a case of it) is not implemented.
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Error::Unimplemented(message.into())
    }

    /// A bug in the function.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// The function refused to allocate what the call needs.
    pub fn resource_exhausted(message: impl Into<String>) -> Self {
        Error::ResourceExhausted(message.into())
    }

    /// The requested item does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Error::NotFound(message.into())
    }

    /// The canonical code name: `INVALID_ARGUMENT`, `FAILED_PRECONDITION`…
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::FailedPrecondition(_) => "FAILED_PRECONDITION",
            Error::OutOfRange(_) => "OUT_OF_RANGE",
            Error::Unimplemented(_) => "UNIMPLEMENTED",
            Error::Internal(_) => "INTERNAL",
            Error::ResourceExhausted(_) => "RESOURCE_EXHAUSTED",
            Error::NotFound(_) => "NOT_FOUND",
        }
    }

    /// The message, without the code.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::FailedPrecondition(m)
            | Error::OutOfRange(m)
            | Error::Unimplemented(m)
            | Error::Internal(m)
            | Error::ResourceExhausted(m)
            | Error::NotFound(m) => m,
        }
    }

    /// The same error with `context: ` put before its message.
    pub(crate) fn context(mut self, context: impl fmt::Display) -> Self {
        let (Error::InvalidArgument(m)
        | Error::FailedPrecondition(m)
        | Error::OutOfRange(m)
        | Error::Unimplemented(m)
        | Error::Internal(m)
        | Error::ResourceExhausted(m)
        | Error::NotFound(m)) = &mut self;
        *m = format!("{context}: {m}");
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for Error {}

impl From<Error> for WitError {
    fn from(err: Error) -> Self {
        match err {
            Error::InvalidArgument(m) => WitError::InvalidArgument(m),
            Error::FailedPrecondition(m) => WitError::FailedPrecondition(m),
            Error::OutOfRange(m) => WitError::OutOfRange(m),
            Error::Unimplemented(m) => WitError::Unimplemented(m),
            Error::Internal(m) => WitError::Internal(m),
            Error::ResourceExhausted(m) => WitError::ResourceExhausted(m),
            Error::NotFound(m) => WitError::NotFound(m),
        }
    }
}

impl From<WitError> for Error {
    fn from(err: WitError) -> Self {
        match err {
            WitError::InvalidArgument(m) => Error::InvalidArgument(m),
            WitError::FailedPrecondition(m) => Error::FailedPrecondition(m),
            WitError::OutOfRange(m) => Error::OutOfRange(m),
            WitError::Unimplemented(m) => Error::Unimplemented(m),
            WitError::Internal(m) => Error::Internal(m),
            WitError::ResourceExhausted(m) => Error::ResourceExhausted(m),
            WitError::NotFound(m) => Error::NotFound(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_code() {
        let err = Error::out_of_range("index 9").context("argument `i`");
        assert_eq!(err, Error::out_of_range("argument `i`: index 9"));
    }

    #[test]
    fn converts_to_and_from_wit_case_for_case() {
        for err in [
            Error::invalid_argument("a"),
            Error::failed_precondition("b"),
            Error::out_of_range("c"),
            Error::unimplemented("d"),
            Error::internal("e"),
            Error::resource_exhausted("f"),
            Error::not_found("g"),
        ] {
            assert_eq!(Error::from(WitError::from(err.clone())), err);
        }
    }
}

//! The canonical error codes that TensorFlow and gRPC share, with their HTTP mapping.
//!
//! Every error wasmrpc reports, on any surface, carries one of these codes.

use std::fmt;
use std::str::FromStr;

/// A canonical status code, as in `tf.errors` and gRPC.
///
/// ```
/// use wasmrpc_proto::Code;
/// let code: Code = "DEADLINE_EXCEEDED".parse().unwrap();
/// assert_eq!((code.number(), code.http_status()), (4, 504));
/// assert_eq!(code.to_string(), "DEADLINE_EXCEEDED");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The operation was cancelled, typically by the caller.
    Cancelled,
    /// An error that fits no other code.
    Unknown,
    /// The caller gave a bad argument: dtype, shape, value, body.
    InvalidArgument,
    /// The deadline passed before the operation finished.
    DeadlineExceeded,
    /// The method (or tenant resource) does not exist.
    NotFound,
    /// The thing the caller tried to create exists already.
    AlreadyExists,
    /// The caller may not do this.
    PermissionDenied,
    /// A quota, limit or capacity was exhausted (memory, output size, concurrency).
    ResourceExhausted,
    /// The system is not in a state that allows the operation.
    FailedPrecondition,
    /// The operation was aborted, typically by a conflict.
    Aborted,
    /// A value past the valid range.
    OutOfRange,
    /// The operation is not implemented or supported.
    Unimplemented,
    /// An invariant broke: a bug, or a guest that trapped.
    Internal,
    /// The service (or a stored module) is unavailable right now; retrying may help.
    Unavailable,
    /// Data was lost or corrupted.
    DataLoss,
    /// The request has no valid credentials.
    Unauthenticated,
}

impl Code {
    /// Every code, in numeric order.
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::Code::ALL.len(), 16);
    /// ```
    pub const ALL: [Code; 16] = [
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The name used on the wire, e.g. `"DEADLINE_EXCEEDED"`.
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::Code::NotFound.as_str(), "NOT_FOUND");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The gRPC number of the code (1 = CANCELLED … 16 = UNAUTHENTICATED).
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::Code::Unauthenticated.number(), 16);
    /// ```
    pub fn number(self) -> u8 {
        Code::ALL
            .iter()
            .position(|c| *c == self)
            .map_or(2, |i| i as u8 + 1)
    }

    /// The HTTP status the native API answers with for this code.
    ///
    /// RESOURCE_EXHAUSTED is 429 here; a request body over its limit is answered with 413 instead.
    ///
    /// ```
    /// assert_eq!(wasmrpc_proto::Code::InvalidArgument.http_status(), 400);
    /// ```
    pub fn http_status(self) -> u16 {
        match self {
            Code::Cancelled => 499,
            Code::Unknown | Code::Internal | Code::DataLoss => 500,
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
            Code::DeadlineExceeded => 504,
            Code::NotFound => 404,
            Code::AlreadyExists | Code::Aborted => 409,
            Code::PermissionDenied => 403,
            Code::ResourceExhausted => 429,
            Code::Unimplemented => 501,
            Code::Unavailable => 503,
            Code::Unauthenticated => 401,
        }
    }

    /// The code a bare HTTP status most likely means, for responses without a JSON error body
    /// (a proxy's 502, say).
    ///
    /// ```
    /// use wasmrpc_proto::Code;
    /// assert_eq!(Code::from_http_status(502), Code::Unavailable);
    /// assert_eq!(Code::from_http_status(418), Code::Unknown);
    /// ```
    pub fn from_http_status(status: u16) -> Code {
        match status {
            400 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::NotFound,
            409 => Code::Aborted,
            413 | 429 => Code::ResourceExhausted,
            499 => Code::Cancelled,
            501 => Code::Unimplemented,
            502 | 503 => Code::Unavailable,
            504 => Code::DeadlineExceeded,
            _ => Code::Unknown,
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text was not one of the canonical code names.
///
/// ```
/// let err = "NOPE".parse::<wasmrpc_proto::Code>().unwrap_err();
/// assert_eq!(err.to_string(), "`NOPE` is not a canonical error code");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a canonical error code")]
pub struct UnknownCode(pub String);

impl FromStr for Code {
    type Err = UnknownCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Code::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCode(s.to_owned()))
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Code {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(name.parse().unwrap_or(Code::Unknown))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_grpc() {
        assert_eq!(Code::Cancelled.number(), 1);
        assert_eq!(Code::DeadlineExceeded.number(), 4);
        assert_eq!(Code::Unauthenticated.number(), 16);
    }

    #[test]
    fn names_round_trip() {
        for code in Code::ALL {
            assert_eq!(code.as_str().parse::<Code>().unwrap(), code);
        }
        assert!("NOPE".parse::<Code>().is_err());
    }

    #[test]
    fn http_mapping_matches_the_contract() {
        assert_eq!(Code::DeadlineExceeded.http_status(), 504);
        assert_eq!(Code::ResourceExhausted.http_status(), 429);
        assert_eq!(Code::FailedPrecondition.http_status(), 400);
        assert_eq!(Code::Cancelled.http_status(), 499);
    }
}

//! The gRPC deadline: the `grpc-timeout` header a client sends with its request (tonic serves it
//! only through its own transport, which this server does not use), counted from when the request
//! arrived. `ModelInfer` runs under the tighter of it and the `timeout` parameter, by the one
//! deadline rule below every transport (`admission`).

use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use wasmrpc_proto::Code;

use crate::api::error::ApiError;

/// The header a gRPC client's deadline travels in.
const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The time `grpc-timeout` allows: at most 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
/// `None` for a header that is absent or not of that form (ignored, as gRPC servers do).
pub fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// What is left of the client's deadline, `timeout` from `arrived`: `None` without one.
///
/// # Errors
/// DEADLINE_EXCEEDED when nothing is left (reading the request took all of it).
pub fn remaining(
    timeout: Option<Duration>,
    arrived: Instant,
) -> Result<Option<Duration>, ApiError> {
    let Some(timeout) = timeout else {
        return Ok(None);
    };
    match timeout.checked_sub(arrived.elapsed()) {
        Some(left) if !left.is_zero() => Ok(Some(left)),
        _ => Err(ApiError::new(
            Code::DeadlineExceeded,
            format!(
                "the gRPC deadline ({} s) passed before the call could start",
                timeout.as_secs_f64()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &'static str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert(GRPC_TIMEOUT, axum::http::HeaderValue::from_static(v));
        grpc_timeout(&h)
    }

    #[test]
    fn grpc_timeout_reads_every_unit_and_ignores_what_is_not_one() {
        assert_eq!(parse("500m"), Some(Duration::from_millis(500)));
        assert_eq!(parse("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(parse("123456789m"), None);
        assert_eq!(parse("5x"), None);
        assert_eq!(parse("m"), None);
        assert_eq!(parse("-5m"), None);
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }

    #[test]
    fn a_deadline_that_passed_while_reading_is_deadline_exceeded() {
        let long_ago = Instant::now() - Duration::from_secs(2);
        assert!(remaining(Some(Duration::from_secs(1)), long_ago).is_err());
        let left = remaining(Some(Duration::from_secs(10)), long_ago)
            .unwrap()
            .unwrap();
        assert!(left <= Duration::from_secs(8), "{left:?}");
        assert_eq!(remaining(None, long_ago).unwrap(), None);
    }
}

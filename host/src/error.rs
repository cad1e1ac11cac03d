//! The host's one error type, [`ServiceError`], and the one place that maps failures to canonical
//! codes and decides what a client may see. It sits below the service and the executors, which
//! both return it, so neither has to import the other for it.
//!
//! A client sees its own mistakes and the guest's failure (trap reason, log tail); a store's,
//! a join's or the engine's own text is the server's business: [`ServiceError::public_message`]
//! withholds it, and the API logs it with a request id instead. The server running out of a
//! resource while storing (disk space, quota, open files) is neither: it is RESOURCE_EXHAUSTED,
//! saying what ran out, without the store's own text.

use std::time::Duration;

use wasmrpc_proto::{Code, Status};

use crate::admission::AdmissionError;
use crate::registry::RegistryError;
use crate::runtime::{GuestFailure, UploadError};

/// Why an operation of the service failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The name breaks the one name rule.
    #[error("{0}")]
    InvalidName(String),
    /// No method of that name is registered for the tenant.
    #[error("no method named `{0}` is registered")]
    NotFound(String),
    /// The name is registered, but not in that version.
    #[error("method `{name}` has no version {version}")]
    NoSuchVersion {
        /// The name.
        name: String,
        /// The version asked for.
        version: u32,
    },
    /// The uploaded component was refused, or could not be loaded.
    #[error(transparent)]
    Upload(#[from] UploadError),
    /// The component has no such method.
    #[error("{0}")]
    Export(String),
    /// The component exports several methods (these), none named as the registration: one must
    /// be chosen (`?export=` on v1; the API that registers says how).
    #[error(
        "the component exports several methods ({}); choose one with ?export=NAME",
        .0.join(", ")
    )]
    ExportNeeded(Vec<String>),
    /// The arguments do not fit the method's signature.
    #[error("{0}")]
    Arguments(String),
    /// The guest call failed.
    #[error(transparent)]
    Guest(#[from] GuestFailure),
    /// The call was not admitted (the server is full, or no slot came free in time).
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    /// The call cannot run now (a stored component missing, corrupt or no longer loading; a
    /// thread or a transport that failed): the reason is the client's to read, its source only
    /// the server's log's.
    #[error("{0}")]
    Unavailable(Unavailable),
    /// The store failed, or refused a registration over the tenant's quota.
    #[error("{}", store_message(.0))]
    Store(#[from] RegistryError),
    /// Over one of the caller's quotas (the message names it and its value).
    #[error("{0}")]
    Quota(String),
    /// Another worker of the cluster answered with this code and message (already fit for the
    /// client), or could not be reached.
    #[error("{message}")]
    Remote {
        /// The canonical code.
        code: Code,
        /// What the client may read.
        message: String,
    },
    /// The call was placed on a worker of a cluster (`?worker=`), and this server is in none.
    #[error(
        "this server is not in a cluster: start it with --cluster nats://HOST:PORT --name NAME"
    )]
    NotInACluster,
}

/// Why a call cannot run now, in two parts: what a client may read, and what only the server's log
/// (and an embedding program, which is the operator) gets: a transport's, a join's or the OS's own
/// text.
#[derive(Debug)]
pub struct Unavailable {
    /// What the client reads, in the server's own words.
    pub reason: String,
    /// The underlying failure's text, never sent to a client.
    pub source: Option<String>,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl ServiceError {
    /// UNAVAILABLE for `reason`, which the client may read as it is.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        ServiceError::Unavailable(Unavailable {
            reason: reason.into(),
            source: None,
        })
    }

    /// UNAVAILABLE for `reason`, caused by `source`, whose text stays in the server's log.
    pub fn unavailable_because(reason: impl Into<String>, source: impl std::fmt::Display) -> Self {
        ServiceError::Unavailable(Unavailable {
            reason: reason.into(),
            source: Some(source.to_string()),
        })
    }

    /// What the server's log should get besides [`ServiceError::public_message`]: the source of
    /// a failure whose public part is the server's own words.
    pub fn logged_source(&self) -> Option<&str> {
        match self {
            ServiceError::Unavailable(u) => u.source.as_deref(),
            _ => None,
        }
    }
}

fn store_message(e: &RegistryError) -> String {
    match e {
        RegistryError::Quota(why) => why.clone(),
        other => format!("the method store failed: {other}"),
    }
}

impl ServiceError {
    /// The canonical code: the one mapping of every failure to a code.
    pub fn code(&self) -> Code {
        match self {
            ServiceError::InvalidName(_)
            | ServiceError::Export(_)
            | ServiceError::ExportNeeded(_)
            | ServiceError::Arguments(_) => Code::InvalidArgument,
            ServiceError::NotFound(_) | ServiceError::NoSuchVersion { .. } => Code::NotFound,
            ServiceError::Upload(e) => e.code(),
            ServiceError::Guest(f) => f.code(),
            ServiceError::Admission(
                AdmissionError::Overloaded { .. }
                | AdmissionError::TenantBusy { .. }
                | AdmissionError::RateLimited { .. }
                | AdmissionError::BytesBudget { .. },
            )
            | ServiceError::Quota(_)
            | ServiceError::Store(RegistryError::Quota(_)) => Code::ResourceExhausted,
            ServiceError::NotInACluster => Code::FailedPrecondition,
            ServiceError::Admission(AdmissionError::WaitedPastDeadline { .. }) => {
                Code::DeadlineExceeded
            }
            ServiceError::Remote { code, .. } => *code,
            ServiceError::Unavailable(_)
            | ServiceError::Store(
                RegistryError::Corrupt { .. }
                | RegistryError::MissingBlob(_)
                | RegistryError::Unreachable(_),
            ) => Code::Unavailable,
            ServiceError::Store(_) if self.server_ran_out_of().is_some() => Code::ResourceExhausted,
            ServiceError::Store(_) => Code::Internal,
        }
    }

    /// How long a client should wait before trying again, where that is known (HTTP's
    /// `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ServiceError::Admission(AdmissionError::RateLimited { retry_after, .. }) => {
                Some(*retry_after)
            }
            ServiceError::Admission(
                AdmissionError::Overloaded { .. }
                | AdmissionError::TenantBusy { .. }
                | AdmissionError::BytesBudget { .. },
            ) => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    /// What the server itself ran out of (disk space, a disk quota, open files) when that is why
    /// the store failed: not a fault in the server, and not the client's doing, but worth a retry
    /// later and the operator's attention.
    pub fn server_ran_out_of(&self) -> Option<&'static str> {
        /// `EMFILE`, the same on Linux and the BSDs: this process has its limit of descriptors.
        const TOO_MANY_OPEN_FILES: i32 = 24;
        /// `ENFILE`: the whole system has its limit of open files.
        const TOO_MANY_OPEN_FILES_IN_SYSTEM: i32 = 23;
        let ServiceError::Store(RegistryError::Io(e)) = self else {
            return None;
        };
        match (e.kind(), e.raw_os_error()) {
            (std::io::ErrorKind::StorageFull, _) => Some("disk space"),
            (std::io::ErrorKind::QuotaExceeded, _) => Some("its disk quota"),
            (_, Some(TOO_MANY_OPEN_FILES)) => Some("open files (its per-process limit)"),
            (_, Some(TOO_MANY_OPEN_FILES_IN_SYSTEM)) => Some("open files (the system's limit)"),
            _ => None,
        }
    }

    /// What a client may be told, or `None` when the failure is the server's own and its text
    /// (a store's, a join's, the engine's) must stay in the server's log.
    pub fn public_message(&self) -> Option<String> {
        if let Some(what) = self.server_ran_out_of() {
            // Said in the server's own words: the store's text may name paths.
            return Some(format!(
                "the server ran out of {what} while storing; nothing was stored, try again later"
            ));
        }
        let host_fault = match self {
            ServiceError::Upload(e) => e.is_host_fault(),
            ServiceError::Guest(f) => f.is_host_fault(),
            ServiceError::Store(e) => !matches!(
                e,
                RegistryError::Corrupt { .. }
                    | RegistryError::MissingBlob(_)
                    | RegistryError::Quota(_)
                    | RegistryError::Unreachable(_)
            ),
            _ => false,
        };
        (!host_fault).then(|| self.to_string())
    }
}

/// The full status, for callers in the same process (the embedding program is the operator, so
/// it sees the whole message, the source of an UNAVAILABLE included). Over HTTP the API sends
/// [`ServiceError::public_message`] instead.
impl From<ServiceError> for Status {
    fn from(e: ServiceError) -> Self {
        let message = match e.logged_source() {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        };
        Status::new(e.code(), message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Digest;

    #[test]
    fn host_faults_keep_their_text_to_the_server() {
        let io = ServiceError::Store(RegistryError::Io(std::io::Error::other(
            "disk /dev/vda1 is full",
        )));
        assert_eq!(io.code(), Code::Internal);
        assert_eq!(io.public_message(), None);
        let db = ServiceError::Store(RegistryError::Database("redb: page 7 corrupt".into()));
        assert_eq!(db.public_message(), None);
        let join = ServiceError::Store(RegistryError::Task("task 12 panicked".into()));
        assert_eq!(join.public_message(), None);
        let engine = ServiceError::Guest(GuestFailure::Internal(
            "instantiating or calling the guest failed: wasmtime internals".into(),
        ));
        assert_eq!(
            (engine.code(), engine.public_message()),
            (Code::Internal, None)
        );
        let upload = ServiceError::Upload(UploadError::Internal("join error".into()));
        assert_eq!(upload.public_message(), None);
    }

    #[test]
    fn an_unavailable_shows_its_reason_and_keeps_its_source_to_the_server() {
        let e = ServiceError::unavailable_because(
            "the call could not be sent to worker `w2`; try again",
            "nats: connection reset by peer (os error 104) at 10.0.0.7:4222",
        );
        assert_eq!(e.code(), Code::Unavailable);
        let shown = e.public_message().expect("the reason is the client's");
        assert_eq!(
            shown,
            "the call could not be sent to worker `w2`; try again"
        );
        assert_eq!(
            e.logged_source(),
            Some("nats: connection reset by peer (os error 104) at 10.0.0.7:4222")
        );
        // The embedding program is the operator: it reads both.
        let status = Status::from(e);
        assert!(status.message().contains("os error 104"), "{status:?}");
        assert_eq!(ServiceError::unavailable("busy").logged_source(), None);
    }

    #[test]
    fn guest_failures_and_client_mistakes_are_shown() {
        let trap = ServiceError::Guest(GuestFailure::Trap {
            reason: "wasm trap: integer divide by zero".into(),
            guest_output: "panicked at src/lib.rs:3".into(),
        });
        assert_eq!(trap.code(), Code::Internal);
        let shown = trap
            .public_message()
            .expect("a trap is the caller's to see");
        assert!(
            shown.contains("divide by zero") && shown.contains("panicked at"),
            "{shown}"
        );
        let missing = ServiceError::NotFound("nope".into());
        assert_eq!(
            (missing.code(), missing.public_message().as_deref()),
            (Code::NotFound, Some("no method named `nope` is registered"))
        );
        let corrupt = ServiceError::Store(RegistryError::MissingBlob(Digest([7; 32])));
        assert_eq!(corrupt.code(), Code::Unavailable);
        assert!(corrupt.public_message().is_some());
    }

    #[test]
    fn running_out_of_disk_or_files_is_resource_exhausted_saying_what_ran_out() {
        let cases = [
            (
                std::io::Error::from(std::io::ErrorKind::StorageFull),
                "disk space",
            ),
            (
                std::io::Error::from(std::io::ErrorKind::QuotaExceeded),
                "disk quota",
            ),
            (std::io::Error::from_raw_os_error(24), "open files"),
            (std::io::Error::from_raw_os_error(23), "open files"),
        ];
        for (io, what) in cases {
            let text = io.to_string();
            let e = ServiceError::Store(RegistryError::Io(io));
            assert_eq!(e.code(), Code::ResourceExhausted, "{text}");
            let shown = e.public_message().expect("shown, not withheld");
            assert!(shown.contains(what), "{text}: {shown}");
            assert!(shown.contains("ran out of"), "{shown}");
        }
        // Any other I/O failure stays INTERNAL and withheld.
        let other = ServiceError::Store(RegistryError::Io(std::io::Error::from(
            std::io::ErrorKind::PermissionDenied,
        )));
        assert_eq!(
            (other.code(), other.public_message()),
            (Code::Internal, None)
        );
    }

    #[test]
    fn admission_refusals_have_retryable_codes() {
        let full = ServiceError::Admission(AdmissionError::Overloaded {
            running: 2,
            queued: 4,
        });
        assert_eq!(full.code(), Code::ResourceExhausted);
        assert_eq!(full.retry_after(), Some(Duration::from_secs(1)));
        let late = ServiceError::Admission(AdmissionError::WaitedPastDeadline { deadline_ms: 5 });
        assert_eq!(late.code(), Code::DeadlineExceeded);
        assert_eq!(late.retry_after(), None);
        let busy = ServiceError::Admission(AdmissionError::TenantBusy {
            running: 2,
            queued: 3,
        });
        assert_eq!(busy.code(), Code::ResourceExhausted);
        assert!(
            busy.to_string().contains("max_concurrent_calls (2)"),
            "{busy}"
        );
        let bytes = ServiceError::Admission(AdmissionError::BytesBudget {
            needed: 10,
            held: 95,
            budget: 100,
            tenant: false,
        });
        assert_eq!(bytes.code(), Code::ResourceExhausted);
        assert_eq!(bytes.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(
            bytes.public_message().unwrap(),
            "the server holds 95 bytes of request bodies and arguments in flight and this request \
             needs 10, past its budget of 100 bytes (--max-bytes-in-flight); try again later"
        );
    }

    #[test]
    fn quota_refusals_name_the_quota_and_are_shown() {
        let rate = ServiceError::Admission(AdmissionError::RateLimited {
            per_second: 5,
            retry_after: Duration::from_millis(120),
        });
        assert_eq!(rate.code(), Code::ResourceExhausted);
        assert_eq!(rate.retry_after(), Some(Duration::from_millis(120)));
        assert_eq!(
            rate.public_message().unwrap(),
            "quota calls_per_second (5) reached; try again in 120 ms"
        );
        let stored = ServiceError::Store(RegistryError::Quota(
            "quota max_methods (3) reached: delete a method before registering another".into(),
        ));
        assert_eq!(stored.code(), Code::ResourceExhausted);
        assert!(
            stored
                .public_message()
                .unwrap()
                .starts_with("quota max_methods (3)")
        );
    }
}

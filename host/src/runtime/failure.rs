//! Why a guest call failed, classified once at the runtime boundary.
//!
//! Everything that can go wrong inside the sandbox becomes one of these, classified by the
//! error's type (never its text); the service maps each to a canonical code. A guest never makes
//! the host panic.

use wasmrpc_proto::Code;

/// A failed guest call or upload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestFailure {
    /// The call ran past its deadline and was stopped.
    #[error("the call ran past its deadline of {deadline_ms} ms and was stopped")]
    Deadline {
        /// The deadline the call had.
        deadline_ms: u64,
    },
    /// The guest tried to take more memory than its cap.
    #[error("the call exceeded its memory limit of {cap} bytes")]
    Memory {
        /// The cap in bytes.
        cap: usize,
    },
    /// The guest trapped (unreachable, division by zero, stack overflow, a panic…).
    #[error("the guest trapped: {reason}{}", guest_output_suffix(.guest_output))]
    Trap {
        /// The trap's reason.
        reason: String,
        /// The end of what the guest printed (a Rust panic message lands here).
        guest_output: String,
    },
    /// The guest returned an error value.
    #[error("{message}")]
    Guest {
        /// The canonical code of the guest's error case.
        code: Code,
        /// The guest's message.
        message: String,
    },
    /// The guest returned outputs the host will not accept (too big, malformed, off-signature).
    #[error("{message}")]
    BadOutput {
        /// RESOURCE_EXHAUSTED for size, INTERNAL for malformed outputs.
        code: Code,
        /// What was wrong.
        message: String,
    },
    /// The host could not run the call right now (no free instance slot).
    #[error("{0}")]
    Capacity(String),
    /// Any other failure while instantiating or calling: the host's fault, not the guest's. Its
    /// text is for the server's log, never for clients.
    #[error("{0}")]
    Internal(String),
}

fn guest_output_suffix(out: &str) -> String {
    if out.is_empty() {
        String::new()
    } else {
        format!("; guest output: {out}")
    }
}

impl GuestFailure {
    /// The canonical code for this failure.
    pub fn code(&self) -> Code {
        match self {
            GuestFailure::Deadline { .. } => Code::DeadlineExceeded,
            GuestFailure::Memory { .. } => Code::ResourceExhausted,
            GuestFailure::Trap { .. } | GuestFailure::Internal(_) => Code::Internal,
            GuestFailure::Guest { code, .. } | GuestFailure::BadOutput { code, .. } => *code,
            GuestFailure::Capacity(_) => Code::Unavailable,
        }
    }

    /// Whether the failure is the host's own (its text stays in the server's log).
    pub fn is_host_fault(&self) -> bool {
        matches!(self, GuestFailure::Internal(_))
    }
}

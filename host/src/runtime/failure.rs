//! Why a guest call failed, classified once at the runtime boundary.
//!
//! Everything that can go wrong inside the sandbox becomes one of these, classified by the
//! error's type (never its text); the service maps each to a canonical code. A guest never makes
//! the host panic.

use wasmrpc_proto::Code;

use super::lifted::MalformedValue;

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
    /// The guest returned a value that breaks the canonical ABI (a string or list outside its
    /// memory, a misaligned list, an enum, option or variant case out of range, invalid UTF-8):
    /// the function's bug, told to the client as INTERNAL with what was wrong and where, never
    /// withheld as the host's.
    #[error("{returned_by} returned a malformed value: {value}")]
    Malformed {
        /// Whose value: `method `add``, `the component's signatures()`.
        returned_by: String,
        /// What was wrong, and where in the value.
        value: MalformedValue,
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
            GuestFailure::Trap { .. }
            | GuestFailure::Malformed { .. }
            | GuestFailure::Internal(_) => Code::Internal,
            GuestFailure::Guest { code, .. } | GuestFailure::BadOutput { code, .. } => *code,
            GuestFailure::Capacity(_) => Code::Unavailable,
        }
    }

    /// Whether the failure is the host's own (its text stays in the server's log).
    pub fn is_host_fault(&self) -> bool {
        matches!(self, GuestFailure::Internal(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_return_value_is_internal_but_the_functions_fault_told_to_the_client() {
        let malformed = GuestFailure::Malformed {
            returned_by: "method `add`".into(),
            value: MalformedValue::for_test(
                "list pointer/length out of bounds of memory",
                "outputs[0].data",
            ),
        };
        assert_eq!(malformed.code(), Code::Internal);
        assert!(!malformed.is_host_fault());
        assert_eq!(
            malformed.to_string(),
            "method `add` returned a malformed value: list pointer/length out of bounds of \
             memory (at `outputs[0].data`)"
        );
    }
}

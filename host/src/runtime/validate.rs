//! Upload checks: what bytes are refused before, and after, compilation, and why.

use std::time::Duration;

use wasmrpc_proto::{Code, MethodSignature};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::GuestFailure;
use super::imports;

/// Why an uploaded component was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UploadError {
    /// Empty body.
    #[error("the upload is empty; send the component's bytes (application/wasm)")]
    Empty,
    /// Over the size limit.
    #[error("the component is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Not WebAssembly at all.
    #[error("the upload is not WebAssembly (it does not start with the `\\0asm` magic)")]
    NotWasm,
    /// A precompiled native artifact (`.cwasm`), which the server never accepts.
    #[error(
        "the upload is a precompiled native artifact (.cwasm); upload the .wasm component instead"
    )]
    Precompiled,
    /// A core module instead of a component.
    #[error(
        "the upload is a core wasm module, not a component; build with `cargo build --target wasm32-wasip2`"
    )]
    CoreModule,
    /// Malformed or invalid wasm.
    #[error("the component is invalid: {0}")]
    Invalid(String),
    /// Imports something outside the allow-list (every such import, named).
    #[error("the component imports {}, which this server does not provide; a function gets no filesystem, network, clock or other host access", quoted(.0))]
    ForbiddenImports(Vec<String>),
    /// Does not implement the `wasmrpc:tensor` world.
    #[error("the component does not implement the `wasmrpc:tensor/method@0.1.0` exports: {0}")]
    WrongWorld(String),
    /// Compilation ran past its time limit.
    #[error("compiling the component took longer than the limit of {} s", .0.as_secs())]
    CompileTimeout(Duration),
    /// The component's `signatures()` failed.
    #[error("asking the component for its signatures failed: {0}")]
    Signatures(GuestFailure),
    /// No call slot was free to ask for the signatures: the server is busy, which is not the
    /// component's fault (UNAVAILABLE, or RESOURCE_EXHAUSTED when the wait queue is full).
    #[error("asking the component for its signatures failed: {reason}")]
    Busy {
        /// The retryable code.
        code: Code,
        /// Why.
        reason: String,
    },
    /// The signatures themselves are unusable.
    #[error("the component's signatures are invalid: {0}")]
    BadSignatures(String),
    /// A host-side failure; its text is for the server's log, never for clients.
    #[error("internal error while loading the component: {0}")]
    Internal(String),
}

impl UploadError {
    /// The canonical code of the refusal.
    pub fn code(&self) -> Code {
        match self {
            UploadError::TooLarge { .. } => Code::ResourceExhausted,
            UploadError::CompileTimeout(_) => Code::DeadlineExceeded,
            UploadError::Internal(_) => Code::Internal,
            // A busy server is not the component's fault: say so, with the retryable code.
            UploadError::Busy { code, .. } => *code,
            UploadError::Signatures(f @ GuestFailure::Capacity(_)) => f.code(),
            // The host failed while running the component's code.
            UploadError::Signatures(f) if f.is_host_fault() => Code::Internal,
            _ => Code::InvalidArgument,
        }
    }

    /// Whether the failure is the host's own (its text stays in the server's log).
    pub fn is_host_fault(&self) -> bool {
        match self {
            UploadError::Internal(_) => true,
            UploadError::Signatures(f) => f.is_host_fault(),
            _ => false,
        }
    }
}

/// The preamble of a component: magic, then version 0x0d and layer 1.
const COMPONENT_PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const CORE_PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Checks that need no compiler: size, magic, layer.
pub fn check_bytes(bytes: &[u8], limit: usize) -> Result<(), UploadError> {
    if bytes.is_empty() {
        return Err(UploadError::Empty);
    }
    if bytes.len() > limit {
        return Err(UploadError::TooLarge {
            size: bytes.len(),
            limit,
        });
    }
    if bytes.starts_with(b"\x7fELF") {
        return Err(UploadError::Precompiled);
    }
    if !bytes.starts_with(b"\0asm") {
        return Err(UploadError::NotWasm);
    }
    if bytes.starts_with(&CORE_PREAMBLE) {
        return Err(UploadError::CoreModule);
    }
    if !bytes.starts_with(&COMPONENT_PREAMBLE) {
        return Err(UploadError::Invalid(
            "unsupported wasm version or layer in the preamble".into(),
        ));
    }
    Ok(())
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuse any import outside the allow-list, naming every one.
pub fn check_imports(component: &Component, engine: &Engine) -> Result<(), UploadError> {
    let ty = component.component_type();
    let forbidden: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !imports::is_allowed(name))
        .map(str::to_owned)
        .collect();
    if forbidden.is_empty() {
        Ok(())
    } else {
        Err(UploadError::ForbiddenImports(forbidden))
    }
}

/// The most methods one component may export.
pub const MAX_METHODS: usize = 1024;

/// Check the signatures a component reported: at least one, unique usable names.
pub fn check_signatures(sigs: &[MethodSignature]) -> Result<(), UploadError> {
    if sigs.is_empty() {
        return Err(UploadError::BadSignatures("it exports no methods".into()));
    }
    if sigs.len() > MAX_METHODS {
        return Err(UploadError::BadSignatures(format!(
            "it exports {} methods, over the limit of {MAX_METHODS}",
            sigs.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for s in sigs {
        if !wasmrpc_proto::names::is_valid_name(&s.name) {
            return Err(UploadError::BadSignatures(format!(
                "method name `{}` is not valid ({})",
                s.name,
                wasmrpc_proto::names::NAME_RULE
            )));
        }
        if !seen.insert(&s.name) {
            return Err(UploadError::BadSignatures(format!(
                "method `{}` is declared twice",
                s.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_classified_before_compiling() {
        assert!(matches!(check_bytes(b"", 10), Err(UploadError::Empty)));
        assert!(matches!(
            check_bytes(b"hello world", 100),
            Err(UploadError::NotWasm)
        ));
        assert!(matches!(
            check_bytes(b"\x7fELF\x02\x01", 100),
            Err(UploadError::Precompiled)
        ));
        assert!(matches!(
            check_bytes(&CORE_PREAMBLE, 100),
            Err(UploadError::CoreModule)
        ));
        assert!(matches!(
            check_bytes(&[0u8; 101], 100),
            Err(UploadError::TooLarge { size: 101, .. })
        ));
        assert!(check_bytes(&COMPONENT_PREAMBLE, 100).is_ok());
    }
}

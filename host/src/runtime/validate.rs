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
    /// The code is too large to compile within the server's budget (too many functions, a
    /// function body or its locals over their limits).
    #[error("the component is too complex to compile here: {0}")]
    TooComplex(String),
    /// Compilation ran past its time limit.
    #[error("compiling the component took longer than the limit of {} s", .0.as_secs())]
    CompileTimeout(Duration),
    /// Compiling needed more memory than one compile may use.
    #[error(
        "compiling the component needs more than the compile memory budget of {} MiB",
        .budget >> 20
    )]
    CompileMemory {
        /// The budget in bytes.
        budget: usize,
    },
    /// Compiles abandoned past their timeout (which cannot be interrupted) hold every compile
    /// thread: not the component's fault, and worth retrying (UNAVAILABLE).
    #[error(
        "the server is busy finishing {abandoned} compiles that ran past their time limit; try again later"
    )]
    CompilesBusy {
        /// Abandoned compiles still running.
        abandoned: usize,
    },
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
            UploadError::CompileMemory { .. } => Code::ResourceExhausted,
            UploadError::CompilesBusy { .. } => Code::Unavailable,
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

/// Functions one core module of a component may define. Compile time and memory grow with the
/// code; these static limits refuse a pathological component before the compiler sees it.
pub const MAX_FUNCTIONS_PER_MODULE: u64 = 50_000;
/// Functions all the core modules of one component may define together.
pub const MAX_FUNCTIONS: u64 = 100_000;
/// Bytes of one function's body (a Rust function of a real program stays far below).
pub const MAX_FUNCTION_BODY_BYTES: usize = 512 << 10;
/// Locals one function may declare.
pub const MAX_LOCALS_PER_FUNCTION: u64 = 10_000;

/// Refuse code whose size alone would make compiling it take too long or too much memory: too
/// many functions, a function body too large, too many locals. Reads the component without
/// compiling it (malformed bytes are left to the compiler to describe).
pub fn check_code_limits(bytes: &[u8]) -> Result<(), UploadError> {
    use wasmparser::{Parser, Payload};
    let mut total: u64 = 0;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else {
            return Ok(());
        };
        match payload {
            Payload::FunctionSection(reader) => {
                let count = u64::from(reader.count());
                total += count;
                if count > MAX_FUNCTIONS_PER_MODULE || total > MAX_FUNCTIONS {
                    return Err(UploadError::TooComplex(format!(
                        "it defines {} functions in one module ({total} in all); the limits are \
                         {MAX_FUNCTIONS_PER_MODULE} per module and {MAX_FUNCTIONS} in all",
                        count
                    )));
                }
            }
            Payload::CodeSectionEntry(body) => {
                let size = body.range().len();
                if size > MAX_FUNCTION_BODY_BYTES {
                    return Err(UploadError::TooComplex(format!(
                        "a function body is {size} bytes; the limit is {MAX_FUNCTION_BODY_BYTES}"
                    )));
                }
                let mut locals: u64 = 0;
                if let Ok(reader) = body.get_locals_reader() {
                    for local in reader {
                        let Ok((count, _)) = local else { break };
                        locals += u64::from(count);
                    }
                }
                if locals > MAX_LOCALS_PER_FUNCTION {
                    return Err(UploadError::TooComplex(format!(
                        "a function declares {locals} locals; the limit is \
                         {MAX_LOCALS_PER_FUNCTION}"
                    )));
                }
            }
            _ => {}
        }
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

    /// A component holding one core module with one function of `body` instruction bytes and
    /// `locals` i32 locals.
    fn component_with_function(locals: u32, body: &[u8]) -> Vec<u8> {
        fn leb(mut n: usize, out: &mut Vec<u8>) {
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
        }
        fn section(id: u8, content: &[u8], out: &mut Vec<u8>) {
            out.push(id);
            leb(content.len(), out);
            out.extend_from_slice(content);
        }
        let mut func = Vec::new();
        leb(1, &mut func); // one group of locals
        leb(locals as usize, &mut func);
        func.push(0x7f); // i32
        func.extend_from_slice(body);
        func.push(0x0b); // end
        let mut code = Vec::new();
        leb(1, &mut code);
        leb(func.len(), &mut code);
        code.extend_from_slice(&func);
        let mut module = CORE_PREAMBLE.to_vec();
        section(1, &[0x01, 0x60, 0x00, 0x00], &mut module); // one type: [] -> []
        section(3, &[0x01, 0x00], &mut module); // one function of type 0
        section(10, &code, &mut module);
        let mut component = COMPONENT_PREAMBLE.to_vec();
        section(1, &module, &mut component); // a core module section
        component
    }

    #[test]
    fn code_too_large_to_compile_is_refused_before_compiling() {
        assert!(check_code_limits(&component_with_function(10, &[0x01; 100])).is_ok());
        let huge_body = component_with_function(1, &vec![0x01; MAX_FUNCTION_BODY_BYTES + 1]);
        let err = check_code_limits(&huge_body).unwrap_err().to_string();
        assert!(
            err.contains("function body") && err.contains("524288"),
            "{err}"
        );
        let many_locals = component_with_function(40_000, &[0x01]);
        let err = check_code_limits(&many_locals).unwrap_err().to_string();
        assert!(err.contains("40000 locals"), "{err}");
        assert_eq!(
            UploadError::TooComplex(String::new()).code(),
            Code::InvalidArgument
        );
    }
}

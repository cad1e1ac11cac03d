//! Upload checks: what bytes are refused before, and after, compilation, and why.

use std::time::Duration;

use wasmrpc_proto::{Code, MethodSignature};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::GuestFailure;
use super::imports;
use super::lifted::MalformedValue;

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
    #[error("the component imports {}, which this server does not provide; a function may import WASI 0.2 (an empty, deny-by-default world: docs/security.md) and `wasmrpc:tensor`, nothing else", quoted(.0))]
    ForbiddenImports(Vec<String>),
    /// A core module declares a linear memory that is larger at instantiation than all the
    /// memories of a call may be together: no call could ever instantiate it.
    #[error(
        "the component declares a linear memory of {declared} bytes at instantiation, over the \
         memory limit of {cap} bytes per call"
    )]
    MemoryOverCap {
        /// The memory's initial size in bytes.
        declared: u64,
        /// The memory limit per call, in bytes.
        cap: usize,
    },
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
    /// `signatures()` returned a value that breaks the canonical ABI (a string or list outside
    /// the component's memory, a misaligned list, an enum or option case out of range, invalid
    /// UTF-8): the component's fault, told to the uploader (INVALID_ARGUMENT).
    #[error("the component's signatures() returned a malformed value: {0}")]
    MalformedSignatures(MalformedValue),
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
            UploadError::TooLarge { .. }
            | UploadError::MemoryOverCap { .. }
            | UploadError::CompileMemory { .. } => Code::ResourceExhausted,
            UploadError::CompileTimeout(_) => Code::DeadlineExceeded,
            UploadError::CompilesBusy { .. } => Code::Unavailable,
            UploadError::Internal(_) => Code::Internal,
            // A busy server is not the component's fault: say so, with the retryable code.
            UploadError::Busy { code, .. } => *code,
            // No free instance slot (UNAVAILABLE), or instantiating or `signatures()` took more
            // memory than a call may hold (RESOURCE_EXHAUSTED, as for a call).
            UploadError::Signatures(
                f @ (GuestFailure::Capacity(_) | GuestFailure::Memory { .. }),
            ) => f.code(),
            // The host failed while running the component's code.
            UploadError::Signatures(f) if f.is_host_fault() => Code::Internal,
            // What the component's code returned cannot be read: its own doing, as any other
            // failure of `signatures()`.
            UploadError::MalformedSignatures(_) => Code::InvalidArgument,
            _ => Code::InvalidArgument,
        }
    }

    /// Whether the component itself is refused, so loading the same bytes under the same limits
    /// would be refused again: a stored component refused so is remembered as unavailable rather
    /// than compiled again on every call.
    pub fn is_the_components_fault(&self) -> bool {
        self.code() == Code::InvalidArgument
            || matches!(
                self,
                UploadError::MemoryOverCap { .. }
                    | UploadError::CompileMemory { .. }
                    | UploadError::Signatures(GuestFailure::Memory { .. })
            )
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

/// Refuse, in one read of the component and without compiling it, what is known to fail from
/// its declarations alone (malformed bytes are left to the compiler to describe):
///
/// - code whose size would make compiling it take too long or too much memory: too many
///   functions, a function body too large, too many locals ([`UploadError::TooComplex`]);
/// - a core module memory whose initial size alone is over `memory_cap`, the memory one call may
///   hold in all, so no call could ever instantiate it ([`UploadError::MemoryOverCap`]; the
///   pooling allocator would otherwise refuse it during the compile, in its own words). Memories
///   that fit one by one but not together are refused at instantiation, by the call's limiter.
pub fn check_static_limits(bytes: &[u8], memory_cap: usize) -> Result<(), UploadError> {
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
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let Ok(memory) = memory else {
                        return Ok(());
                    };
                    // Pages are 64 KiB unless the module says otherwise (custom page sizes).
                    let page = 1u128
                        .checked_shl(memory.page_size_log2.unwrap_or(16))
                        .unwrap_or(u128::MAX);
                    let declared = u128::from(memory.initial).saturating_mul(page);
                    if declared > memory_cap as u128 {
                        return Err(UploadError::MemoryOverCap {
                            declared: u64::try_from(declared).unwrap_or(u64::MAX),
                            cap: memory_cap,
                        });
                    }
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
        // Every tensor is held to MAX_RANK dimensions; a spec wider than that could never be
        // met, and would make every message that prints it long.
        for (what, spec) in s
            .inputs
            .iter()
            .map(|t| ("input", t))
            .chain(s.outputs.iter().map(|t| ("output", t)))
        {
            let rank = spec.shape.as_ref().map_or(0, Vec::len);
            if rank > wasmrpc_proto::tensor::MAX_RANK {
                return Err(UploadError::BadSignatures(format!(
                    "{what} `{}` of method `{}` declares {rank} dimensions; a tensor has at most \
                     {} (MAX_RANK)",
                    spec.name,
                    s.name,
                    wasmrpc_proto::tensor::MAX_RANK
                )));
            }
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

    /// Section `id` of `content`, appended to `out`.
    fn section(id: u8, content: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(content.len(), out);
        out.extend_from_slice(content);
    }

    /// A component holding one core module with one function of `body` instruction bytes and
    /// `locals` i32 locals.
    fn component_with_function(locals: u32, body: &[u8]) -> Vec<u8> {
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

    /// A component holding the core module `wat` (text).
    fn component_of(wat: &str) -> Vec<u8> {
        let mut component = COMPONENT_PREAMBLE.to_vec();
        section(1, &wat::parse_str(wat).unwrap(), &mut component); // a core module section
        component
    }

    #[test]
    fn a_memory_declared_over_the_cap_is_refused_naming_the_cap() {
        let cap = 64 << 20;
        let check = |wat: &str| check_static_limits(&component_of(wat), cap);
        // Exactly the cap fits; one 64 KiB page more does not.
        assert!(check("(module (memory 1024))").is_ok());
        let err = check("(module (memory 1025))").unwrap_err();
        assert!(
            matches!(err, UploadError::MemoryOverCap { declared, cap: c } if declared == 1025 << 16 && c == cap),
            "{err:?}"
        );
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert!(err.is_the_components_fault());
        let message = err.to_string();
        assert!(
            message.contains("67108864") && message.contains("memory limit"),
            "{message}"
        );
        // A 64-bit memory of 2^48 pages is 2^64 bytes: the product saturates, never wraps.
        assert!(matches!(
            check("(module (memory i64 0x1000000000000))"),
            Err(UploadError::MemoryOverCap {
                declared: u64::MAX,
                ..
            })
        ));
        // Custom page sizes count in their own unit: 2000 one-byte pages fit.
        assert!(check("(module (memory 2000 (pagesize 1)))").is_ok());
        // Memories that fit one by one pass here: together they are the call limiter's to refuse,
        // at instantiation.
        assert!(check("(module (memory 600) (memory 600))").is_ok());
    }

    #[test]
    fn signatures_past_the_memory_cap_are_resource_exhausted_and_the_components_fault() {
        let memory = UploadError::Signatures(GuestFailure::Memory { cap: 1 << 20 });
        assert_eq!(memory.code(), Code::ResourceExhausted);
        assert!(memory.is_the_components_fault());
        assert!(!memory.is_host_fault());
        // Past the deadline it is the component's fault too, and stays INVALID_ARGUMENT.
        let slow = UploadError::Signatures(GuestFailure::Deadline { deadline_ms: 5000 });
        assert_eq!(slow.code(), Code::InvalidArgument);
        assert!(slow.is_the_components_fault());
        // A busy server is not: worth loading again later.
        let busy = UploadError::Signatures(GuestFailure::Capacity("no free slot".into()));
        assert_eq!(busy.code(), Code::Unavailable);
        assert!(!busy.is_the_components_fault());
    }

    #[test]
    fn malformed_signatures_are_the_components_fault_and_shown_to_the_uploader() {
        let malformed = UploadError::MalformedSignatures(MalformedValue::for_test(
            "unexpected discriminant: 14",
            "[0].inputs[0].dtype",
        ));
        assert_eq!(malformed.code(), Code::InvalidArgument);
        assert!(malformed.is_the_components_fault());
        assert!(!malformed.is_host_fault());
        assert_eq!(
            malformed.to_string(),
            "the component's signatures() returned a malformed value: unexpected discriminant: \
             14 (at `[0].inputs[0].dtype`)"
        );
    }

    #[test]
    fn a_spec_wider_than_the_rank_limit_is_refused_naming_it() {
        use wasmrpc_proto::{DType, Dim, MethodSignature, TensorSpec, tensor::MAX_RANK};
        let method = |rank: usize| MethodSignature {
            name: "m".into(),
            inputs: vec![TensorSpec {
                name: "x".into(),
                dtype: DType::UInt8,
                shape: Some(vec![Dim::Dynamic; rank]),
            }],
            outputs: vec![],
            doc: String::new(),
        };
        assert!(check_signatures(&[method(MAX_RANK)]).is_ok());
        let err = check_signatures(&[method(MAX_RANK + 1)]).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.to_string()
                .contains("input `x` of method `m` declares 65 dimensions"),
            "{err}"
        );
    }

    #[test]
    fn code_too_large_to_compile_is_refused_before_compiling() {
        assert!(
            check_static_limits(&component_with_function(10, &[0x01; 100]), usize::MAX).is_ok()
        );
        let huge_body = component_with_function(1, &vec![0x01; MAX_FUNCTION_BODY_BYTES + 1]);
        let err = check_static_limits(&huge_body, usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("function body") && err.contains("524288"),
            "{err}"
        );
        let many_locals = component_with_function(40_000, &[0x01]);
        let err = check_static_limits(&many_locals, usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("40000 locals"), "{err}");
        assert_eq!(
            UploadError::TooComplex(String::new()).code(),
            Code::InvalidArgument
        );
    }
}

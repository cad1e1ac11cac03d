//! Compiling a component in a child process with a memory and CPU budget.
//!
//! Cranelift cannot be interrupted, and a hostile component can make it take minutes and
//! gigabytes. So the `wasmrpc` binary compiles each upload in a child of its own (`wasmrpc
//! __compile`): the child limits its own address space to the compile memory budget and its CPU
//! time to the compile timeout, dies with its parent, and is killed the moment its upload stops
//! waiting. Whatever it allocated goes back to the system when it exits. What it returns is a
//! precompiled artifact made by this server's own compiler from bytes that passed the static
//! checks, which the server loads with `Component::deserialize`; tenants can never upload an
//! artifact themselves (`validate::check_bytes` refuses `.cwasm`).
//!
//! The child gets an empty environment but for its allocator's setting
//! ([`crate::allocator::CONFINED_CHILD_ENV`]) and the size of its compile pool
//! (`RAYON_NUM_THREADS`): the server's own, which may hold the cluster's credentials
//! (`WASMRPC_CLUSTER`) or keys, is none of its business.
//!
//! An embedding program that is not the `wasmrpc` binary compiles in-process unless it names a
//! `wasmrpc` binary to use ([`Compiler::ChildProcess`]).

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wasmtime::Engine;

use super::config::RuntimeConfig;
use super::epoch;
use super::validate::UploadError;

/// The hidden subcommand the child runs.
pub const SUBCOMMAND: &str = "__compile";

/// Exit status of a child that found the component invalid (its reason on stderr).
const EXIT_INVALID: u8 = 2;

/// Bytes of a child's stderr kept: enough for any compile error, bounded against a flood.
const STDERR_KEPT: usize = 64 << 10;

/// Threads one compile child compiles on, at most: two compiles run at once
/// (`COMPILES_AT_ONCE`).
const COMPILE_THREADS_AT_MOST: usize = 8;

/// Address space each compile thread is given of the child's budget: every thread has its own
/// allocator heap and compiler state, and a compile whose threads cannot all get theirs fails
/// (measured, docs/benchmarks.md, issue 33: the 18 MB Python and 12 MB JavaScript components
/// compile on 4 threads within 1 GiB, not on 8; a small component on 2 threads needs more than
/// 256 MiB).
const COMPILE_MEMORY_PER_THREAD: u64 = 256 << 20;

/// Threads a compile child with `memory` bytes of address space compiles on: one per CPU, at
/// most [`COMPILE_THREADS_AT_MOST`] and one per [`COMPILE_MEMORY_PER_THREAD`] of its budget.
fn compile_threads(memory: u64) -> usize {
    let by_memory = usize::try_from(memory / COMPILE_MEMORY_PER_THREAD).unwrap_or(usize::MAX);
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(COMPILE_THREADS_AT_MOST)
        .min(by_memory)
        .max(1)
}

/// Where components are compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Compiler {
    /// In the server's own process: a compile past its timeout cannot be stopped and its memory
    /// stays with the server. For embedders and tests; `wasmrpc serve` never uses it.
    #[default]
    InProcess,
    /// In a child process running `program __compile`, where `program` is a `wasmrpc` binary of
    /// the same version as this library.
    ChildProcess {
        /// The `wasmrpc` binary.
        program: PathBuf,
    },
}

impl Compiler {
    /// The running binary as the compiler: for `wasmrpc serve` itself.
    ///
    /// # Errors
    /// The running binary's path cannot be found.
    pub fn this_binary() -> std::io::Result<Compiler> {
        // On Linux the running image itself, even after an upgrade replaced the file on disk:
        // the child is then always this very version.
        let program = if cfg!(target_os = "linux") {
            PathBuf::from("/proc/self/exe")
        } else {
            std::env::current_exe()?
        };
        Ok(Compiler::ChildProcess { program })
    }
}

/// What the parent passes the child on its command line: everything that shapes the artifact
/// and the budget.
fn child_args(config: &RuntimeConfig) -> Vec<String> {
    vec![
        SUBCOMMAND.to_string(),
        config.max_wasm_stack.to_string(),
        config.compile_memory.to_string(),
        config.compile_timeout.as_secs().max(1).to_string(),
    ]
}

/// Compile `bytes` in a child process; the artifact it returns, to be deserialized.
///
/// # Errors
/// [`UploadError::Invalid`] with the compiler's message, [`UploadError::CompileTimeout`] (the
/// child is killed at once), [`UploadError::CompileMemory`] when the child ran out of its memory
/// budget, [`UploadError::Internal`] when the child could not run or died of something else.
pub async fn compile_in_child(
    program: &std::path::Path,
    config: &RuntimeConfig,
    bytes: &[u8],
) -> Result<Vec<u8>, UploadError> {
    let child = tokio::process::Command::new(program)
        .args(child_args(config))
        // Nothing of the server's environment (cluster credentials, keys, proxies): the child
        // compiles bytes from a stranger and needs only its allocator's setting.
        .env_clear()
        .envs(crate::allocator::CONFINED_CHILD_ENV)
        // The size of the pool wasmtime compiles on (rayon's global pool).
        .env(
            "RAYON_NUM_THREADS",
            compile_threads(config.compile_memory as u64).to_string(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            UploadError::Internal(format!(
                "starting the compiler process {}: {e}",
                program.display()
            ))
        })?;
    // An upload that stops waiting (its client went away) drops this future, and with it the
    // child: killed and reaped, never left compiling or as a zombie.
    let mut child = KillOnDrop(Some(child));
    let child = child.0.as_mut().expect("just set");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let run = async {
        let feed = async {
            // A child that dies early closes its end: its exit status says why.
            let _ = stdin.write_all(bytes).await;
            drop(stdin);
        };
        let mut artifact = Vec::new();
        let (_, out, message) = tokio::join!(
            feed,
            stdout.read_to_end(&mut artifact),
            read_capped(stderr, STDERR_KEPT),
        );
        (out.map(|_| artifact), message)
    };
    // Past its time: killed and reaped right away.
    let Ok((artifact, message)) = tokio::time::timeout(config.compile_timeout, run).await else {
        let _ = child.kill().await;
        return Err(UploadError::CompileTimeout(config.compile_timeout));
    };
    // Both pipes are closed: the child has exited or is about to.
    let status = child
        .wait()
        .await
        .map_err(|e| UploadError::Internal(format!("waiting for the compiler: {e}")))?;
    let message = String::from_utf8_lossy(&message).trim().to_string();
    if status.success() {
        return artifact
            .map_err(|e| UploadError::Internal(format!("reading the compiler's output: {e}")));
    }
    Err(classify_exit(status, message, config))
}

/// A compile child that is killed and reaped when dropped, unless it has been waited for.
struct KillOnDrop(Option<tokio::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        // Already reaped (`wait` returned): nothing to do. Else kill, and reap in the background
        // (tokio's own `kill_on_drop` leaves the zombie until the next SIGCHLD).
        if let Ok(None) = child.try_wait() {
            let _ = child.start_kill();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}

/// Everything `from` gives until it ends, keeping the first `keep` bytes: a child that writes
/// more is never left blocked on a full pipe.
async fn read_capped(mut from: impl tokio::io::AsyncRead + Unpin, keep: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// Why a child that did not succeed failed.
fn classify_exit(
    status: std::process::ExitStatus,
    message: String,
    config: &RuntimeConfig,
) -> UploadError {
    use std::os::unix::process::ExitStatusExt as _;
    if status.code() == Some(i32::from(EXIT_INVALID)) {
        return UploadError::Invalid(message);
    }
    // Rust aborts (SIGABRT) when an allocation fails; "memory allocation of N bytes failed" is
    // its message. An mmap refused by the address-space limit can also surface as a panic.
    let out_of_memory = message.contains("memory allocation of")
        || message.contains("out of memory")
        || message.contains("Cannot allocate memory");
    if out_of_memory {
        return UploadError::CompileMemory {
            budget: config.compile_memory,
        };
    }
    if status.signal() == Some(libc::SIGXCPU) {
        return UploadError::CompileTimeout(config.compile_timeout);
    }
    UploadError::Internal(format!("the compiler process failed ({status}): {message}"))
}

/// The child's side: `wasmrpc __compile STACK MEMORY CPU_SECONDS`, the component on stdin, the
/// artifact on stdout.
pub fn child_main(args: &[String]) -> ExitCode {
    let parse = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(stack), Some(memory), Some(cpu_seconds)) = (parse(0), parse(1), parse(2)) else {
        eprintln!(
            "{SUBCOMMAND} is run by `wasmrpc serve` to compile one component; \
             it takes STACK_BYTES MEMORY_BYTES CPU_SECONDS and the component on stdin"
        );
        return ExitCode::FAILURE;
    };
    confine(memory, cpu_seconds);
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("reading the component: {e}");
        return ExitCode::FAILURE;
    }
    let config = RuntimeConfig {
        max_wasm_stack: stack as usize,
        // The pool is the parent's business and does not shape the artifact; reserving it here
        // would only eat the address-space budget.
        pooling: false,
        ..RuntimeConfig::default()
    };
    let mut engine_config = epoch::engine_config(&config);
    // Every function compiled on every CPU: the reason the server compiles on one thread (an
    // abandoned compile would hold rayon's shared pool) does not hold in a process of its own,
    // killed with all its threads. An 18 MB Python component compiles in about half the time
    // on two CPUs (docs/benchmarks.md, issue 33). Parallelism does not change the artifact.
    // The parent sized the pool to the address-space budget (`RAYON_NUM_THREADS`).
    engine_config.parallel_compilation(true);
    let engine = match Engine::new(&engine_config) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("creating the wasm engine: {e:?}");
            return ExitCode::FAILURE;
        }
    };
    match engine.precompile_component(&bytes) {
        Ok(artifact) => {
            drop(bytes);
            let mut out = std::io::stdout().lock();
            if out.write_all(&artifact).and_then(|()| out.flush()).is_err() {
                // The parent stopped reading: it no longer waits for this compile.
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// Limit this process to `memory` bytes of address space and `cpu_seconds` of CPU, and have it
/// killed when its parent dies. Best effort on each: a limit that cannot be set leaves the
/// parent's timeout and kill as the bound.
#[cfg(target_os = "linux")]
fn confine(memory: u64, cpu_seconds: u64) {
    let set = |resource, value: u64| {
        let limit = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit only reads the struct passed by reference; lowering a limit needs
        // no privilege.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            eprintln!(
                "warning: setting a compile limit failed: {}",
                std::io::Error::last_os_error()
            );
        }
    };
    set(libc::RLIMIT_AS, memory);
    // CPU time is summed over the compile's threads: the budget is the wall-clock timeout on
    // each of them, so the parent's timeout stays the bound that is reached first.
    let cpu_seconds = cpu_seconds.saturating_mul(compile_threads(memory) as u64);
    // The soft limit sends SIGXCPU; a second later the hard limit kills.
    let limit = libc::rlimit {
        rlim_cur: cpu_seconds as libc::rlim_t,
        rlim_max: (cpu_seconds + 1) as libc::rlim_t,
    };
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_CPU, &limit) };
    // `ps` shows `wasmrpc-compile` rather than the name of `/proc/self/exe`.
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"wasmrpc-compile".as_ptr()) };
    // A parent that dies before this line leaves the child to its CPU limit.
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

#[cfg(not(target_os = "linux"))]
fn confine(_memory: u64, _cpu_seconds: u64) {}

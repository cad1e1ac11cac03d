//! Server configuration: flags, then `WASMRPC_*` environment variables, then an optional TOML
//! file, then defaults, in that order of precedence.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api::HttpLimits;
use crate::runtime::RuntimeConfig;
use crate::server::ServeOptions;

/// Settings a TOML file (or flags and environment) may give; every field is optional.
#[derive(Debug, Default, Clone, serde::Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ServeSettings {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "WASMRPC_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Directory of the embedded store (components and registrations).
    #[arg(long, env = "WASMRPC_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Deadline of a call that asks for none, in milliseconds.
    #[arg(long, env = "WASMRPC_DEFAULT_DEADLINE_MS")]
    pub default_deadline_ms: Option<u64>,
    /// Longest deadline a call may ask for, in milliseconds.
    #[arg(long, env = "WASMRPC_MAX_DEADLINE_MS")]
    pub max_deadline_ms: Option<u64>,
    /// Linear memory per call, summed over all memories, in MiB.
    #[arg(long, env = "WASMRPC_MEMORY_PER_CALL_MIB")]
    pub memory_per_call_mib: Option<usize>,
    /// Wasm stack per call, in KiB.
    #[arg(long, env = "WASMRPC_WASM_STACK_KIB")]
    pub wasm_stack_kib: Option<usize>,
    /// Output tensors per call, in bytes.
    #[arg(long, env = "WASMRPC_MAX_OUTPUT_BYTES")]
    pub max_output_bytes: Option<usize>,
    /// Largest component upload, in bytes.
    #[arg(long, env = "WASMRPC_MAX_COMPONENT_BYTES")]
    pub max_component_bytes: Option<usize>,
    /// Largest call request body, in bytes.
    #[arg(long, env = "WASMRPC_MAX_REQUEST_BYTES")]
    pub max_request_bytes: Option<usize>,
    /// Calls running at once.
    #[arg(long, env = "WASMRPC_MAX_CONCURRENT_CALLS")]
    pub max_concurrent_calls: Option<usize>,
    /// Calls that may wait for a slot before new ones are refused.
    #[arg(long, env = "WASMRPC_MAX_QUEUED_CALLS")]
    pub max_queued_calls: Option<usize>,
    /// Guest log kept per call, in bytes.
    #[arg(long, env = "WASMRPC_GUEST_LOG_BYTES")]
    pub guest_log_bytes: Option<usize>,
    /// Time to compile one component, in seconds.
    #[arg(long, env = "WASMRPC_COMPILE_TIMEOUT_S")]
    pub compile_timeout_s: Option<u64>,
    /// Time a client may take to send request headers, in seconds.
    #[arg(long, env = "WASMRPC_HEADER_TIMEOUT_S")]
    pub header_timeout_s: Option<u64>,
    /// Time a client may take to send a request body, in seconds.
    #[arg(long, env = "WASMRPC_BODY_TIMEOUT_S")]
    pub body_timeout_s: Option<u64>,
    /// Time shutdown waits for in-flight calls, in seconds.
    #[arg(long, env = "WASMRPC_DRAIN_TIMEOUT_S")]
    pub drain_timeout_s: Option<u64>,
    /// Use the pooling allocator (`false` allocates each instance on demand).
    #[arg(long, env = "WASMRPC_POOLING")]
    pub pooling: Option<bool>,
}

macro_rules! merge_fields {
    ($a:expr, $b:expr, $($f:ident),*) => { $( if $a.$f.is_none() { $a.$f = $b.$f.clone(); } )* };
}

impl ServeSettings {
    /// Fill every unset field from `lower` (a lower-precedence source).
    pub fn or(mut self, lower: &ServeSettings) -> ServeSettings {
        merge_fields!(
            self,
            lower,
            listen,
            data_dir,
            default_deadline_ms,
            max_deadline_ms,
            memory_per_call_mib,
            wasm_stack_kib,
            max_output_bytes,
            max_component_bytes,
            max_request_bytes,
            max_concurrent_calls,
            max_queued_calls,
            guest_log_bytes,
            compile_timeout_s,
            header_timeout_s,
            body_timeout_s,
            drain_timeout_s,
            pooling
        );
        self
    }

    /// Read a TOML file of settings.
    ///
    /// # Errors
    /// The file cannot be read or has unknown or malformed keys.
    pub fn from_file(path: &Path) -> anyhow::Result<ServeSettings> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("in {}: {e}", path.display()))
    }

    /// The complete configuration, defaults filling what is unset.
    pub fn resolve(&self) -> ServerConfig {
        let mut runtime = RuntimeConfig::default();
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        if let Some(v) = self.default_deadline_ms {
            runtime.default_deadline = ms(v);
        }
        if let Some(v) = self.max_deadline_ms {
            runtime.max_deadline = ms(v);
        }
        if let Some(v) = self.memory_per_call_mib {
            runtime.memory_per_call = v << 20;
        }
        if let Some(v) = self.wasm_stack_kib {
            runtime.max_wasm_stack = v << 10;
        }
        if let Some(v) = self.max_output_bytes {
            runtime.max_output_bytes = v;
        }
        if let Some(v) = self.max_component_bytes {
            runtime.max_component_bytes = v;
        }
        if let Some(v) = self.max_concurrent_calls {
            runtime.max_concurrent_calls = v.max(1);
        }
        if let Some(v) = self.max_queued_calls {
            runtime.max_queued_calls = v;
        }
        if let Some(v) = self.guest_log_bytes {
            runtime.guest_log_bytes = v;
        }
        if let Some(v) = self.compile_timeout_s {
            runtime.compile_timeout = secs(v);
        }
        if let Some(v) = self.pooling {
            runtime.pooling = v;
        }
        let mut http = HttpLimits::default();
        if let Some(v) = self.max_request_bytes {
            http.max_request_bytes = v;
        }
        if let Some(v) = self.body_timeout_s {
            http.body_read_timeout = secs(v);
        }
        let mut serve = ServeOptions::default();
        if let Some(v) = self.header_timeout_s {
            serve.header_read_timeout = secs(v);
        }
        if let Some(v) = self.drain_timeout_s {
            serve.drain_timeout = secs(v);
        }
        ServerConfig {
            listen: self
                .listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
            data_dir: self.data_dir.clone().unwrap_or_else(default_data_dir),
            runtime,
            http,
            serve,
        }
    }
}

/// Everything the server needs, resolved.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The embedded store's directory.
    pub data_dir: PathBuf,
    /// Sandbox limits.
    pub runtime: RuntimeConfig,
    /// HTTP limits.
    pub http: HttpLimits,
    /// Connection handling.
    pub serve: ServeOptions,
}

/// `$XDG_DATA_HOME/wasmrpc`, else `~/.local/share/wasmrpc`, else `./wasmrpc-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("wasmrpc");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/share/wasmrpc");
    }
    PathBuf::from("wasmrpc-data")
}

//! Server configuration: flags, then `WASMRPC_*` environment variables, then an optional TOML
//! file, then defaults, in that order of precedence.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::accept::{ServeOptions, tls_config};
use crate::api::HttpLimits;
use crate::cluster::ClusterSettings;
use crate::runtime::{Compiler, RuntimeConfig};
use crate::tenancy::Quota;

/// The settings of a server, every one optional (the rest take their defaults): what an embedding
/// program gives [`crate::Server::with_settings`], and, under the same names, what `wasmrpc
/// serve` reads from its flags, `WASMRPC_*` variables and TOML file.
#[derive(Debug, Default, Clone, serde::Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ServeSettings {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "WASMRPC_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Directory of the embedded store (components and registrations) [default:
    /// $XDG_DATA_HOME/wasmrpc, else ~/.local/share/wasmrpc, else ./wasmrpc-data].
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
    /// Bytes of request bodies (calls, uploads) and of calls' decoded arguments held at once
    /// (default 1 GiB, never less than the largest body a request may have); past it requests
    /// get a fast 429 with Retry-After.
    #[arg(long, env = "WASMRPC_MAX_BYTES_IN_FLIGHT")]
    pub max_bytes_in_flight: Option<usize>,
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
    /// Address space one compile may use, in MiB (each compile runs in a child process).
    #[arg(long, env = "WASMRPC_COMPILE_MEMORY_MIB")]
    pub compile_memory_mib: Option<usize>,
    /// The `wasmrpc` binary that compiles uploads, each in a child process within the compile
    /// memory and time budget. `wasmrpc serve` uses itself; a program embedding the server
    /// compiles in its own process unless this names a `wasmrpc` binary of the same version.
    #[arg(long, env = "WASMRPC_COMPILER")]
    pub compiler: Option<PathBuf>,
    /// Time a client may take to send request headers, in seconds.
    #[arg(long, env = "WASMRPC_HEADER_TIMEOUT_S")]
    pub header_timeout_s: Option<u64>,
    /// Time a client may take to send a whole request body, in seconds.
    #[arg(long, env = "WASMRPC_BODY_TIMEOUT_S")]
    pub body_timeout_s: Option<u64>,
    /// Connections open at once; past it new ones get a fast 503 and are closed.
    #[arg(long, env = "WASMRPC_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a connection may stay open with no request in progress (HTTP/2 PINGs do not
    /// count); then it is closed, HTTP/2 with GOAWAY.
    #[arg(long, env = "WASMRPC_IDLE_TIMEOUT_S")]
    pub idle_timeout_s: Option<u64>,
    /// Connections open at once from one IP address; past it new ones from that address get a
    /// fast 503 and are closed.
    #[arg(long, env = "WASMRPC_MAX_CONNECTIONS_PER_PEER")]
    pub max_connections_per_peer: Option<usize>,
    /// Time shutdown waits for in-flight calls, in seconds.
    #[arg(long, env = "WASMRPC_DRAIN_TIMEOUT_S")]
    pub drain_timeout_s: Option<u64>,
    /// Threads that serve cleartext HTTP/1.1 connections, each with an event loop of its own, so
    /// a connection's requests wake no other thread; 0 serves them on the async runtime's
    /// workers, as HTTP/2 and TLS connections are (default: one per CPU).
    #[arg(long, env = "WASMRPC_CONNECTION_THREADS")]
    pub connection_threads: Option<usize>,
    /// Use the pooling allocator (`false` allocates each instance on demand).
    #[arg(long, env = "WASMRPC_POOLING")]
    pub pooling: Option<bool>,
    /// Linear memory of each pooled slot kept resident between calls, in MiB: the pages a call
    /// wrote are zeroed in place, not handed back, so the next large call need not fault them in.
    #[arg(long, env = "WASMRPC_KEEP_RESIDENT_MIB")]
    pub keep_resident_mib: Option<usize>,
    /// Seconds a component may go without a call before the pages of its compiled code, mapped
    /// from its artifact file, are handed back to the kernel; its next call maps them again from
    /// the page cache. 0 never hands them back (default: 30)
    #[arg(long, env = "WASMRPC_RELEASE_IDLE_CODE_S")]
    pub release_idle_code_s: Option<u64>,
    /// Serve TLS (h2 and HTTP/1.1 by ALPN) with this PEM certificate chain, leaf first; needs
    /// `--tls-key` too.
    #[arg(long, env = "WASMRPC_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of `--tls-cert` (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "WASMRPC_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Require API keys: the admin key is read from FILE, or, when FILE does not exist, a new
    /// random one is written there (owner-only). Needed to listen on anything but loopback.
    #[arg(long, env = "WASMRPC_ADMIN_KEY_FILE")]
    pub admin_key_file: Option<PathBuf>,
    /// Also serve `/metrics` alone on this address, without a key (for a scraper on a private
    /// network); with keys configured, `/metrics` on the main address takes the admin key.
    #[arg(long, env = "WASMRPC_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Also serve KServe v2 over gRPC (`inference.GRPCInferenceService`, with gRPC health and
    /// reflection) on this address, alone, as Triton does on 8001 (e.g. `0.0.0.0:8001`); the
    /// main address serves it too, to requests with `content-type: application/grpc`. Same keys,
    /// limits and TLS as the main address. Off by default.
    #[arg(long, env = "WASMRPC_GRPC_LISTEN")]
    pub grpc_listen: Option<SocketAddr>,
    /// Default quota: method names one tenant may register (0: no limit).
    #[arg(long, env = "WASMRPC_TENANT_MAX_METHODS")]
    pub tenant_max_methods: Option<u64>,
    /// Default quota: bytes of components one tenant may store (0: no limit).
    #[arg(long, env = "WASMRPC_TENANT_MAX_STORED_BYTES")]
    pub tenant_max_stored_bytes: Option<u64>,
    /// Default quota: calls of one tenant running at once (default: --max-concurrent-calls).
    #[arg(long, env = "WASMRPC_TENANT_MAX_CONCURRENT_CALLS")]
    pub tenant_max_concurrent_calls: Option<u64>,
    /// Calls of one tenant that may wait for a slot (default: --max-queued-calls less an eighth
    /// with keys, all of it without).
    #[arg(long, env = "WASMRPC_TENANT_MAX_QUEUED_CALLS")]
    pub tenant_max_queued_calls: Option<usize>,
    /// Default quota: calls one tenant may start per second (0: no limit).
    #[arg(long, env = "WASMRPC_TENANT_CALLS_PER_SECOND")]
    pub tenant_calls_per_second: Option<u64>,
    /// Join the cluster on these NATS servers (`nats://HOST:PORT`, comma-separated; JetStream,
    /// nats-server 2.10 or newer): the module store is shared and calls may run on any worker
    /// (docs/cluster.md). Needs --name. A NATS user and password, or a token, go in the URL
    /// (`nats://USER:PASS@HOST:PORT`, `nats://TOKEN@HOST:PORT`; WASMRPC_CLUSTER keeps them
    /// off the command line); `tls://` connects over TLS.
    // The variable's value may hold a password: `--help` must not print it.
    #[arg(long, env = "WASMRPC_CLUSTER", hide_env_values = true)]
    pub cluster: Option<String>,
    /// This worker's unique name in the cluster (1 to 64 of A-Z a-z 0-9 - _ /).
    #[arg(long, env = "WASMRPC_NAME")]
    pub name: Option<String>,
    /// This worker's rank in the cluster (default 0).
    #[arg(long, env = "WASMRPC_RANK")]
    pub rank: Option<u32>,
    /// The HOST:PORT other machines reach this worker's HTTP port at (default: the listen
    /// address).
    #[arg(long, env = "WASMRPC_ADVERTISE")]
    pub advertise: Option<String>,
    /// Replicas of the cluster's buckets: 1 on one NATS server, up to 5 on a NATS cluster.
    #[arg(long, env = "WASMRPC_CLUSTER_REPLICAS")]
    pub cluster_replicas: Option<usize>,
    /// A PEM file of CA certificates to trust for NATS over TLS (`tls://` URLs, or a server
    /// that requires TLS); without it, the system's roots.
    #[arg(long, env = "WASMRPC_CLUSTER_CA")]
    pub cluster_ca: Option<PathBuf>,
    /// Let web pages of this origin (`scheme://host[:port]`, exactly as a browser sends it in
    /// `Origin`) use the API from script, with CORS; repeatable (WASMRPC_ALLOW_ORIGINS:
    /// comma-separated). Without it, only pages served from the server's own address may.
    #[arg(
        long = "allow-origin",
        env = "WASMRPC_ALLOW_ORIGINS",
        value_delimiter = ','
    )]
    pub allow_origin: Option<Vec<String>>,
    /// A file holding the cluster's secret (at least 16 bytes, the same on every worker): the
    /// workers sign every call, reply and shared entry with it and refuse what is not signed
    /// (docs/cluster.md, "Trust"). The variable WASMRPC_CLUSTER_SECRET may hold the secret
    /// itself instead. Needed unless NATS is on this machine.
    #[arg(long, env = "WASMRPC_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// The most the cluster's payload store (call bodies over NATS's max payload, in flight
    /// between workers) may hold, in MiB (default 1024; give every worker the same). A large
    /// call that finds it full is refused with UNAVAILABLE, to be tried again.
    #[arg(long, env = "WASMRPC_CLUSTER_PAYLOAD_STORE_MIB")]
    pub cluster_payload_store_mib: Option<u64>,
    /// Export traces over OTLP to this collector (e.g. `http://localhost:4318`; with
    /// `--otlp-protocol grpc`, `http://localhost:4317`): each call's spans, children of the
    /// caller's `traceparent` (docs/operations.md, "Traces"). Off without it.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// How traces are sent: `http/protobuf` (default) or `grpc`.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL")]
    pub otlp_protocol: Option<String>,
    /// Headers sent with every export, as `key=value,key2=value2` (values percent-encoded): a
    /// collector's API key, say.
    // The variable's value may hold a secret: `--help` must not print it.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_HEADERS", hide_env_values = true)]
    pub otlp_headers: Option<String>,
    /// `service.name` of this server's spans (default: `wasmrpc`, or the one in
    /// OTEL_RESOURCE_ATTRIBUTES).
    #[arg(long, env = "OTEL_SERVICE_NAME")]
    pub service_name: Option<String>,
    /// Which traces are recorded: `parentbased_always_on` (default: those the caller records,
    /// and all that start here), `parentbased_traceidratio`, `parentbased_always_off`,
    /// `always_on`, `traceidratio`, `always_off`.
    #[arg(long, env = "OTEL_TRACES_SAMPLER")]
    pub traces_sampler: Option<String>,
    /// The share of traces a `…traceidratio` sampler records, from 0 to 1 (default 1).
    #[arg(long, env = "OTEL_TRACES_SAMPLER_ARG")]
    pub traces_sampler_arg: Option<String>,
}

macro_rules! merge_fields {
    ($a:expr, $b:expr, $($f:ident),*) => { $( if $a.$f.is_none() { $a.$f = $b.$f.clone(); } )* };
}

impl ServeSettings {
    /// Fill every unset field from `lower` (a lower-precedence source).
    pub(crate) fn or(mut self, lower: &ServeSettings) -> ServeSettings {
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
            max_bytes_in_flight,
            max_concurrent_calls,
            max_queued_calls,
            guest_log_bytes,
            compile_timeout_s,
            compile_memory_mib,
            compiler,
            header_timeout_s,
            body_timeout_s,
            drain_timeout_s,
            connection_threads,
            max_connections,
            pooling,
            keep_resident_mib,
            release_idle_code_s,
            tls_cert,
            tls_key,
            admin_key_file,
            metrics_listen,
            grpc_listen,
            tenant_max_methods,
            tenant_max_stored_bytes,
            tenant_max_concurrent_calls,
            tenant_max_queued_calls,
            tenant_calls_per_second,
            cluster,
            name,
            rank,
            advertise,
            cluster_replicas,
            cluster_ca,
            allow_origin,
            idle_timeout_s,
            max_connections_per_peer,
            cluster_secret_file,
            cluster_payload_store_mib,
            otlp_endpoint,
            otlp_protocol,
            otlp_headers,
            service_name,
            traces_sampler,
            traces_sampler_arg
        );
        self
    }

    /// Read a TOML file of settings.
    ///
    /// # Errors
    /// The file cannot be read or has unknown or malformed keys.
    pub(crate) fn from_file(path: &Path) -> anyhow::Result<ServeSettings> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("in {}: {e}", path.display()))
    }

    /// The complete configuration, defaults filling what is unset; reads the TLS files.
    ///
    /// # Errors
    /// Only one of `tls_cert` and `tls_key` is set, or a TLS file cannot be read or used (the
    /// message names the file).
    pub(crate) fn resolve(&self) -> anyhow::Result<ServerConfig> {
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
        if let Some(v) = self.compile_memory_mib {
            runtime.compile_memory = v.max(1) << 20;
        }
        if let Some(program) = &self.compiler {
            runtime.compiler = Compiler::ChildProcess {
                program: program.clone(),
            };
        }
        if let Some(v) = self.pooling {
            runtime.pooling = v;
        }
        if let Some(v) = self.keep_resident_mib {
            runtime.pool_keep_resident_bytes = v.saturating_mul(1 << 20);
        }
        if let Some(v) = self.release_idle_code_s {
            runtime.release_idle_code_after = (v > 0).then(|| Duration::from_secs(v));
        }
        let mut http = HttpLimits::default();
        if let Some(v) = self.max_request_bytes {
            http.max_request_bytes = v;
        }
        if let Some(v) = self.body_timeout_s {
            http.body_read_timeout = secs(v);
        }
        for origin in self
            .allow_origin
            .iter()
            .flatten()
            .filter(|o| !o.trim().is_empty())
        {
            http.allowed_origins.push(
                crate::api::parse_origin(origin)
                    .map_err(|e| anyhow::anyhow!("--allow-origin: {e}"))?,
            );
        }
        if let Some(v) = self.max_bytes_in_flight {
            http.max_bytes_in_flight = v;
        }
        // Every server's connection threads, the embedded one's too, run the same choreography.
        let mut serve = ServeOptions {
            thread_hooks: crate::threads::connection_hooks(),
            ..ServeOptions::default()
        };
        if let Some(v) = self.header_timeout_s {
            serve.header_read_timeout = secs(v);
        }
        if let Some(v) = self.drain_timeout_s {
            serve.drain_timeout = secs(v);
        }
        serve.connection_threads = self.connection_threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        if let Some(v) = self.max_connections {
            serve.max_connections = v.max(1);
        }
        if let Some(v) = self.idle_timeout_s {
            serve.idle_timeout = secs(v.max(1));
        }
        if let Some(v) = self.max_connections_per_peer {
            serve.max_connections_per_peer = v.max(1);
        }
        serve.tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(tls_config(cert, key)?),
            (None, None) => None,
            (Some(_), None) => anyhow::bail!(
                "a TLS certificate is set but the TLS key is missing: give --tls-key \
                 (WASMRPC_TLS_KEY, or tls_key in the config file) with --tls-cert"
            ),
            (None, Some(_)) => anyhow::bail!(
                "a TLS key is set but the TLS certificate is missing: give --tls-cert \
                 (WASMRPC_TLS_CERT, or tls_cert in the config file) with --tls-key"
            ),
        };
        // The server's own limits bound every tenant's quota; the defaults are what a tenant
        // without settings of its own gets.
        let server_limits = Quota {
            max_component_bytes: runtime.max_component_bytes as u64,
            max_methods: 0,
            max_stored_bytes: 0,
            memory_per_call_mib: (runtime.memory_per_call >> 20) as u64,
            max_deadline_ms: u64::try_from(runtime.max_deadline.as_millis()).unwrap_or(u64::MAX),
            max_concurrent_calls: runtime.max_concurrent_calls as u64,
            calls_per_second: 0,
        };
        let tenant_defaults = Quota {
            max_methods: self.tenant_max_methods.unwrap_or(0),
            max_stored_bytes: self.tenant_max_stored_bytes.unwrap_or(0),
            max_concurrent_calls: self
                .tenant_max_concurrent_calls
                .unwrap_or_else(|| {
                    crate::admission::one_tenants_share(server_limits.max_concurrent_calls)
                })
                .clamp(1, server_limits.max_concurrent_calls),
            calls_per_second: self.tenant_calls_per_second.unwrap_or(0),
            ..server_limits
        };
        // Without keys there is one tenant and nobody to keep slots for.
        let open_defaults = Quota {
            max_concurrent_calls: self
                .tenant_max_concurrent_calls
                .unwrap_or(server_limits.max_concurrent_calls)
                .clamp(1, server_limits.max_concurrent_calls),
            ..tenant_defaults
        };
        let cluster = match (&self.cluster, &self.name) {
            (None, None) => None,
            (Some(urls), Some(name)) => Some(ClusterSettings {
                urls: urls.clone(),
                name: name.clone(),
                rank: self.rank.unwrap_or(0),
                advertise: self.advertise.clone(),
                replicas: self.cluster_replicas.unwrap_or(1).clamp(1, 5),
                ca: self.cluster_ca.clone(),
                secret: cluster_secret(self.cluster_secret_file.as_deref())?,
                payload_store_bytes: self
                    .cluster_payload_store_mib
                    .unwrap_or(crate::cluster::calls::PAYLOAD_STORE_MIB)
                    .max(1)
                    .saturating_mul(1 << 20),
            }),
            (Some(_), None) => anyhow::bail!(
                "--cluster needs --name: every worker of a cluster has a unique name \
                 (WASMRPC_NAME, or name in the config file)"
            ),
            (None, Some(_)) => anyhow::bail!(
                "--name is a worker's name in a cluster: give --cluster nats://HOST:PORT too"
            ),
        };
        let traces = crate::otel::TraceFlags {
            endpoint: self.otlp_endpoint.clone(),
            protocol: self.otlp_protocol.clone(),
            headers: self.otlp_headers.clone(),
            service_name: self.service_name.clone(),
            sampler: self.traces_sampler.clone(),
            sampler_arg: self.traces_sampler_arg.clone(),
        }
        .resolve()?;
        Ok(ServerConfig {
            cluster,
            traces,
            listen: self
                .listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080))),
            data_dir: self.data_dir.clone().unwrap_or_else(default_data_dir),
            // With keys, one tenant may not fill the whole queue either (less an eighth, as with
            // slots); without keys the one implicit tenant may.
            tenant_max_queued: self.tenant_max_queued_calls.unwrap_or_else(|| {
                if self.admin_key_file.is_some() {
                    usize::try_from(crate::admission::one_tenants_share(
                        runtime.max_queued_calls as u64,
                    ))
                    .unwrap_or(runtime.max_queued_calls)
                } else {
                    runtime.max_queued_calls
                }
            }),
            runtime,
            http,
            serve,
            admin_key_file: self.admin_key_file.clone(),
            metrics_listen: self.metrics_listen,
            grpc_listen: self.grpc_listen,
            tenant_defaults,
            open_defaults,
            server_limits,
        })
    }
}

/// The cluster's secret: from `--cluster-secret-file`, else from `WASMRPC_CLUSTER_SECRET` (read
/// here, not by clap, so the value is in no `--help` and no command line), else none.
fn cluster_secret(
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<crate::cluster::trust::ClusterSecret>> {
    use crate::cluster::trust::ClusterSecret;
    if let Some(file) = file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            anyhow::anyhow!(
                "--cluster-secret-file {}: cannot read it: {e}",
                file.display()
            )
        })?;
        let from = format!("--cluster-secret-file {}", file.display());
        return ClusterSecret::new(&text, &from)
            .map(Some)
            .map_err(anyhow::Error::msg);
    }
    match std::env::var("WASMRPC_CLUSTER_SECRET") {
        Ok(text) => ClusterSecret::new(&text, "WASMRPC_CLUSTER_SECRET")
            .map(Some)
            .map_err(anyhow::Error::msg),
        Err(_) => Ok(None),
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
    /// Where the admin key is (or is to be written): keys are required when set.
    pub admin_key_file: Option<PathBuf>,
    /// A second address serving `/metrics` alone.
    pub metrics_listen: Option<SocketAddr>,
    /// An address serving the gRPC services alone (`--grpc-listen`).
    pub grpc_listen: Option<SocketAddr>,
    /// The quota of a tenant without settings of its own, when keys are configured.
    pub tenant_defaults: Quota,
    /// The quota of the one implicit tenant when no keys are configured: the same, except that
    /// it may fill every call slot.
    pub open_defaults: Quota,
    /// The server's own limits, which no quota may exceed (0: none).
    pub server_limits: Quota,
    /// Calls one tenant may have waiting for a slot.
    pub tenant_max_queued: usize,
    /// The cluster to join, if any.
    pub cluster: Option<ClusterSettings>,
    /// Where traces are exported, if anywhere.
    pub traces: Option<crate::otel::TraceSettings>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_by_default_leaves_an_eighth_of_the_slots_to_others() {
        let shares: Vec<u64> = [64, 16, 4, 2, 1]
            .into_iter()
            .map(crate::admission::one_tenants_share)
            .collect();
        assert_eq!(shares, [56, 14, 3, 1, 1]);
        let resolved = ServeSettings::default().resolve().unwrap();
        assert_eq!(resolved.tenant_defaults.max_concurrent_calls, 56);
        assert_eq!(resolved.open_defaults.max_concurrent_calls, 64);
        // The queue too: with keys a tenant leaves an eighth of it to others; without keys the
        // one implicit tenant may fill it.
        assert_eq!(resolved.tenant_max_queued, 4096);
        let keyed = ServeSettings {
            admin_key_file: Some(PathBuf::from("/nonexistent/admin.key")),
            ..ServeSettings::default()
        };
        assert_eq!(keyed.resolve().unwrap().tenant_max_queued, 3584);
        let told = ServeSettings {
            tenant_max_concurrent_calls: Some(64),
            ..ServeSettings::default()
        };
        assert_eq!(
            told.resolve().unwrap().tenant_defaults.max_concurrent_calls,
            64
        );
    }

    fn with_tls(cert: Option<&Path>, key: Option<&Path>) -> ServeSettings {
        ServeSettings {
            tls_cert: cert.map(Path::to_path_buf),
            tls_key: key.map(Path::to_path_buf),
            ..ServeSettings::default()
        }
    }

    fn self_signed(dir: &Path) -> (PathBuf, PathBuf) {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        (cert, key)
    }

    #[test]
    fn settings_without_tls_serve_cleartext() {
        assert!(
            ServeSettings::default()
                .resolve()
                .unwrap()
                .serve
                .tls
                .is_none()
        );
    }

    #[test]
    fn a_tls_certificate_without_a_key_is_an_error_naming_the_key() {
        let err = with_tls(Some(Path::new("cert.pem")), None)
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("TLS key is missing"), "{err}");
        assert!(err.contains("--tls-key"), "{err}");
        assert!(err.contains("WASMRPC_TLS_KEY"), "{err}");
    }

    #[test]
    fn a_tls_key_without_a_certificate_is_an_error_naming_the_certificate() {
        let err = with_tls(None, Some(Path::new("key.pem")))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains("TLS certificate is missing"), "{err}");
        assert!(err.contains("--tls-cert"), "{err}");
        assert!(err.contains("WASMRPC_TLS_CERT"), "{err}");
    }

    #[test]
    fn a_key_file_that_is_not_pem_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _) = self_signed(dir.path());
        let bad_key = dir.path().join("not-a-key.txt");
        std::fs::write(&bad_key, "this is not a private key\n").unwrap();
        let err = with_tls(Some(&cert), Some(&bad_key))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains(&bad_key.display().to_string()), "{err}");
        assert!(err.contains("no PEM private key"), "{err}");
    }

    #[test]
    fn a_certificate_file_that_cannot_be_read_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (_, key) = self_signed(dir.path());
        let missing = dir.path().join("missing.pem");
        let err = with_tls(Some(&missing), Some(&key))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains(&missing.display().to_string()), "{err}");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_an_error_naming_both_files() {
        let (one, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (cert, _) = self_signed(one.path());
        let (_, key) = self_signed(other.path());
        let err = with_tls(Some(&cert), Some(&key))
            .resolve()
            .unwrap_err()
            .to_string();
        assert!(err.contains(&cert.display().to_string()), "{err}");
        assert!(err.contains(&key.display().to_string()), "{err}");
    }

    #[test]
    fn a_certificate_and_its_key_give_tls_offering_h2_and_http1() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed(dir.path());
        let tls = with_tls(Some(&cert), Some(&key))
            .resolve()
            .unwrap()
            .serve
            .tls
            .expect("TLS configured");
        assert_eq!(
            tls.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn a_config_file_may_give_the_tls_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("wasmrpc.toml");
        std::fs::write(
            &file,
            "tls_cert = \"/etc/wasmrpc/chain.pem\"\ntls_key = \"/etc/wasmrpc/key.pem\"\n",
        )
        .unwrap();
        let settings = ServeSettings::from_file(&file).unwrap();
        assert_eq!(
            settings.tls_cert.as_deref(),
            Some(Path::new("/etc/wasmrpc/chain.pem"))
        );
        assert_eq!(
            settings.tls_key.as_deref(),
            Some(Path::new("/etc/wasmrpc/key.pem"))
        );
    }

    #[test]
    fn tls_settings_merge_from_lower_precedence_sources() {
        let file = with_tls(Some(Path::new("c.pem")), Some(Path::new("k.pem")));
        let flags = with_tls(Some(Path::new("flag.pem")), None);
        let merged = flags.or(&file);
        assert_eq!(merged.tls_cert.as_deref(), Some(Path::new("flag.pem")));
        assert_eq!(merged.tls_key.as_deref(), Some(Path::new("k.pem")));
    }
}

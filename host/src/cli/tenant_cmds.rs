//! `wasmrpc tenant create | list | show | rotate | revoke | delete | quota`: the admin API
//! (`/v1/tenants`) from the command line, as readable tables or, with `--json`, the server's JSON.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::Method;
use serde_json::Value;
use wasmrpc_client::ClientOptions;
use wasmrpc_client::transport::Transport;

use crate::out;

/// Where the tenant commands connect, and with which admin key.
#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// Server address: `http://HOST:PORT`, or `https://HOST:PORT` for TLS.
    #[arg(long, env = "WASMRPC_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// The admin key.
    #[arg(long, env = "WASMRPC_KEY", hide_env_values = true)]
    key: Option<String>,
    /// Read the admin key from this file (the server's `--admin-key-file`).
    #[arg(long, env = "WASMRPC_ADMIN_KEY_FILE", conflicts_with = "key")]
    admin_key_file: Option<PathBuf>,
    /// PEM CA certificate to trust for an `https` server, besides the webpki roots.
    #[arg(long, env = "WASMRPC_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// Seconds to wait for the server.
    #[arg(long, default_value_t = 30)]
    timeout_s: u64,
    /// Print the server's JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Quota settings to change; the ones not given stay as they are.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct QuotaArgs {
    /// Largest component the tenant may upload, in bytes.
    #[arg(long)]
    max_component_bytes: Option<u64>,
    /// Method names it may register (0: no limit).
    #[arg(long)]
    max_methods: Option<u64>,
    /// Bytes of components it may store (0: no limit).
    #[arg(long)]
    max_stored_bytes: Option<u64>,
    /// Linear memory per call, in MiB.
    #[arg(long)]
    memory_per_call_mib: Option<u64>,
    /// Longest deadline of one call, in milliseconds.
    #[arg(long)]
    max_deadline_ms: Option<u64>,
    /// Calls running at once.
    #[arg(long)]
    max_concurrent_calls: Option<u64>,
    /// Calls per second (0: no limit).
    #[arg(long)]
    calls_per_second: Option<u64>,
}

impl QuotaArgs {
    fn to_json(&self) -> Value {
        let mut map = serde_json::Map::new();
        let mut put = |name: &str, v: Option<u64>| {
            if let Some(v) = v {
                map.insert(name.to_owned(), v.into());
            }
        };
        put("max_component_bytes", self.max_component_bytes);
        put("max_methods", self.max_methods);
        put("max_stored_bytes", self.max_stored_bytes);
        put("memory_per_call_mib", self.memory_per_call_mib);
        put("max_deadline_ms", self.max_deadline_ms);
        put("max_concurrent_calls", self.max_concurrent_calls);
        put("calls_per_second", self.calls_per_second);
        Value::Object(map)
    }
}

/// One tenant command.
#[derive(Debug, clap::Subcommand)]
pub enum TenantCommand {
    /// Create a tenant; prints its first key (shown only this once).
    Create {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// List the tenants with their key ids, quotas and usage.
    List {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show one tenant.
    Show {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Give a tenant a further key (move its clients over, then `revoke` the old one).
    Rotate {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Revoke one of a tenant's keys, at once.
    Revoke {
        /// The tenant's name.
        name: String,
        /// The key's id (from `show`).
        key_id: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Delete a tenant, its keys and all its methods.
    Delete {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Show a tenant's quota, or change the settings given.
    Quota {
        /// The tenant's name.
        name: String,
        #[command(flatten)]
        settings: QuotaArgs,
        #[command(flatten)]
        admin: AdminArgs,
    },
}

fn transport(admin: &AdminArgs) -> anyhow::Result<Transport> {
    let key = match (&admin.key, &admin.admin_key_file) {
        (Some(key), _) => key.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the admin key from {}", path.display()))?
            .trim()
            .to_owned(),
        (None, None) => anyhow::bail!(
            "the tenant commands need the admin key: give --key KEY or --admin-key-file FILE"
        ),
    };
    let mut options = ClientOptions::default().with_key(key);
    if let Some(path) = &admin.ca_cert {
        let pem = std::fs::read(path)
            .with_context(|| format!("reading the CA certificate {}", path.display()))?;
        options = options.with_ca_cert_pem(pem);
    }
    let base = if admin.server.contains("://") {
        admin.server.trim_end_matches('/').to_owned()
    } else {
        format!("http://{}", admin.server)
    };
    Ok(Transport::with_options(&base, "wasmrpc-cli", &options)?)
}

fn request(
    admin: &AdminArgs,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let transport = transport(admin)?;
    let body = body.map(|v| (Bytes::from(v.to_string()), "application/json"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let answer = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(admin.timeout_s),
            transport.send(method, path, body),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the server did not answer within {} s", admin.timeout_s))?
        .map_err(anyhow::Error::from)
    })?;
    serde_json::from_slice(&answer).context("the server's answer is not JSON")
}

/// Run one tenant command.
///
/// # Errors
/// The server refused it (the message has the code), or could not be reached.
pub fn run(command: &TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create { name, admin } => {
            let body = serde_json::json!({ "name": name });
            let answer = request(admin, Method::POST, "/v1/tenants", Some(body))?;
            if admin.json {
                return print_json(&answer);
            }
            out!("created tenant {}", text(&answer["name"]));
            out!("key (shown only now; send it as `Authorization: Bearer <key>`):");
            out!("  {}", text(&answer["key"]));
            out!("key id: {}", text(&answer["key_id"]));
        }
        TenantCommand::List { admin } => {
            let answer = request(admin, Method::GET, "/v1/tenants", None)?;
            if admin.json {
                return print_json(&answer);
            }
            let tenants = answer["tenants"].as_array().cloned().unwrap_or_default();
            out!(
                "{:<24} {:>5} {:>8} {:>14} {:>10} {:>6}",
                "NAME",
                "KEYS",
                "METHODS",
                "STORED BYTES",
                "CALLS/S",
                "CONC"
            );
            for t in &tenants {
                out!(
                    "{:<24} {:>5} {:>8} {:>14} {:>10} {:>6}",
                    text(&t["name"]),
                    t["keys"].as_array().map_or(0, Vec::len),
                    t["usage"]["methods"],
                    t["usage"]["stored_bytes"],
                    limit(&t["quota"]["calls_per_second"]),
                    t["quota"]["max_concurrent_calls"],
                );
            }
            if tenants.is_empty() {
                out!("(no tenants: create one with `wasmrpc tenant create NAME`)");
            }
        }
        TenantCommand::Show { name, admin } => {
            let answer = request(admin, Method::GET, &format!("/v1/tenants/{name}"), None)?;
            print_tenant(admin, &answer)?;
        }
        TenantCommand::Rotate { name, admin } => {
            let answer = request(
                admin,
                Method::POST,
                &format!("/v1/tenants/{name}/keys"),
                None,
            )?;
            if admin.json {
                return print_json(&answer);
            }
            out!("new key for {} (shown only now):", text(&answer["name"]));
            out!("  {}", text(&answer["key"]));
            out!("key id: {}", text(&answer["key_id"]));
            out!(
                "move the tenant's clients to it, then revoke the old key: wasmrpc tenant revoke {name} OLD_KEY_ID"
            );
        }
        TenantCommand::Revoke {
            name,
            key_id,
            admin,
        } => {
            let path = format!("/v1/tenants/{name}/keys/{key_id}");
            let answer = request(admin, Method::DELETE, &path, None)?;
            if admin.json {
                return print_json(&answer);
            }
            out!("revoked key {key_id} of {name}");
        }
        TenantCommand::Delete { name, admin } => {
            let answer = request(admin, Method::DELETE, &format!("/v1/tenants/{name}"), None)?;
            if admin.json {
                return print_json(&answer);
            }
            out!(
                "deleted tenant {name} and its {} method(s)",
                answer["deleted_methods"]
            );
        }
        TenantCommand::Quota {
            name,
            settings,
            admin,
        } => {
            let patch = settings.to_json();
            let answer = if patch.as_object().is_some_and(|m| m.is_empty()) {
                request(admin, Method::GET, &format!("/v1/tenants/{name}"), None)?
            } else {
                request(
                    admin,
                    Method::PUT,
                    &format!("/v1/tenants/{name}/quota"),
                    Some(patch),
                )?
            };
            if admin.json {
                return print_json(&answer["quota"]);
            }
            print_quota(&answer);
        }
    }
    Ok(())
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// A limit where 0 means none.
fn limit(v: &Value) -> String {
    match v.as_u64() {
        Some(0) => "-".to_owned(),
        _ => v.to_string(),
    }
}

fn print_json(v: &Value) -> anyhow::Result<()> {
    out!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn print_tenant(admin: &AdminArgs, t: &Value) -> anyhow::Result<()> {
    if admin.json {
        return print_json(t);
    }
    out!("tenant {}", text(&t["name"]));
    out!("keys:");
    for k in t["keys"].as_array().cloned().unwrap_or_default() {
        out!("  {}  (created_ms {})", text(&k["key_id"]), k["created_ms"]);
    }
    out!(
        "usage: {} method(s), {} bytes stored",
        t["usage"]["methods"],
        t["usage"]["stored_bytes"]
    );
    print_quota(t);
    Ok(())
}

fn print_quota(t: &Value) {
    let overrides = &t["quota_overrides"];
    out!("quota (* set for this tenant; the rest are the server's defaults; - is no limit):");
    if let Some(quota) = t["quota"].as_object() {
        for (name, value) in quota {
            let mark = if overrides.get(name).is_some() {
                "*"
            } else {
                " "
            };
            out!("  {mark} {name:<22} {}", limit(value));
        }
    }
}

//! `deploy`, `list`, `call`, `delete`: thin wrappers over the client SDK.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use wasmrpc_client::Client;

use super::ServerArgs;
use super::args::parse_arg;
use super::output;
use crate::out;

fn block_on<T>(fut: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(fut)
}

async fn connect(server: &ServerArgs) -> anyhow::Result<Client> {
    // The address's scheme picks the layer; a bare HOST:PORT is cleartext.
    let scheme = server.server.split_once("://").map(|(scheme, _)| scheme);
    let rpc_layer = if scheme.is_some_and(|s| s.eq_ignore_ascii_case("https")) {
        "https"
    } else {
        "http"
    };
    let mut builder = Client::builder(rpc_layer, &server.server)
        .name("wasmrpc-cli")
        .timeout(Duration::from_secs(server.timeout_s));
    if let Some(key) = &server.key {
        builder = builder.key(key.clone());
    }
    if let Some(path) = &server.ca_cert {
        let pem = std::fs::read(path)
            .with_context(|| format!("reading the CA certificate {}", path.display()))?;
        builder = builder.ca_cert_pem(pem);
    }
    Ok(builder.connect().await?)
}

/// Uploads from this size on are said on stderr before they start (they take seconds).
const SAYS_IT_UPLOADS_FROM: usize = 1 << 20;

pub fn deploy(
    server: &ServerArgs,
    name: &str,
    file: &Path,
    export: Option<&str>,
    if_changed: bool,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    block_on(async {
        let client = connect(server).await?;
        if if_changed {
            let digest = crate::registry::Digest::of(&bytes).to_string();
            if let Ok(current) = client.describe(name).await
                && current.digest == digest
                && export.is_none_or(|e| e == current.export)
            {
                out!(
                    "{name} is unchanged (version {}, {digest})",
                    current.version
                );
                return Ok(());
            }
        }
        if bytes.len() >= SAYS_IT_UPLOADS_FROM {
            // A Python or JavaScript component is tens of MB and compiled before the server
            // answers: say what the seconds are for.
            eprintln!(
                "   Uploading {name} ({:.1} MiB); the server compiles it before it answers",
                bytes.len() as f64 / (1 << 20) as f64
            );
        }
        let info = client.register(name, bytes, export).await?;
        out!(
            "registered {} version {} ({}, {} bytes)",
            info.name,
            info.version,
            info.digest,
            info.size
        );
        out!("  {}", output::signature_line(&info.name, &info.signature));
        Ok(())
    })
}

pub fn list(server: &ServerArgs, json: bool) -> anyhow::Result<()> {
    block_on(async {
        let client = connect(server).await?;
        let methods = client.list_registered_methods();
        if json {
            out!("{}", serde_json::to_string_pretty(&methods)?);
            return Ok(());
        }
        if methods.is_empty() {
            out!("no methods registered");
        }
        for m in methods {
            out!(
                "{}  (version {} of {:?})",
                output::signature_line(&m.name, &m.signature),
                m.version,
                m.versions
            );
            let doc = m.signature.doc.trim();
            if !doc.is_empty() {
                out!("    {}", doc.replace('\n', "\n    "));
            }
        }
        Ok(())
    })
}

pub fn call(
    server: &ServerArgs,
    name: &str,
    raw_args: &[String],
    timeout_ms: u64,
    version: Option<u32>,
    json: bool,
) -> anyhow::Result<()> {
    let args = raw_args
        .iter()
        .enumerate()
        .map(|(i, a)| parse_arg(a).with_context(|| format!("argument {i} `{a}`")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    block_on(async {
        let client = connect(server).await?;
        let timeout = Some(Duration::from_millis(timeout_ms));
        let outputs = match version {
            Some(v) => client.call_version(name, v, args, timeout).await?,
            None => client.call_async(name, args, None, timeout).await?,
        };
        if json {
            out!("{}", serde_json::to_string(&outputs)?);
            return Ok(());
        }
        let names: Vec<String> = client
            .method(name)
            .map(|m| {
                m.signature()
                    .outputs
                    .iter()
                    .map(|s| s.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        for (i, t) in outputs.iter().enumerate() {
            let label = names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("output_{i}"));
            out!("{label}: {}", output::tensor_text(t));
        }
        Ok(())
    })
}

pub fn delete(server: &ServerArgs, name: &str) -> anyhow::Result<()> {
    block_on(async {
        let client = connect(server).await?;
        let versions = client.delete(name).await?;
        out!("deleted {name} (versions {versions:?})");
        Ok(())
    })
}

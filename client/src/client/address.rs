//! From the `rpc_layer` and `address` a client is created with to the base URL its transport
//! uses. Kept apart because TF's split of the two (`Client.create("grpc", "host:port")`) has
//! rules of its own: which layers exist, and that an address naming the other scheme is an
//! error rather than a silent switch.

use crate::code::Code;
use crate::error::Error;

/// The rpc layers a client can speak: `http` (HTTP/2 with prior knowledge over TCP), `https`
/// (HTTP/2 over TLS), and `grpc` and `grpcs`: calls as gRPC `ModelInfer` (KServe v2 over gRPC)
/// on the same kinds of connection, cleartext and TLS.
///
/// ```
/// assert_eq!(wasmrpc_client::client::RPC_LAYERS, &["http", "https", "grpc", "grpcs"]);
/// ```
pub const RPC_LAYERS: &[&str] = &["http", "https", "grpc", "grpcs"];

/// How a client's calls travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// The HTTP routes (v2 binary infer or v1 JSON, by [`crate::Encoding`]).
    Http,
    /// gRPC `ModelInfer`.
    Grpc,
}

/// What an rpc layer and an address come to: the transport's base URL (`http://` or
/// `https://`) and how calls travel.
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) base: String,
    pub(super) protocol: Protocol,
}

/// `host:port` or `{rpc_layer}://host:port` → the base URL of the transport under the layer.
pub(super) fn resolve(rpc_layer: &str, address: &str) -> Result<Resolved, Error> {
    let named = base_url(rpc_layer, address)?;
    let host_port = &named[rpc_layer.len() + 3..];
    let (scheme, protocol) = match rpc_layer {
        "grpc" => ("http", Protocol::Grpc),
        "grpcs" => ("https", Protocol::Grpc),
        other => (other, Protocol::Http),
    };
    Ok(Resolved {
        base: format!("{scheme}://{host_port}"),
        protocol,
    })
}

/// `host:port` or `{rpc_layer}://host:port` → `{rpc_layer}://host:port`.
///
/// An unsupported layer is refused with the list of supported ones; an address whose scheme is
/// not the rpc layer is refused rather than silently sent over the other one.
fn base_url(rpc_layer: &str, address: &str) -> Result<String, Error> {
    if !RPC_LAYERS.contains(&rpc_layer) {
        return Err(Error::new(
            Code::InvalidArgument,
            format!(
                "unsupported rpc_layer `{rpc_layer}`; supported layers: {}",
                RPC_LAYERS.join(", ")
            ),
        ));
    }
    match address.split_once("://") {
        None => Ok(format!("{rpc_layer}://{address}")),
        Some((scheme, _)) if scheme.eq_ignore_ascii_case(rpc_layer) => {
            Ok(format!("{rpc_layer}://{}", &address[scheme.len() + 3..]))
        }
        Some((scheme, _)) => Err(Error::new(
            Code::InvalidArgument,
            format!(
                "the address `{address}` is {scheme} but rpc_layer is `{rpc_layer}`: use \
                 rpc_layer `{scheme}` with it, or give the address as host:port"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_without_a_scheme_takes_the_rpc_layers() {
        assert_eq!(base_url("http", "h:1").unwrap(), "http://h:1");
        assert_eq!(base_url("https", "h:1").unwrap(), "https://h:1");
        assert_eq!(base_url("https", "https://h:1").unwrap(), "https://h:1");
        assert_eq!(base_url("https", "HTTPS://h:1").unwrap(), "https://h:1");
    }

    #[test]
    fn a_layer_outside_the_list_is_refused_before_the_address_is_read() {
        let err = base_url("carrier-pigeon", "carrier-pigeon://h:1").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("`carrier-pigeon`"), "{err}");
        assert!(err.message().contains("http, https, grpc, grpcs"), "{err}");
    }

    #[test]
    fn the_grpc_layers_travel_over_http2_cleartext_and_tls() {
        let r = resolve("grpc", "h:1").unwrap();
        assert_eq!(
            (r.base.as_str(), r.protocol),
            ("http://h:1", Protocol::Grpc)
        );
        let r = resolve("grpcs", "grpcs://h:1").unwrap();
        assert_eq!(
            (r.base.as_str(), r.protocol),
            ("https://h:1", Protocol::Grpc)
        );
        let r = resolve("https", "h:1").unwrap();
        assert_eq!(
            (r.base.as_str(), r.protocol),
            ("https://h:1", Protocol::Http)
        );
        let err = resolve("grpc", "http://h:1").unwrap_err();
        assert!(
            err.message().contains("is http but rpc_layer is `grpc`"),
            "{err}"
        );
    }
}

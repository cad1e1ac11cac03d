//! KServe v2 over gRPC (`inference.GRPCInferenceService`) on the client's own HTTP/2 connection:
//! [`GrpcChannel`] carries tonic's requests over [`Transport`]'s connection (its TLS, key,
//! name and pings), and the rpc layers `grpc` and `grpcs` send every call as a `ModelInfer`.
//!
//! The generated messages and client are re-exported here (from the contract crate), so a
//! program can also call any other RPC of the service on the same connection:
//! [`Client::grpc`](crate::Client::grpc).
//!
//! A call's tensors go as `raw_input_contents` and come back as `raw_output_contents` (typed
//! `contents` are read too); its timeout goes as the gRPC deadline (`grpc-timeout`); gRPC status
//! codes are the canonical codes, number for number, so an error is the same [`Error`] the HTTP
//! layers give. `ModelInfer` itself is framed by the client rather than by tonic (`framing.rs`),
//! so that a tensor is not copied into an encoded message on its way out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Uri, header};
use http_body_util::BodyExt as _;
pub use wasmrpc_proto::grpc::*;

use crate::body::Chunks;
use crate::code::Code;
use crate::connection::{Connection, Received};
use crate::error::Error;
use crate::tensor::Tensor;
use crate::transport::{CLIENT_NAME_HEADER, Transport};

mod framing;

/// The generated client of `inference.GRPCInferenceService` over a [`GrpcChannel`], with no
/// limit on message sizes (tonic's default of 4 MiB for answers is far below a tensor's).
pub type InferenceClient = grpc_inference_service_client::GrpcInferenceServiceClient<GrpcChannel>;

/// tonic's requests on a [`Transport`]'s HTTP/2 connection: each request's scheme and authority
/// are the server's, and it carries the client's name and its key (`authorization: Bearer …`,
/// a sensitive header). Cloning is cheap; clones share the connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use wasmrpc_client::grpc::{GrpcChannel, ServerLiveRequest, grpc_inference_service_client::GrpcInferenceServiceClient};
/// use wasmrpc_client::transport::Transport;
/// let transport = Transport::new("http://127.0.0.1:8080", "raw", None)?;
/// let mut client = GrpcInferenceServiceClient::new(GrpcChannel::new(&transport));
/// let live = client.server_live(ServerLiveRequest {}).await?.into_inner().live;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GrpcChannel {
    transport: Transport,
    connection: Arc<Connection>,
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    name: HeaderValue,
    key: Option<HeaderValue>,
}

impl std::fmt::Debug for GrpcChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcChannel")
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl GrpcChannel {
    /// A channel on `transport`'s connection.
    ///
    /// # Panics
    /// Never for a transport made by [`Transport::new`] or [`Transport::with_options`], whose
    /// base address is always a full URL.
    pub fn new(transport: &Transport) -> GrpcChannel {
        let base: Uri = transport
            .base()
            .parse()
            .expect("a transport's base address is a URL");
        let (connection, name, key) = transport.parts();
        GrpcChannel {
            transport: transport.clone(),
            connection: connection.clone(),
            scheme: base
                .scheme()
                .cloned()
                .expect("a transport's base has a scheme"),
            authority: base
                .authority()
                .cloned()
                .expect("a transport's base has a host"),
            name: name.clone(),
            key: key.cloned(),
        }
    }

    /// The generated client on this channel, with no limit on message sizes.
    pub fn client(&self) -> InferenceClient {
        InferenceClient::new(self.clone())
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }

    /// One `ModelInfer`, framed by the client itself (`framing.rs`): each large tensor is sent
    /// from its own buffer, not copied into an encoded message, and the answer's raw tensors are
    /// slices of the one buffer it is read into. The request's metadata (its `grpc-timeout`, say)
    /// goes as headers, as tonic sends it; its extensions are not used.
    ///
    /// # Errors
    /// The call's gRPC status; UNAVAILABLE when the server cannot be reached.
    pub async fn model_infer(
        &self,
        request: tonic::Request<ModelInferRequest>,
    ) -> Result<ModelInferResponse, tonic::Status> {
        let (metadata, _, message) = request.into_parts();
        let framed = framing::request(message)?;
        let mut headers = metadata.into_headers();
        // As tonic does: metadata cannot stand in for the protocol's own headers.
        for reserved in [
            "te",
            "user-agent",
            "content-type",
            "content-length",
            "grpc-message",
            "grpc-message-type",
            "grpc-status",
        ] {
            headers.remove(reserved);
        }
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        // gRPC does not need it, but with it the server reads the body into one buffer of this
        // length rather than one grown frame by frame (docs/benchmarks.md, issue 34, G2).
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(framed.length));
        let mut request = http::Request::new(());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = Uri::from_static("/inference.GRPCInferenceService/ModelInfer");
        *request.version_mut() = http::Version::HTTP_2;
        *request.headers_mut() = headers;
        let response = self.send(request, Chunks::new(framed.buffers)).await?;
        framing::answer(response).await
    }

    /// tonic's request: its body is its one message, already encoded.
    async fn exchange(
        self,
        request: http::Request<tonic::body::Body>,
    ) -> Result<http::Response<Received>, tonic::Status> {
        let (parts, mut body) = request.into_parts();
        // A unary request's body is its one message, already encoded: its buffers go out as
        // they are, with the head, in one write.
        let mut chunks = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                chunks.push(data);
            }
        }
        self.send(http::Request::from_parts(parts, ()), Chunks::new(chunks))
            .await
    }

    /// Send a gRPC request (its path, headers and body) to the server, with the client's name
    /// and key; the answer's head, once it is known to be gRPC.
    async fn send(
        &self,
        request: http::Request<()>,
        chunks: Chunks,
    ) -> Result<http::Response<Received>, tonic::Status> {
        let (mut parts, ()) = request.into_parts();
        let mut uri = parts.uri.into_parts();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        parts.uri = Uri::from_parts(uri)
            .map_err(|e| tonic::Status::invalid_argument(format!("bad gRPC path: {e}")))?;
        parts.headers.insert(CLIENT_NAME_HEADER, self.name.clone());
        self.transport.insert_trace_context(&mut parts.headers);
        if let Some(key) = &self.key {
            parts.headers.insert(header::AUTHORIZATION, key.clone());
        }
        let request = http::Request::from_parts(parts, ());
        let response = self
            .connection
            .send(request, &chunks)
            .await
            .map_err(|failure| {
                let error = self.transport.unreachable(&failure);
                tonic::Status::unavailable(error.message().to_owned())
            })?;
        let grpc = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if !grpc {
            // An HTTP answer (a server from before gRPC, or another service on this port):
            // tonic would try to read its body as gRPC frames and report a protocol error.
            return Err(tonic::Status::unimplemented(format!(
                "the server at {} does not answer gRPC (it answered {} with content-type {:?}); \
                 rpc_layer `http` or `https` calls it over HTTP",
                self.transport.base(),
                response.status(),
                response
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .map_or("none".into(), |v| String::from_utf8_lossy(v.as_bytes()))
            )));
        }
        Ok(response)
    }
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for GrpcChannel {
    type Response = http::Response<Received>;
    type Error = tonic::Status;
    type Future =
        Pin<Box<dyn Future<Output = Result<http::Response<Received>, tonic::Status>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), tonic::Status>> {
        // The connection is opened (or opened again) by the request itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.clone().exchange(request))
    }
}

/// A gRPC status as the client's [`Error`]: the same canonical code (gRPC's numbers are
/// TensorFlow's), the server's message.
///
/// ```
/// use wasmrpc_client::{Code, grpc::status_to_error};
/// let e = status_to_error(tonic::Status::not_found("no model named `m`"));
/// assert_eq!((e.code(), e.message()), (Code::NotFound, "no model named `m`"));
/// ```
pub fn status_to_error(status: tonic::Status) -> Error {
    let number = status.code() as i32;
    let code = usize::try_from(number - 1)
        .ok()
        .and_then(|i| Code::ALL.get(i).copied())
        .unwrap_or(Code::Unknown);
    Error::new(code, status.message().to_owned())
}

/// The `ModelInfer` request of a call: each input named and typed, its bytes in
/// `raw_input_contents` (shared with the tensor, not copied), every output asked for.
///
/// # Errors
/// INVALID_ARGUMENT when `names` and `args` differ in length (the call names its inputs).
pub fn infer_request(
    name: &str,
    version: Option<u32>,
    names: &[String],
    args: &[Tensor],
) -> Result<ModelInferRequest, Error> {
    crate::client::call::check_arity(name, names, args)?;
    let inputs = names
        .iter()
        .zip(args)
        .map(|(input, tensor)| model_infer_request::InferInputTensor {
            name: input.clone(),
            datatype: tensor.dtype().kserve_name().to_owned(),
            shape: tensor
                .shape()
                .iter()
                .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
                .collect(),
            ..Default::default()
        })
        .collect();
    Ok(ModelInferRequest {
        model_name: name.to_owned(),
        model_version: version.map(|v| v.to_string()).unwrap_or_default(),
        inputs,
        raw_input_contents: args.iter().map(|t| t.raw_bytes().clone()).collect(),
        ..Default::default()
    })
}

/// The outputs of a `ModelInfer` answer as tensors: from `raw_output_contents` (no copy), else
/// from each output's typed `contents`, each checked as the server checks a request's inputs
/// (the contract crate's [`infer::decode_response`]).
///
/// # Errors
/// INTERNAL when the answer does not describe valid tensors (the server's fault).
pub fn response_outputs(response: ModelInferResponse) -> Result<Vec<Tensor>, Error> {
    infer::decode_response(response)
        .map(|outputs| outputs.into_iter().map(|o| o.tensor).collect())
        .map_err(|e| {
            Error::new(
                Code::Internal,
                format!("the server's answer could not be read: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn every_grpc_status_code_is_the_canonical_code_of_the_same_number() {
        for code in Code::ALL {
            let status = tonic::Status::new(tonic::Code::from(i32::from(code.number())), "m");
            assert_eq!(status_to_error(status).code(), code);
        }
        let odd = tonic::Status::new(tonic::Code::from(99), "m");
        assert_eq!(status_to_error(odd).code(), Code::Unknown);
    }

    #[test]
    fn a_request_shares_its_tensors_bytes_and_names_every_input() {
        let a = Tensor::from_vec([2], vec![1i32, 2]).unwrap();
        let s = Tensor::from_strings([2], ["x", "yz"]).unwrap();
        let names = vec!["a".to_owned(), "s".to_owned()];
        let req = infer_request("m", Some(3), &names, &[a.clone(), s.clone()]).unwrap();
        assert_eq!(
            (req.model_name.as_str(), req.model_version.as_str()),
            ("m", "3")
        );
        assert_eq!(req.inputs[0].datatype, "INT32");
        assert_eq!(req.inputs[1].datatype, "BYTES");
        assert_eq!(req.inputs[1].shape, vec![2]);
        assert_eq!(
            req.raw_input_contents[0].as_ptr(),
            a.raw_bytes().as_ptr(),
            "no copy"
        );
        assert_eq!(&req.raw_input_contents[1][..], s.raw_data());
        assert!(req.outputs.is_empty(), "every output");
        let e = infer_request("m", None, &names, &[a]).unwrap_err();
        assert!(
            e.is_invalid_argument() && e.message().contains("a, s"),
            "{e}"
        );
    }

    #[test]
    fn outputs_come_from_raw_contents_or_typed_contents() {
        let out = |name: &str, datatype: &str, shape: Vec<i64>, contents| {
            model_infer_response::InferOutputTensor {
                name: name.into(),
                datatype: datatype.into(),
                shape,
                contents,
                ..Default::default()
            }
        };
        let raw = ModelInferResponse {
            outputs: vec![out("o", "FP32", vec![2], None)],
            raw_output_contents: vec![Bytes::from(
                [1.5f32, -2.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            )],
            ..Default::default()
        };
        let got = response_outputs(raw).unwrap();
        assert_eq!(got[0].to_vec::<f32>().unwrap(), vec![1.5, -2.0]);

        let typed = ModelInferResponse {
            outputs: vec![
                out(
                    "i",
                    "INT16",
                    vec![3],
                    Some(InferTensorContents {
                        int_contents: vec![-1, 2, 300],
                        ..Default::default()
                    }),
                ),
                out(
                    "s",
                    "BYTES",
                    vec![],
                    Some(InferTensorContents {
                        bytes_contents: vec![Bytes::from_static(b"hi")],
                        ..Default::default()
                    }),
                ),
            ],
            ..Default::default()
        };
        let got = response_outputs(typed).unwrap();
        assert_eq!(got[0].to_vec::<i16>().unwrap(), vec![-1, 2, 300]);
        assert_eq!(got[1].to_strings().unwrap(), vec![b"hi".to_vec()]);
        assert_eq!(got[1].shape(), &[] as &[u64]);

        let too_wide = ModelInferResponse {
            outputs: vec![out(
                "i",
                "INT8",
                vec![1],
                Some(InferTensorContents {
                    int_contents: vec![300],
                    ..Default::default()
                }),
            )],
            ..Default::default()
        };
        assert!(response_outputs(too_wide).unwrap_err().is_internal());
        let wrong_length = ModelInferResponse {
            outputs: vec![out("o", "FP32", vec![3], None)],
            raw_output_contents: vec![Bytes::from_static(&[0; 4])],
            ..Default::default()
        };
        assert!(response_outputs(wrong_length).unwrap_err().is_internal());
    }
}

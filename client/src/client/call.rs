//! Calls: [`Client::call`] (returns at once), [`Client::call_async`] (awaited) and
//! [`Client::call_version`], and what every call goes through on the way: the arguments checked
//! against a known signature, the timeout sent to the server and enforced here too, NOT_FOUND
//! answered with the methods that do exist, and the outputs checked against `output_specs`.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method};
use wasmrpc_proto::{headers, kserve};

use super::{Client, Encoding, Protocol, StatusOrResult, check_name, decode};
use crate::body::Chunks;
use crate::code::Code;
use crate::error::Error;
use crate::signature::TensorSpec;
use crate::tensor::Tensor;
use crate::{CallRequest, CallResponse};

/// Extra time the client waits past a call's timeout for the server's own DEADLINE_EXCEEDED, which
/// carries a better message; past it the client gives up by itself.
const CLIENT_DEADLINE_GRACE: Duration = Duration::from_millis(500);

/// How long a NOT_FOUND answer may spend refreshing the method list it shows.
const NOT_FOUND_REFRESH: Duration = Duration::from_secs(2);

impl Client {
    /// Start a call and return at once; the [`StatusOrResult`] completes when the call does
    /// (TF's `client.call(args, method_name, output_specs, timeout_in_ms)`).
    ///
    /// Without `output_specs` the value is the flat list of outputs; with them, each output is
    /// checked against its spec and a mismatch is INVALID_ARGUMENT. `timeout`: `None` for the
    /// client's default, `Some(Duration::ZERO)` for none; past it the result is
    /// DEADLINE_EXCEEDED, and the host stops the guest.
    ///
    /// # Panics
    /// Outside a tokio runtime: the call runs as a spawned task. Use [`crate::blocking::Client`]
    /// in programs without one.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use std::time::Duration;
    /// use wasmrpc_client::{DType, Tensor, TensorSpec};
    /// let specs = vec![TensorSpec { name: "sum".into(), dtype: DType::Int32, shape: Some(vec![]) }];
    /// let result = client.call("addition", vec![Tensor::scalar(2i32), Tensor::scalar(3i32)],
    ///                          Some(specs), Some(Duration::from_millis(500)));
    /// if result.is_ok().await {
    ///     assert_eq!(result.get_value().await?[0].to_vec::<i32>()?, vec![5]);
    /// } else if let Some((code, message)) = result.get_error().await {
    ///     eprintln!("{code}: {message}");
    /// }
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn call(
        &self,
        method_name: &str,
        args: Vec<Tensor>,
        output_specs: Option<Vec<TensorSpec>>,
        timeout: Option<Duration>,
    ) -> StatusOrResult {
        self.call_on(
            &tokio::runtime::Handle::current(),
            method_name,
            args,
            output_specs,
            timeout,
        )
    }

    /// [`Client::call`] on `runtime`: the blocking client starts calls on its own runtime
    /// thread, from threads that have none.
    pub(crate) fn call_on(
        &self,
        runtime: &tokio::runtime::Handle,
        method_name: &str,
        args: Vec<Tensor>,
        output_specs: Option<Vec<TensorSpec>>,
        timeout: Option<Duration>,
    ) -> StatusOrResult {
        let client = self.clone();
        let name = method_name.to_owned();
        StatusOrResult::spawn_on(runtime, async move {
            client
                .call_async(&name, args, output_specs.as_deref(), timeout)
                .await
        })
    }

    /// The call itself, awaited: outputs, or the error with its canonical code.
    ///
    /// Arguments and timeout are as for [`Client::call`]; this form needs no spawned task.
    ///
    /// # Errors
    /// INVALID_ARGUMENT when the args do not fit a known signature (nothing is sent then) or the
    /// outputs do not fit `output_specs`; DEADLINE_EXCEEDED past the timeout; NOT_FOUND, listing
    /// the registered methods, for an unknown method; the server's or the guest's error.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let outputs = client
    ///     .call_async("addition", vec![Tensor::vector(vec![1i32, 2]), Tensor::vector(vec![10i32, 20])],
    ///                 None, None)
    ///     .await?;
    /// assert_eq!(outputs[0].to_vec::<i32>()?, vec![11, 22]);
    /// # Ok(()) }
    /// ```
    pub async fn call_async(
        &self,
        method_name: &str,
        args: Vec<Tensor>,
        output_specs: Option<&[TensorSpec]>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Tensor>, Error> {
        check_name(method_name)?;
        if let Some(info) = self.known(method_name) {
            info.signature
                .check_args(&args)
                .map_err(|why| Error::new(Code::InvalidArgument, why))?;
        }
        let timeout = timeout.unwrap_or(self.inner.default_timeout);
        let outputs = match self.send_call(method_name, None, args, timeout).await {
            Ok(outputs) => outputs,
            Err(e) if e.is_not_found() => return Err(self.not_found_listing(e).await),
            Err(e) => return Err(e),
        };
        if let Some(specs) = output_specs {
            check_outputs(specs, &outputs)?;
        }
        Ok(outputs)
    }

    /// NOT_FOUND from the server, with the methods that do exist: the list is refreshed first
    /// (briefly; on failure the last one is shown), so that a deletion elsewhere shows too.
    async fn not_found_listing(&self, e: Error) -> Error {
        let _ = tokio::time::timeout(NOT_FOUND_REFRESH, self.refresh()).await;
        Error::new(
            e.code(),
            format!("{}; {}", e.message(), self.registered_names()),
        )
    }

    /// Call a pinned version of a method (`?version=N`); arguments are checked by the server
    /// only, and the outputs are not checked.
    ///
    /// # Errors
    /// As [`Client::call_async`]; NOT_FOUND for a version that does not exist.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let outputs = client
    ///     .call_version("addition", 1, vec![Tensor::scalar(2i32), Tensor::scalar(3i32)], None)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn call_version(
        &self,
        method_name: &str,
        version: u32,
        args: Vec<Tensor>,
        timeout: Option<Duration>,
    ) -> Result<Vec<Tensor>, Error> {
        check_name(method_name)?;
        let timeout = timeout.unwrap_or(self.inner.default_timeout);
        self.send_call(method_name, Some(version), args, timeout)
            .await
    }

    /// Send one call in the client's encoding, within `timeout` plus a grace for the server's
    /// own DEADLINE_EXCEEDED.
    async fn send_call(
        &self,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let call = async {
            match (self.inner.protocol, self.inner.encoding) {
                // gRPC's tensors are binary: `send_binary_call` takes that road for it.
                (Protocol::Grpc, _) | (Protocol::Http, Encoding::Binary) => {
                    self.send_binary_call(name, version, args, timeout).await
                }
                (Protocol::Http, Encoding::Json) => {
                    self.send_json_call(name, version, args, timeout).await
                }
            }
        };
        let limit = if timeout.is_zero() {
            Duration::ZERO
        } else {
            timeout + CLIENT_DEADLINE_GRACE
        };
        if limit.is_zero() {
            return call.await;
        }
        // Past the grace the server has not answered; the message names the caller's timeout,
        // not the grace added to it.
        tokio::time::timeout(limit, call).await.map_err(|_| {
            Error::new(
                Code::DeadlineExceeded,
                format!(
                    "the call to `{name}` did not finish within its timeout of {} ms \
                     (no answer from the server)",
                    timeout.as_millis()
                ),
            )
        })?
    }

    /// The v1 call route, in JSON.
    async fn send_json_call(
        &self,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let path = match version {
            Some(v) => format!("/v1/methods/{name}/call?version={v}"),
            None => format!("/v1/methods/{name}/call"),
        };
        self.send_json_call_to(&path, args, timeout).await
    }

    /// A v1 call to `path` (`/v1/methods/NAME/call` with its query), in JSON.
    pub(crate) async fn send_json_call_to(
        &self,
        path: &str,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let body = serde_json::to_vec(&CallRequest {
            args,
            timeout_ms: timeout_ms(timeout),
        })
        .map_err(|e| Error::new(Code::InvalidArgument, format!("encoding the args: {e}")))?;
        let answer = self
            .inner
            .transport
            .send(Method::POST, path, Some((Bytes::from(body), headers::JSON)))
            .await?;
        let response: CallResponse = decode(&answer)?;
        Ok(response.outputs)
    }

    /// The v2 infer route with binary tensor data both ways, or gRPC `ModelInfer` under the
    /// `grpc` layers. Inputs go by name, so the names come from the method list (or the model's
    /// metadata); when the server says they are stale (the method was registered again with
    /// other inputs), they are fetched again and the call is sent once more.
    async fn send_binary_call(
        &self,
        name: &str,
        version: Option<u32>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        self.send_binary_call_on(name, version, None, args, timeout)
            .await
    }

    /// [`Client::send_binary_call`] run on the cluster's worker `worker` (`any`: any live one;
    /// `None`: the server called), percent-encoded as in a query: over HTTP `?worker=`, over
    /// gRPC the request's `worker` parameter.
    pub(crate) async fn send_binary_call_on(
        &self,
        name: &str,
        version: Option<u32>,
        worker: Option<&str>,
        args: Vec<Tensor>,
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let grpc = self.inner.protocol == Protocol::Grpc;
        let args = &args;
        let attempt = |names: Vec<String>| async move {
            if grpc {
                let worker = worker.map(|w| w.replace("%2F", "/"));
                self.grpc_infer(name, version, worker.as_deref(), &names, args, timeout)
                    .await
            } else {
                self.infer(name, version, worker, &names, args, timeout)
                    .await
            }
        };
        let names = self.input_names(name, version).await?;
        match attempt(names).await {
            Err(e) if e.is_invalid_argument() && stale_names(&e) => {
                self.forget_input_names(name, version).await;
                let names = self.input_names(name, version).await?;
                attempt(names).await
            }
            other => other,
        }
    }

    /// One gRPC `ModelInfer`: the tensors' bytes as `raw_input_contents`, the timeout as the
    /// gRPC deadline (`grpc-timeout`; none for `ZERO`, and the server's default applies), the
    /// cluster's `worker` (`any`, or a name) as the `worker` parameter.
    async fn grpc_infer(
        &self,
        name: &str,
        version: Option<u32>,
        worker: Option<&str>,
        names: &[String],
        args: &[Tensor],
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        let mut message = crate::grpc::infer_request(name, version, names, args)?;
        if let Some(worker) = worker {
            let choice = crate::grpc::infer_parameter::ParameterChoice::StringParam(worker.into());
            message.parameters.insert(
                "worker".into(),
                crate::grpc::InferParameter {
                    parameter_choice: Some(choice),
                },
            );
        }
        let mut request = tonic::Request::new(message);
        if !timeout.is_zero() {
            request.set_timeout(timeout);
        }
        let response = self
            .inner
            .channel
            .model_infer(request)
            .await
            .map_err(crate::grpc::status_to_error)?;
        crate::grpc::response_outputs(response)
    }

    /// The client's encoding: whether calls carry binary tensors (else JSON).
    pub(crate) fn binary(&self) -> bool {
        matches!(self.inner.encoding, Encoding::Binary)
    }

    async fn infer(
        &self,
        name: &str,
        version: Option<u32>,
        worker: Option<&str>,
        names: &[String],
        args: &[Tensor],
        timeout: Duration,
    ) -> Result<Vec<Tensor>, Error> {
        check_arity(name, names, args)?;
        let inputs: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(args).collect();
        let timeout_us = (!timeout.is_zero())
            .then(|| u64::try_from(timeout.as_micros().max(1)).unwrap_or(u64::MAX));
        let encoded = kserve::encode_infer_request(&inputs, timeout_us);
        let path = match worker {
            None => format!("{}/infer", model_path(name, version)),
            Some(w) => format!("{}/infer?worker={w}", model_path(name, version)),
        };
        let (response_headers, body) = self
            .inner
            .transport
            .exchange(
                Method::POST,
                &path,
                // The header and each tensor's bytes as they are, not joined into one buffer.
                Some((Chunks::new(encoded.chunks), headers::OCTET_STREAM)),
                &[(
                    headers::INFERENCE_HEADER_CONTENT_LENGTH,
                    HeaderValue::from(encoded.header_length),
                )],
            )
            .await?;
        let header_length = match response_headers.get(headers::INFERENCE_HEADER_CONTENT_LENGTH) {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| {
                        Error::new(
                            Code::Internal,
                            "the server's Inference-Header-Content-Length is not a number",
                        )
                    })?,
            ),
        };
        let outputs = kserve::decode_infer_response(&body, header_length).map_err(|e| {
            Error::new(
                Code::Internal,
                format!("the server's answer could not be read: {e}"),
            )
        })?;
        Ok(outputs.into_iter().map(|o| o.tensor).collect())
    }

    /// The input names of `name` (at `version`): from the method list for the newest version,
    /// else from the model's v2 metadata, fetched once.
    async fn input_names(&self, name: &str, version: Option<u32>) -> Result<Vec<String>, Error> {
        if version.is_none()
            && let Some(info) = self.known(name)
        {
            return Ok(info.signature.inputs.into_iter().map(|s| s.name).collect());
        }
        let key = (name.to_owned(), version);
        if let Some(names) = self
            .inner
            .input_names
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(names.clone());
        }
        let body = self
            .inner
            .transport
            .send(Method::GET, &model_path(name, version), None)
            .await?;
        let metadata: kserve::ModelMetadata = decode(&body)?;
        let names: Vec<String> = metadata.inputs.into_iter().map(|i| i.name).collect();
        self.inner
            .input_names
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, names.clone());
        Ok(names)
    }

    /// Drop what is known of `name`'s inputs, so the next call asks the server again.
    async fn forget_input_names(&self, name: &str, version: Option<u32>) {
        self.inner
            .input_names
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(name.to_owned(), version));
        if version.is_none() {
            // Bounded, as for NOT_FOUND; on failure the names come from the metadata route.
            if tokio::time::timeout(NOT_FOUND_REFRESH, self.refresh())
                .await
                .is_err()
            {
                self.inner
                    .methods
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(name);
            }
        }
    }
}

/// The v2 route of a model, at `version` when pinned: `/v2/models/{name}[/versions/{v}]`.
fn model_path(name: &str, version: Option<u32>) -> String {
    match version {
        Some(v) => format!("/v2/models/{name}/versions/{v}"),
        None => format!("/v2/models/{name}"),
    }
}

/// Whether a refusal says the inputs were named after a signature the method no longer has.
fn stale_names(e: &Error) -> bool {
    e.message().starts_with("unknown input") || e.message().starts_with("missing input")
}

/// A timeout in whole milliseconds for the wire, rounded up: a non-zero timeout under 1 ms must
/// not become 0, which means "the server's default".
fn timeout_ms(timeout: Duration) -> u64 {
    let ms = timeout.as_millis() + u128::from(!timeout.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

fn check_outputs(specs: &[TensorSpec], outputs: &[Tensor]) -> Result<(), Error> {
    if specs.len() != outputs.len() {
        return Err(Error::new(
            Code::InvalidArgument,
            format!(
                "output_specs has {} specs but the method returned {} outputs",
                specs.len(),
                outputs.len()
            ),
        ));
    }
    for (i, (spec, out)) in specs.iter().zip(outputs).enumerate() {
        if let Some(why) = spec.mismatch(out) {
            return Err(Error::new(
                Code::InvalidArgument,
                format!(
                    "output {i} does not match output_specs[{i}] (`{}`): {why}",
                    spec.name
                ),
            ));
        }
    }
    Ok(())
}

/// A call's arguments against the method's input names: INVALID_ARGUMENT, naming them, when the
/// counts differ (checked here, for HTTP and gRPC alike, before anything is sent).
pub(crate) fn check_arity(name: &str, names: &[String], args: &[Tensor]) -> Result<(), Error> {
    if names.len() == args.len() {
        return Ok(());
    }
    Err(Error::new(
        Code::InvalidArgument,
        format!(
            "`{name}` takes {} argument(s) ({}), got {}",
            names.len(),
            names.join(", "),
            args.len()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Transport;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(timeout_ms(Duration::ZERO), 0);
        assert_eq!(timeout_ms(Duration::from_nanos(1)), 1);
        assert_eq!(timeout_ms(Duration::from_millis(300)), 300);
        assert_eq!(timeout_ms(Duration::from_micros(300_001)), 301);
        assert_eq!(timeout_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_server_that_never_answers_a_call_is_deadline_exceeded_in_the_client() {
        // Accepts connections (the kernel does) and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", silent.local_addr().unwrap());
        // Made without `connect`, which would wait for the method list.
        let client = Client::new(
            Transport::new(&base, "t", None).unwrap(),
            "http",
            Protocol::Http,
            "t".into(),
            Duration::from_millis(100),
            Encoding::Binary,
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let err = rt
            .block_on(client.call_async("m", vec![], None, None))
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert!(err.message().contains("timeout of 100 ms"), "{err}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100) + CLIENT_DEADLINE_GRACE,
            "{took:?}"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    async fn grpc_client(server: &crate::test_support::RecordingServer) -> Client {
        let client = Client::builder("grpc", &server.address)
            .name("g")
            .key("my-key")
            .connect()
            .await
            .unwrap();
        server.take_requests(); // the method list, over HTTP
        client
    }

    #[tokio::test]
    async fn a_grpc_call_is_model_infer_with_raw_tensors_its_key_name_and_deadline() {
        let server = crate::test_support::RecordingServer::start();
        let client = grpc_client(&server).await;
        assert_eq!(client.address(), format!("grpc://{}", server.address));
        let a = Tensor::from_vec([2], vec![1i32, 2]).unwrap();
        let b = Tensor::from_strings([1], ["é"]).unwrap();
        let out = client
            .call_async(
                "echo",
                vec![a.clone(), b.clone()],
                None,
                Some(Duration::from_millis(1500)),
            )
            .await
            .unwrap();
        assert_eq!(out, vec![a, b], "the stand-in echoes its raw inputs");
        let seen = server.take_requests();
        let infer = seen.last().unwrap();
        assert_eq!(infer.path, "/inference.GRPCInferenceService/ModelInfer");
        assert_eq!(infer.header("content-type"), Some("application/grpc"));
        assert_eq!(infer.header("authorization"), Some("Bearer my-key"));
        assert_eq!(infer.header("x-wasmrpc-client"), Some("g"));
        let deadline = infer.header("grpc-timeout").expect("a grpc-timeout");
        assert!(
            ["1500m", "1500000u", "1500000000n"].contains(&deadline),
            "{deadline}"
        );

        // No timeout: no deadline, and the server's default applies.
        let no_limit = Tensor::scalar(1i32);
        client
            .call_async(
                "echo",
                vec![no_limit.clone(), no_limit],
                None,
                Some(Duration::ZERO),
            )
            .await
            .unwrap();
        assert_eq!(
            server
                .take_requests()
                .last()
                .unwrap()
                .header("grpc-timeout"),
            None
        );
    }

    #[tokio::test]
    async fn grpc_status_codes_are_the_same_errors_as_over_http() {
        let server = crate::test_support::RecordingServer::start();
        let client = grpc_client(&server).await;
        let args = || vec![Tensor::scalar(1i32), Tensor::scalar(2i32)];
        let err = client
            .call_async("missing", args(), None, None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err}");
        // NOT_FOUND lists what exists, as over HTTP.
        assert!(
            err.message()
                .starts_with("no model named `missing`; registered methods: none"),
            "{err}"
        );
        let err = client
            .call_async("denied", args(), None, None)
            .await
            .unwrap_err();
        assert_eq!(
            (err.code(), err.message()),
            (Code::PermissionDenied, "not yours")
        );
        let started = std::time::Instant::now();
        let err = client
            .call_async("slow", args(), None, Some(Duration::from_millis(200)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // The wrong number of arguments is refused before anything is sent.
        let err = client
            .call_async("echo", vec![Tensor::scalar(1i32)], None, None)
            .await
            .unwrap_err();
        assert!(err.is_invalid_argument(), "{err}");
    }

    #[tokio::test]
    async fn a_call_to_a_cluster_worker_names_it_in_the_grpc_parameters() {
        let server = crate::test_support::RecordingServer::start();
        let client = grpc_client(&server).await;
        let args = vec![Tensor::scalar(1i32), Tensor::scalar(2i32)];
        // The stand-in answers `where` with the worker parameter it got, as an error.
        let err = client
            .send_binary_call_on("where", None, Some("rack%2Fw1"), args, Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(err.message(), "worker=rack/w1");
        assert_eq!(
            server.take_requests().last().unwrap().path,
            "/inference.GRPCInferenceService/ModelInfer"
        );
    }

    #[tokio::test]
    async fn a_grpc_server_nobody_listens_on_is_unavailable_and_says_where() {
        let address = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let client = Client::new(
            Transport::new(&format!("http://{address}"), "t", None).unwrap(),
            "grpc",
            Protocol::Grpc,
            "t".into(),
            Duration::ZERO,
            Encoding::Binary,
        );
        let names = vec!["a".to_owned()];
        let err = client
            .grpc_infer(
                "m",
                None,
                None,
                &names,
                &[Tensor::scalar(1i32)],
                Duration::ZERO,
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err}");
        assert!(err.message().contains(&address.to_string()), "{err}");
    }

    #[tokio::test]
    async fn a_server_that_answers_grpc_with_http_is_unimplemented_saying_so() {
        // The stand-in answers `/v1/...` paths with JSON whatever the content type.
        let server = crate::test_support::RecordingServer::start();
        let transport = Transport::new(&format!("http://{}", server.address), "t", None).unwrap();
        let mut raw = tonic::client::Grpc::new(crate::grpc::GrpcChannel::new(&transport));
        raw.ready().await.unwrap();
        let status = raw
            .unary::<_, crate::grpc::ServerLiveResponse, _>(
                tonic::Request::new(crate::grpc::ServerLiveRequest {}),
                http::uri::PathAndQuery::from_static("/v1/methods"),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap_err();
        let err = crate::grpc::status_to_error(status);
        assert_eq!(err.code(), Code::Unimplemented, "{err}");
        assert!(err.message().contains("does not answer gRPC"), "{err}");
        assert!(
            err.message().contains("application/json") || err.message().contains("none"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_raw_grpc_client_shares_the_connection_key_and_name() {
        let server = crate::test_support::RecordingServer::start();
        let client = grpc_client(&server).await;
        let status = client
            .grpc()
            .server_live(crate::grpc::ServerLiveRequest {})
            .await
            .unwrap_err();
        assert_eq!(
            crate::grpc::status_to_error(status).code(),
            Code::Unimplemented
        );
        let seen = server.take_requests();
        assert_eq!(seen[0].path, "/inference.GRPCInferenceService/ServerLive");
        assert_eq!(seen[0].header("authorization"), Some("Bearer my-key"));
    }

    #[test]
    fn output_specs_check_count_dtype_and_shape() {
        let spec = |dtype, shape| TensorSpec {
            name: "out".into(),
            dtype,
            shape,
        };
        let out = vec![Tensor::vector(vec![1i32, 2])];
        assert!(check_outputs(&[spec(crate::DType::Int32, None)], &out).is_ok());
        let dynamic = Some(vec![crate::Dim::Dynamic]);
        assert!(check_outputs(&[spec(crate::DType::Int32, dynamic)], &out).is_ok());
        let e = check_outputs(&[spec(crate::DType::Float32, None)], &out).unwrap_err();
        assert!(e.message().contains("output 0"), "{e}");
        let fixed = Some(vec![crate::Dim::Fixed(3)]);
        assert!(check_outputs(&[spec(crate::DType::Int32, fixed)], &out).is_err());
        assert!(check_outputs(&[], &out).is_err());
    }
}

//! A stand-in server for unit tests: HTTP/2 with prior knowledge, recording what each request
//! carried and answering every one with an empty method list (or, under `/v2/models/`, a model
//! taking `a` and `b`), except gRPC requests to `/inference.*` (`content-type:
//! application/grpc`), which a stand-in `GRPCInferenceService` answers ([`FakeInference`]).
//!
//! It runs on a thread and runtime of its own so that blocking clients, which refuse to run
//! inside a runtime, can be tested against it too.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tonic::codegen::Service as _;
use tonic::{Request, Response, Status};

use crate::grpc::grpc_inference_service_server::{
    GrpcInferenceService, GrpcInferenceServiceServer as InferenceServer,
};
use crate::grpc::*;

/// One request as the server saw it.
pub(crate) struct Seen {
    pub(crate) path: String,
    headers: http::HeaderMap,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub(crate) struct RecordingServer {
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RecordingServer {
    pub(crate) fn start() -> RecordingServer {
        RecordingServer::start_on("127.0.0.1:0")
    }

    /// A server on `address` (a port another server just gave up, say).
    pub(crate) fn start_on(address: &str) -> RecordingServer {
        let listener = std::net::TcpListener::bind(address).unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let record = seen.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    loop {
                        let (stream, _) = listener.accept().await.unwrap();
                        let record = record.clone();
                        let service = hyper::service::service_fn(
                            move |req: http::Request<hyper::body::Incoming>| {
                                record.lock().unwrap().push(Seen {
                                    path: req.uri().path().to_owned(),
                                    headers: req.headers().clone(),
                                });
                                let path = req.uri().path().to_owned();
                                let grpc = path.starts_with("/inference.")
                                    && req.headers().get(http::header::CONTENT_TYPE).is_some_and(
                                        |v| v.as_bytes().starts_with(b"application/grpc"),
                                    );
                                async move {
                                    if grpc {
                                        let mut inference = InferenceServer::new(FakeInference);
                                        return inference.call(req).await;
                                    }
                                    // Every model takes `a` and `b`, for the gRPC calls' names.
                                    let answer: &'static [u8] = if path.starts_with("/v2/models/") {
                                        MODEL_METADATA
                                    } else {
                                        br#"{"methods":[]}"#
                                    };
                                    let body = Full::new(Bytes::from_static(answer));
                                    Ok::<_, Infallible>(http::Response::new(
                                        tonic::body::Body::new(body),
                                    ))
                                }
                            },
                        );
                        tokio::spawn(
                            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(stream), service),
                        );
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        RecordingServer {
            address,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The requests seen since the last call, oldest first.
    pub(crate) fn take_requests(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What `GET /v2/models/{name}` answers for every name: inputs `a` and `b`.
const MODEL_METADATA: &[u8] = br#"{"name":"m","versions":["1"],"platform":"wasmrpc_wasm","inputs":[{"name":"a","datatype":"INT32","shape":[-1]},{"name":"b","datatype":"INT32","shape":[-1]}],"outputs":[]}"#;

/// The stand-in gRPC service: `ModelInfer` of `echo` answers its inputs as outputs, of
/// `missing` NOT_FOUND, of `denied` PERMISSION_DENIED, of `slow` after 10 s, of `where`
/// FAILED_PRECONDITION naming its `worker` parameter; every other RPC is UNIMPLEMENTED.
pub(crate) struct FakeInference;

#[tonic::async_trait]
impl GrpcInferenceService for FakeInference {
    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        let request = request.into_inner();
        match request.model_name.as_str() {
            "missing" => return Err(Status::not_found("no model named `missing`")),
            "denied" => return Err(Status::permission_denied("not yours")),
            "slow" => tokio::time::sleep(Duration::from_secs(10)).await,
            "where" => {
                let worker = match request
                    .parameters
                    .get("worker")
                    .map(|p| &p.parameter_choice)
                {
                    Some(Some(infer_parameter::ParameterChoice::StringParam(w))) => w.as_str(),
                    _ => "none",
                };
                return Err(Status::failed_precondition(format!("worker={worker}")));
            }
            _ => {}
        }
        let outputs = request
            .inputs
            .iter()
            .map(|i| model_infer_response::InferOutputTensor {
                name: i.name.clone(),
                datatype: i.datatype.clone(),
                shape: i.shape.clone(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(ModelInferResponse {
            model_name: request.model_name,
            outputs,
            raw_output_contents: request.raw_input_contents,
            ..Default::default()
        }))
    }

    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Err(Status::unimplemented("ServerLive"))
    }

    async fn server_ready(
        &self,
        _: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        Err(Status::unimplemented("ServerReady"))
    }

    async fn model_ready(
        &self,
        _: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        Err(Status::unimplemented("ModelReady"))
    }

    async fn server_metadata(
        &self,
        _: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        Err(Status::unimplemented("ServerMetadata"))
    }

    async fn model_metadata(
        &self,
        _: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        Err(Status::unimplemented("ModelMetadata"))
    }

    async fn model_config(
        &self,
        _: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        Err(Status::unimplemented("ModelConfig"))
    }

    async fn model_statistics(
        &self,
        _: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        Err(Status::unimplemented("ModelStatistics"))
    }

    async fn repository_index(
        &self,
        _: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        Err(Status::unimplemented("RepositoryIndex"))
    }

    async fn repository_model_load(
        &self,
        _: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        Err(Status::unimplemented("RepositoryModelLoad"))
    }

    async fn repository_model_unload(
        &self,
        _: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        Err(Status::unimplemented("RepositoryModelUnload"))
    }
}

//! `inference.GRPCInferenceService` over the v2 routes' own functions (`api/v2*.rs`): each method
//! turns its message into what the HTTP route would have read, calls the same function, and turns
//! the answer into its reply. Keys, limits and the budget of bytes in flight were applied by the
//! gate (`gate.rs`); the deadline is the tighter of the gRPC one and the `timeout` parameter.

use std::collections::HashMap;

use tonic::{Request, Response, Status};
use wasmrpc_proto::Code;
use wasmrpc_proto::grpc::grpc_inference_service_server::GrpcInferenceService;
use wasmrpc_proto::grpc::infer_parameter::ParameterChoice;
use wasmrpc_proto::grpc::model_repository_parameter::ParameterChoice as RepositoryParameter;
use wasmrpc_proto::grpc::{self as pb, infer};
use wasmrpc_proto::kserve_repository::{
    FILE_PREFIX, LoadFile, LoadRequest, RepositoryRequestError, export_of_config,
};

use super::deadline;
use super::gate::Gated;
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::api::v2::{self, parse_version};
use crate::api::v2_repository::{self, index_entries};
use crate::api::v2_stats::model_stats;
use crate::service::Placement;

/// The service: the API's state, as every route has it.
pub struct Inference {
    state: AppState,
}

impl Inference {
    /// The service over `state`.
    pub fn new(state: AppState) -> Self {
        Inference { state }
    }
}

/// What the gate admitted the request with.
fn gated<T>(request: &Request<T>) -> Result<Gated, Status> {
    request.extensions().get::<Gated>().cloned().ok_or_else(|| {
        // Every keyed method is behind the gate (`grpc/mod.rs`).
        Status::from(ApiError::internal(
            "a gRPC request reached the service ungated",
        ))
    })
}

type Answer<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl GrpcInferenceService for Inference {
    async fn server_live(
        &self,
        _: Request<pb::ServerLiveRequest>,
    ) -> Answer<pb::ServerLiveResponse> {
        Ok(Response::new(pb::ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        _: Request<pb::ServerReadyRequest>,
    ) -> Answer<pb::ServerReadyResponse> {
        // Not ready is an answer, as on Triton (over HTTP it is a 503, which clients read as
        // false): tritonclient's is_server_ready() returns it rather than raising.
        let ready = v2::check_ready(&self.state).is_ok();
        Ok(Response::new(pb::ServerReadyResponse { ready }))
    }

    async fn model_ready(
        &self,
        request: Request<pb::ModelReadyRequest>,
    ) -> Answer<pb::ModelReadyResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        let version = parse_version(Some(&m.version))?;
        // A model (or version) that does not exist is not ready, as on Triton: an answer, not an
        // error (over HTTP a 404, which clients read as false), and the same for another
        // tenant's model.
        let ready = match v2::check_model_ready(&self.state, &gated.caller, &m.name, version) {
            Ok(()) => true,
            Err(e) if e.code() == Code::NotFound => false,
            Err(e) => return Err(e.into()),
        };
        Ok(Response::new(pb::ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<pb::ServerMetadataRequest>,
    ) -> Answer<pb::ServerMetadataResponse> {
        Ok(Response::new(v2::server_metadata_value().into()))
    }

    async fn model_metadata(
        &self,
        request: Request<pb::ModelMetadataRequest>,
    ) -> Answer<pb::ModelMetadataResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        let version = parse_version(Some(&m.version))?;
        let metadata = v2::model_metadata_of(&self.state, &gated.caller, &m.name, version)?;
        Ok(Response::new(metadata.into()))
    }

    async fn model_infer(
        &self,
        request: Request<pb::ModelInferRequest>,
    ) -> Answer<pb::ModelInferResponse> {
        let gated = gated(&request)?;
        let response = infer(&self.state, &gated, request.into_inner()).await?;
        Ok(Response::new(response))
    }

    async fn model_config(
        &self,
        request: Request<pb::ModelConfigRequest>,
    ) -> Answer<pb::ModelConfigResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        let version = parse_version(Some(&m.version))?;
        let config = v2::model_config_of(&self.state, &gated.caller, &m.name, version)?;
        Ok(Response::new(pb::ModelConfigResponse {
            config: Some(config.into()),
        }))
    }

    async fn model_statistics(
        &self,
        request: Request<pb::ModelStatisticsRequest>,
    ) -> Answer<pb::ModelStatisticsResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        let version = parse_version(Some(&m.version))?;
        // As Triton: no name is every model (and then a version means nothing).
        let model = (!m.name.is_empty()).then_some((m.name.as_str(), version));
        let stats = model_stats(&self.state, &gated.caller, model)?;
        Ok(Response::new(pb::ModelStatisticsResponse {
            model_stats: stats.into_iter().map(Into::into).collect(),
        }))
    }

    async fn repository_index(
        &self,
        request: Request<pb::RepositoryIndexRequest>,
    ) -> Answer<pb::RepositoryIndexResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        check_repository(&m.repository_name)?;
        Ok(Response::new(pb::RepositoryIndexResponse {
            models: index_entries(&self.state, &gated.caller)
                .into_iter()
                .map(Into::into)
                .collect(),
        }))
    }

    async fn repository_model_load(
        &self,
        request: Request<pb::RepositoryModelLoadRequest>,
    ) -> Answer<pb::RepositoryModelLoadResponse> {
        let gated = gated(&request)?;
        // Held until the component is registered, as over HTTP.
        let _held = gated.take_held();
        let m = request.into_inner();
        check_repository(&m.repository_name)?;
        let load = load_request(m.parameters).map_err(ApiError::from)?;
        let limit = self.state.service.component_limit(&gated.caller.quota);
        v2_repository::load_model(
            &self.state,
            &gated.caller,
            &m.model_name,
            load,
            &limit,
            "send its component as a `file:` parameter (bytes_param), as tritonclient.grpc's \
             load_model(name, files={\"file:1/model.wasm\": component}) does",
        )
        .await?;
        Ok(Response::new(pb::RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<pb::RepositoryModelUnloadRequest>,
    ) -> Answer<pb::RepositoryModelUnloadResponse> {
        let gated = gated(&request)?;
        let m = request.into_inner();
        check_repository(&m.repository_name)?;
        v2_repository::unload_model(&self.state, &gated.caller, &m.model_name).await?;
        Ok(Response::new(pb::RepositoryModelUnloadResponse {}))
    }
}

/// `ModelInfer` of a request the gate admitted (tonic's, or the gate's own framing, `frames.rs`):
/// the v2 route's own call, under the tighter of the gRPC deadline and the `timeout` parameter.
///
/// # Errors
/// As the HTTP route's, and DEADLINE_EXCEEDED when the gRPC deadline passed before the call.
pub async fn infer(
    state: &AppState,
    gated: &Gated,
    mut message: pb::ModelInferRequest,
) -> Result<pb::ModelInferResponse, ApiError> {
    let deadline = deadline::remaining(gated.timeout, gated.arrived)?;
    let name = std::mem::take(&mut message.model_name);
    let version = parse_version(Some(&message.model_version))?;
    let placement = placement(&message.parameters)?;
    state.service.check_placement(&placement)?;
    let Some(mut held) = gated.take_held() else {
        return Err(ApiError::internal("a gRPC request's bytes were held twice"));
    };
    let decoded = infer::decode_request(message);
    let response = v2::run_infer(
        state,
        &gated.caller,
        name,
        version,
        decoded,
        deadline,
        &placement,
        &mut held,
    )
    .await?;
    Ok(infer::encode_response(response))
}

/// A repository name: empty, as there is only one (each tenant's own).
fn check_repository(name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::InvalidArgument,
            format!(
                "there is no repository `{name}`: each key has one repository of models, named \
                 by none (leave repository_name empty)"
            ),
        ))
    }
}

/// Where a call runs: the `worker` parameter (a string) as HTTP's `?worker=W|any`, else here.
fn placement(parameters: &HashMap<String, pb::InferParameter>) -> Result<Placement, ApiError> {
    match parameters.get("worker").map(|p| &p.parameter_choice) {
        None => Ok(Placement::Here),
        Some(Some(ParameterChoice::StringParam(worker))) => {
            Ok(Placement::from_worker(Some(worker.as_str())))
        }
        Some(_) => Err(ApiError::new(
            Code::InvalidArgument,
            "parameters.worker must be a string_param: a worker's name, or `any`",
        )),
    }
}

/// A load request's parameters as HTTP's load body decodes to: the component from the one
/// `file:` parameter (bytes), the method to register from `config` (a Triton model
/// configuration as JSON, as over HTTP) or `export` (a string).
fn load_request(
    parameters: HashMap<String, pb::ModelRepositoryParameter>,
) -> Result<LoadRequest, RepositoryRequestError> {
    let mut files: Vec<(String, Option<RepositoryParameter>)> = Vec::new();
    let mut export = None;
    for (name, value) in parameters {
        let value = value.parameter_choice;
        if name.starts_with(FILE_PREFIX) {
            files.push((name, value));
            continue;
        }
        let chosen = match (name.as_str(), value) {
            ("config", Some(RepositoryParameter::StringParam(config))) => {
                export_of_config(&config)?
            }
            ("export", Some(RepositoryParameter::StringParam(e))) => Some(e),
            ("config" | "export", _) => {
                return Err(RepositoryRequestError::Parameter {
                    name,
                    why: "must be a string_param".into(),
                });
            }
            _ => None,
        };
        if chosen.is_some() {
            export = chosen;
        }
    }
    if files.len() > 1 {
        let mut names: Vec<String> = files.into_iter().map(|(n, _)| n).collect();
        names.sort();
        return Err(RepositoryRequestError::SeveralFiles(names));
    }
    let file = match files.pop() {
        None => None,
        Some((name, Some(RepositoryParameter::BytesParam(bytes)))) => Some(LoadFile {
            parameter: name,
            bytes: bytes.to_vec(),
        }),
        Some((name, _)) => {
            return Err(RepositoryRequestError::Parameter {
                name,
                why: "must be a bytes_param: the component's bytes".into(),
            });
        }
    };
    Ok(LoadRequest { file, export })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(choice: RepositoryParameter) -> pb::ModelRepositoryParameter {
        pb::ModelRepositoryParameter {
            parameter_choice: Some(choice),
        }
    }

    #[test]
    fn a_load_takes_its_component_from_one_file_parameter_and_its_export_from_the_config() {
        let parameters = HashMap::from([
            (
                "file:1/model.wasm".to_owned(),
                param(RepositoryParameter::BytesParam(bytes::Bytes::from_static(
                    b"\0asm",
                ))),
            ),
            (
                "config".to_owned(),
                param(RepositoryParameter::StringParam(
                    r#"{"parameters": {"export": {"string_value": "add"}}}"#.into(),
                )),
            ),
        ]);
        let load = load_request(parameters).unwrap();
        assert_eq!(load.file.unwrap().bytes, b"\0asm");
        assert_eq!(load.export.as_deref(), Some("add"));
        let two = HashMap::from([
            (
                "file:a".to_owned(),
                param(RepositoryParameter::BytesParam(bytes::Bytes::new())),
            ),
            (
                "file:b".to_owned(),
                param(RepositoryParameter::BytesParam(bytes::Bytes::new())),
            ),
        ]);
        assert!(matches!(
            load_request(two),
            Err(RepositoryRequestError::SeveralFiles(_))
        ));
        let text = HashMap::from([(
            "file:a".to_owned(),
            param(RepositoryParameter::StringParam("AGFzbQ==".into())),
        )]);
        let e = load_request(text).unwrap_err().to_string();
        assert!(e.contains("bytes_param"), "{e}");
        assert_eq!(
            load_request(HashMap::new()).unwrap(),
            LoadRequest::default()
        );
    }
}

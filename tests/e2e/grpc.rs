//! KServe v2 over gRPC against the real server: tonic's generated client for
//! `inference.GRPCInferenceService` on the main port (cleartext h2c and TLS) and on
//! `--grpc-listen`; health, metadata and config, infer with raw and typed contents of every
//! datatype, a 16 MiB tensor, the repository, statistics, errors with their gRPC codes, the
//! deadline, keys and tenants, health checking and reflection.

use std::time::{Duration, Instant};

use bytes::Bytes;
use half::{bf16, f16};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic::{Code, Request};
use wasmrpc_proto::grpc::grpc_inference_service_client::GrpcInferenceServiceClient;
use wasmrpc_proto::grpc::infer_parameter::ParameterChoice;
use wasmrpc_proto::grpc::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use wasmrpc_proto::grpc::model_repository_parameter::ParameterChoice as RepositoryParameter;
use wasmrpc_proto::grpc::{self as pb, infer};
use wasmrpc_proto::{DType, Element, Tensor};

use crate::kserve::server_with;
use crate::support::{TestServer, guest};

/// A server with keys (`--admin-key-file`), and its admin key.
struct Keyed {
    server: TestServer,
    admin_key: String,
    _dir: tempfile::TempDir,
}

impl Keyed {
    fn start() -> Keyed {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin.key");
        let server = TestServer::start(&["--admin-key-file", file.to_str().unwrap()]);
        let admin_key = std::fs::read_to_string(&file).unwrap().trim().to_owned();
        Keyed {
            server,
            admin_key,
            _dir: dir,
        }
    }

    /// A new tenant's key.
    fn tenant(&self, name: &str) -> String {
        let r = self
            .server
            .http()
            .with_key(&self.admin_key)
            .post_json("/v1/tenants", &serde_json::json!({ "name": name }));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        r.json()["key"].as_str().unwrap().to_owned()
    }
}

type Client = GrpcInferenceServiceClient<Channel>;

/// Room for the largest answers the tests ask for (tonic's client reads 4 MiB by default).
const CLIENT_MESSAGE_LIMIT: usize = 64 << 20;

async fn connect(url: &str) -> Client {
    let channel = Channel::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    GrpcInferenceServiceClient::new(channel).max_decoding_message_size(CLIENT_MESSAGE_LIMIT)
}

/// `message` with `authorization: Bearer KEY` metadata.
fn keyed<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    request
}

/// An infer request of `model` with every input raw.
fn raw_request(model: &str, inputs: &[(&str, &Tensor)]) -> pb::ModelInferRequest {
    pb::ModelInferRequest {
        model_name: model.into(),
        inputs: inputs
            .iter()
            .map(|(name, t)| InferInputTensor {
                name: (*name).into(),
                datatype: t.dtype().kserve_name().into(),
                shape: t.shape().iter().map(|&d| d as i64).collect(),
                ..Default::default()
            })
            .collect(),
        raw_input_contents: inputs.iter().map(|(_, t)| t.raw_bytes().clone()).collect(),
        ..Default::default()
    }
}

/// A typed input (`contents`), no raw bytes.
fn typed_input(
    name: &str,
    datatype: &str,
    shape: &[i64],
    c: pb::InferTensorContents,
) -> InferInputTensor {
    InferInputTensor {
        name: name.into(),
        datatype: datatype.into(),
        shape: shape.to_vec(),
        contents: Some(c),
        ..Default::default()
    }
}

/// The outputs of an answer, checked to be all raw, as tensors.
fn outputs(response: pb::ModelInferResponse) -> Vec<(String, Tensor)> {
    assert_eq!(
        response.raw_output_contents.len(),
        response.outputs.len(),
        "every output raw"
    );
    assert!(response.outputs.iter().all(|o| o.contents.is_none()));
    infer::decode_response(response)
        .unwrap()
        .into_iter()
        .map(|o| (o.name, o.tensor))
        .collect()
}

fn int32(values: &[i32]) -> Tensor {
    Tensor::vector(values.to_vec())
}

fn timeout_parameter(micros: i64) -> (String, pb::InferParameter) {
    (
        "timeout".into(),
        pb::InferParameter {
            parameter_choice: Some(ParameterChoice::Int64Param(micros)),
        },
    )
}

#[tokio::test]
async fn health_metadata_and_config_speak_the_protocol_on_the_main_port() {
    let (server, _http) = server_with(&[
        ("add", "example-add", "add"),
        ("upper", "example-strings", "upper"),
    ]);
    let mut client = connect(&server.url).await;
    let live = client.server_live(pb::ServerLiveRequest {}).await.unwrap();
    assert!(live.into_inner().live);
    let ready = client
        .server_ready(pb::ServerReadyRequest {})
        .await
        .unwrap();
    assert!(ready.into_inner().ready);
    let meta = client
        .server_metadata(pb::ServerMetadataRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(meta.name, "wasmrpc");
    assert!(meta.extensions.contains(&"model_repository".to_owned()));

    let model = client
        .model_metadata(pb::ModelMetadataRequest {
            name: "add".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(model.name, "add");
    assert_eq!(model.versions, ["1"]);
    assert_eq!(model.platform, "wasmrpc_wasm");
    let inputs: Vec<(&str, &str, &[i64])> = model
        .inputs
        .iter()
        .map(|t| (t.name.as_str(), t.datatype.as_str(), t.shape.as_slice()))
        .collect();
    assert_eq!(
        inputs,
        [("a", "INT32", &[-1][..]), ("b", "INT32", &[-1][..])]
    );
    assert_eq!(model.outputs[0].name, "output");

    for version in ["", "1"] {
        let ready = client
            .model_ready(pb::ModelReadyRequest {
                name: "add".into(),
                version: version.into(),
            })
            .await
            .unwrap();
        assert!(ready.into_inner().ready, "version {version:?}");
    }
    // A version or a model that does not exist is not ready: an answer, as on Triton.
    for (name, version) in [("add", "2"), ("nope", "")] {
        let ready = client
            .model_ready(pb::ModelReadyRequest {
                name: name.into(),
                version: version.into(),
            })
            .await
            .unwrap();
        assert!(!ready.into_inner().ready, "{name} {version:?}");
    }
    let e = client
        .model_metadata(pb::ModelMetadataRequest {
            name: "add".into(),
            version: "2".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert_eq!(e.message(), "method `add` has no version 2");
    let e = client
        .model_metadata(pb::ModelMetadataRequest {
            name: "add".into(),
            version: "one".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");

    let config = client
        .model_config(pb::ModelConfigRequest {
            name: "upper".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .config
        .unwrap();
    assert_eq!(config.max_batch_size, 0);
    assert_eq!(config.input[0].data_type, pb::DataType::TypeString as i32);
    assert_eq!(config.input[0].dims, [-1]);
}

#[tokio::test]
async fn infer_takes_raw_inputs_by_name_and_answers_raw_outputs() {
    let (server, _http) = server_with(&[("add", "example-add", "add")]);
    let mut client = connect(&server.url).await;
    // Inputs in another order than the signature's.
    let (a, b) = (
        Tensor::from_vec([2, 1], vec![10i32, 20]).unwrap(),
        Tensor::from_vec([2, 1], vec![1i32, 2]).unwrap(),
    );
    let mut request = raw_request("add", &[("b", &b), ("a", &a)]);
    request.id = "req-7".into();
    let response = client.model_infer(request).await.unwrap().into_inner();
    assert_eq!(response.model_name, "add");
    assert_eq!(response.model_version, "1");
    assert_eq!(response.id, "req-7");
    let out = outputs(response);
    assert_eq!(out[0].0, "output");
    assert_eq!(out[0].1, Tensor::from_vec([2, 1], vec![11i32, 22]).unwrap());

    // The output asked for by name, the version pinned.
    let mut request = raw_request("add", &[("a", &int32(&[1])), ("b", &int32(&[2]))]);
    request.model_version = "1".into();
    request.outputs = vec![InferRequestedOutputTensor {
        name: "output".into(),
        ..Default::default()
    }];
    let out = outputs(client.model_infer(request).await.unwrap().into_inner());
    assert_eq!(out[0].1, int32(&[3]));

    // A compressed request (tonic's own framing serves it) answers the same.
    let mut gzip = client
        .clone()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let big = Tensor::vector(vec![7i32; 100_000]);
    let answer = gzip
        .model_infer(raw_request("add", &[("a", &big), ("b", &big)]))
        .await
        .unwrap();
    assert_eq!(
        outputs(answer.into_inner())[0].1,
        Tensor::vector(vec![14i32; 100_000])
    );

    // An output the model does not have.
    let mut request = raw_request("add", &[("a", &int32(&[1])), ("b", &int32(&[2]))]);
    request.outputs = vec![InferRequestedOutputTensor {
        name: "sum".into(),
        ..Default::default()
    }];
    let e = client.model_infer(request).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "unknown output `sum`; the model returns `output`"
    );
}

/// `add_<dtype>` of `a` and `b`, sent raw and sent typed: the sum's bytes, exactly, raw.
async fn check_add<T: Element + std::fmt::Debug>(
    client: &mut Client,
    a: Vec<T>,
    b: Vec<T>,
    sum: Vec<T>,
    typed: impl Fn(&[T]) -> pb::InferTensorContents,
) {
    let method = format!("add_{}", T::DTYPE);
    let expected = Tensor::vector(sum);
    let (ta, tb) = (Tensor::vector(a.clone()), Tensor::vector(b.clone()));
    let raw = client
        .model_infer(raw_request(&method, &[("a", &ta), ("b", &tb)]))
        .await
        .unwrap_or_else(|e| panic!("{method} raw: {e:?}"));
    assert_eq!(outputs(raw.into_inner())[0].1, expected, "{method} raw");
    let n = a.len() as i64;
    let datatype = T::DTYPE.kserve_name();
    let request = pb::ModelInferRequest {
        model_name: method.clone(),
        inputs: vec![
            typed_input("a", datatype, &[n], typed(&a)),
            typed_input("b", datatype, &[n], typed(&b)),
        ],
        ..Default::default()
    };
    let answer = client
        .model_infer(request)
        .await
        .unwrap_or_else(|e| panic!("{method} typed: {e:?}"));
    assert_eq!(
        outputs(answer.into_inner())[0].1,
        expected,
        "{method} typed"
    );
}

#[tokio::test]
async fn every_datatype_goes_in_raw_or_typed_and_comes_back_raw() {
    let methods: Vec<String> = DType::ALL
        .iter()
        .filter(|d| d.size().is_some())
        .map(|d| format!("add_{d}"))
        .collect();
    let mut registered: Vec<(&str, &str, &str)> = methods
        .iter()
        .map(|m| (m.as_str(), "example-add", m.as_str()))
        .collect();
    registered.push(("upper", "example-strings", "upper"));
    let (server, _http) = server_with(&registered);
    let mut client = connect(&server.url).await;
    let c = pb::InferTensorContents::default;
    check_add(
        &mut client,
        vec![true, false, true, false],
        vec![true, true, false, false],
        vec![true, true, true, false],
        |v| pb::InferTensorContents {
            bool_contents: v.to_vec(),
            ..c()
        },
    )
    .await;
    let ints = |v: Vec<i32>| pb::InferTensorContents {
        int_contents: v,
        ..c()
    };
    let uints = |v: Vec<u32>| pb::InferTensorContents {
        uint_contents: v,
        ..c()
    };
    check_add(&mut client, vec![1i8, -2], vec![3, 4], vec![4, 2], |v| {
        ints(v.iter().map(|&x| i32::from(x)).collect())
    })
    .await;
    check_add(
        &mut client,
        vec![1i16, -300],
        vec![3, 4],
        vec![4, -296],
        |v| ints(v.iter().map(|&x| i32::from(x)).collect()),
    )
    .await;
    check_add(
        &mut client,
        vec![1i32, 70_000],
        vec![3, 4],
        vec![4, 70_004],
        |v| ints(v.to_vec()),
    )
    .await;
    check_add(
        &mut client,
        vec![1i64, 1 << 40],
        vec![3, 4],
        vec![4, (1 << 40) + 4],
        |v| pb::InferTensorContents {
            int64_contents: v.to_vec(),
            ..c()
        },
    )
    .await;
    check_add(&mut client, vec![1u8, 250], vec![3, 4], vec![4, 254], |v| {
        uints(v.iter().map(|&x| u32::from(x)).collect())
    })
    .await;
    check_add(
        &mut client,
        vec![1u16, 60_000],
        vec![3, 4],
        vec![4, 60_004],
        |v| uints(v.iter().map(|&x| u32::from(x)).collect()),
    )
    .await;
    check_add(
        &mut client,
        vec![1u32, 4_000_000_000],
        vec![3, 4],
        vec![4, 4_000_000_004],
        |v| uints(v.to_vec()),
    )
    .await;
    check_add(
        &mut client,
        vec![1u64, u64::MAX - 4],
        vec![3, 4],
        vec![4, u64::MAX],
        |v| pb::InferTensorContents {
            uint64_contents: v.to_vec(),
            ..c()
        },
    )
    .await;
    let fp32 = |v: Vec<f32>| pb::InferTensorContents {
        fp32_contents: v,
        ..c()
    };
    check_add(
        &mut client,
        vec![f16::from_f32(1.5), f16::from_f32(-2.0)],
        vec![f16::from_f32(0.25), f16::from_f32(4.0)],
        vec![f16::from_f32(1.75), f16::from_f32(2.0)],
        |v| fp32(v.iter().map(|x| x.to_f32()).collect()),
    )
    .await;
    check_add(
        &mut client,
        vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)],
        vec![bf16::from_f32(0.5), bf16::from_f32(4.0)],
        vec![bf16::from_f32(2.0), bf16::from_f32(2.0)],
        |v| fp32(v.iter().map(|x| x.to_f32()).collect()),
    )
    .await;
    check_add(
        &mut client,
        vec![1.5f32, -2.0],
        vec![0.25, 4.0],
        vec![1.75, 2.0],
        |v| fp32(v.to_vec()),
    )
    .await;
    check_add(
        &mut client,
        vec![1.5f64, -2.0],
        vec![0.25, 4.0],
        vec![1.75, 2.0],
        |v| pb::InferTensorContents {
            fp64_contents: v.to_vec(),
            ..c()
        },
    )
    .await;

    // BYTES: raw elements length-prefixed, typed in bytes_contents.
    let words = Tensor::from_strings([2], ["héllo", ""]).unwrap();
    let upper = Tensor::from_strings([2], ["HÉLLO", ""]).unwrap();
    let raw = client
        .model_infer(raw_request("upper", &[("s", &words)]))
        .await
        .unwrap();
    assert_eq!(outputs(raw.into_inner())[0].1, upper);
    let request = pb::ModelInferRequest {
        model_name: "upper".into(),
        inputs: vec![typed_input(
            "s",
            "BYTES",
            &[2],
            pb::InferTensorContents {
                bytes_contents: vec![Bytes::from("héllo"), Bytes::new()],
                ..c()
            },
        )],
        ..Default::default()
    };
    let typed = client.model_infer(request).await.unwrap();
    assert_eq!(outputs(typed.into_inner())[0].1, upper);
}

#[tokio::test]
async fn inputs_that_do_not_fit_are_invalid_argument_with_the_reason() {
    let (server, _http) = server_with(&[("add", "example-add", "add")]);
    let mut client = connect(&server.url).await;
    let cases: Vec<(pb::ModelInferRequest, &str)> = vec![
        (
            raw_request("add", &[("a", &int32(&[1]))]),
            "missing input `b`; the model takes `a`, `b`",
        ),
        (
            raw_request("add", &[("a", &int32(&[1])), ("c", &int32(&[2]))]),
            "unknown input `c`; the model takes `a`, `b`",
        ),
        (
            raw_request(
                "add",
                &[("a", &int32(&[1])), ("b", &Tensor::vector(vec![2i64]))],
            ),
            "b",
        ),
        (
            pb::ModelInferRequest {
                model_name: "add".into(),
                inputs: vec![
                    typed_input(
                        "a",
                        "INT32",
                        &[2],
                        pb::InferTensorContents {
                            int_contents: vec![1],
                            ..Default::default()
                        },
                    ),
                    typed_input(
                        "b",
                        "INT32",
                        &[1],
                        pb::InferTensorContents {
                            fp32_contents: vec![1.0],
                            ..Default::default()
                        },
                    ),
                ],
                ..Default::default()
            },
            "input `a`: shape [2] needs 2 elements, got 1",
        ),
        (
            {
                let mut r = raw_request("add", &[("a", &int32(&[1])), ("b", &int32(&[2]))]);
                r.raw_input_contents[1] = Bytes::from_static(&[1, 2, 3]);
                r
            },
            "input `b`: int32 tensor of shape [1] needs 4 bytes of data, got 3",
        ),
    ];
    for (request, message) in cases {
        let e = client.model_infer(request).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(message), "`{message}` in {e:?}");
    }
    // A message that is not protobuf is the client's fault too.
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<Bytes>>();
    let garbage = http::Request::post(format!(
        "{}/inference.GRPCInferenceService/ModelInfer",
        server.url
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(http_body_util::Full::new(Bytes::from_static(&[
        0, 0, 0, 0, 3, 0xff, 0xff, 0xff,
    ])))
    .unwrap();
    let answer = http.request(garbage).await.unwrap();
    assert_eq!(answer.status(), 200);
    let status = answer
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(status.as_deref(), Some("3"), "{:?}", answer.headers());
    // A missing model is NOT_FOUND, whatever the inputs.
    let e = client
        .model_infer(raw_request("nope", &[("a", &int32(&[1]))]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.message(), "no method named `nope` is registered");
    // The server still serves.
    let ok = client
        .model_infer(raw_request(
            "add",
            &[("a", &int32(&[1])), ("b", &int32(&[2]))],
        ))
        .await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn a_16_mib_float32_tensor_goes_through_and_one_past_the_limit_is_resource_exhausted() {
    let server = TestServer::start(&["--max-request-bytes", "20000000"]);
    let r = server
        .http()
        .put("/v1/methods/echo?export=echo", &guest("guest-hostile"));
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    let mut client = connect(&server.url).await;
    let n = 4 << 20;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let x = Tensor::vector(values);
    assert_eq!(x.raw_data().len(), 16 << 20);
    let started = Instant::now();
    let answer = client
        .model_infer(raw_request("echo", &[("x", &x)]))
        .await
        .unwrap();
    let out = outputs(answer.into_inner());
    assert_eq!(out[0].1, x);
    eprintln!("16 MiB float32 echo over gRPC: {:?}", started.elapsed());

    let big = Tensor::vector(vec![0f32; 5 << 20]);
    let e = client
        .model_infer(raw_request("echo", &[("x", &big)]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(
        e.message()
            .contains("over the server's limit of 20000000 bytes (--max-request-bytes)"),
        "{e:?}"
    );
    // The connection and the server are fine after it.
    let mut client = connect(&server.url).await;
    let small = Tensor::vector(vec![1f32]);
    assert!(
        client
            .model_infer(raw_request("echo", &[("x", &small)]))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn the_repository_loads_lists_calls_and_unloads_and_statistics_count_calls() {
    let server = TestServer::start(&[]);
    let mut client = connect(&server.url).await;
    let file = |bytes: Vec<u8>| pb::ModelRepositoryParameter {
        parameter_choice: Some(RepositoryParameter::BytesParam(Bytes::from(bytes))),
    };
    let string = |s: &str| pb::ModelRepositoryParameter {
        parameter_choice: Some(RepositoryParameter::StringParam(s.into())),
    };
    // A load without a component, of a model that does not exist.
    let e = client
        .repository_model_load(pb::RepositoryModelLoadRequest {
            model_name: "adder".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains("`file:` parameter (bytes_param)"),
        "{e:?}"
    );
    // A multi-method component needs its export chosen, in the config as over HTTP.
    let e = client
        .repository_model_load(pb::RepositoryModelLoadRequest {
            model_name: "adder".into(),
            parameters: [("file:1/model.wasm".to_owned(), file(guest("example-add")))].into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("exports several methods"), "{e:?}");
    client
        .repository_model_load(pb::RepositoryModelLoadRequest {
            model_name: "adder".into(),
            parameters: [
                ("file:1/model.wasm".to_owned(), file(guest("example-add"))),
                (
                    "config".to_owned(),
                    string(r#"{"parameters": {"export": {"string_value": "add"}}}"#),
                ),
            ]
            .into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let index = client
        .repository_index(pb::RepositoryIndexRequest::default())
        .await
        .unwrap()
        .into_inner();
    let models: Vec<(&str, &str, &str)> = index
        .models
        .iter()
        .map(|m| (m.name.as_str(), m.version.as_str(), m.state.as_str()))
        .collect();
    assert_eq!(models, [("adder", "1", "READY")]);

    for _ in 0..3 {
        client
            .model_infer(raw_request(
                "adder",
                &[("a", &int32(&[1])), ("b", &int32(&[2]))],
            ))
            .await
            .unwrap();
    }
    let _ = client
        .model_infer(raw_request(
            "adder",
            &[("a", &int32(&[1])), ("b", &int32(&[2, 3]))],
        ))
        .await
        .unwrap_err();
    let stats = client
        .model_statistics(pb::ModelStatisticsRequest {
            name: "adder".into(),
            version: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .model_stats;
    assert_eq!(stats.len(), 1);
    assert_eq!(
        (stats[0].name.as_str(), stats[0].version.as_str()),
        ("adder", "1")
    );
    assert_eq!(stats[0].inference_count, 3);
    let inference = stats[0].inference_stats.unwrap();
    assert_eq!(inference.success.unwrap().count, 3);
    assert_eq!(inference.fail.unwrap().count, 1);
    assert!(stats[0].last_inference > 0);
    // Every model when no name is given; the same numbers over HTTP.
    let all = client
        .model_statistics(pb::ModelStatisticsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .model_stats;
    assert_eq!(all, stats);
    let http = server.http().get("/v2/models/adder/stats").json();
    assert_eq!(http["model_stats"][0]["inference_count"], 3);

    client
        .repository_model_unload(pb::RepositoryModelUnloadRequest {
            model_name: "adder".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let e = client
        .model_infer(raw_request(
            "adder",
            &[("a", &int32(&[1])), ("b", &int32(&[2]))],
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = client
        .repository_model_unload(pb::RepositoryModelUnloadRequest {
            model_name: "adder".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
}

/// A gRPC client with no deadline of its own: tonic's channel ends a call at its `grpc-timeout`
/// itself (as CANCELLED), so the server's own enforcement is seen through a plain HTTP/2 client.
fn plain_client(
    url: &str,
) -> GrpcInferenceServiceClient<
    hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        tonic::body::Body,
    >,
> {
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http();
    GrpcInferenceServiceClient::with_origin(http, url.parse().unwrap())
}

#[tokio::test]
async fn an_infinite_loop_under_a_half_second_deadline_ends_deadline_exceeded_and_frees_its_slot() {
    let server = TestServer::start(&["--max-concurrent-calls", "1"]);
    let http = server.http();
    for (name, export) in [("spin", "spin"), ("echo", "echo")] {
        let r = http.put(
            &format!("/v1/methods/{name}?export={export}"),
            &guest("guest-hostile"),
        );
        assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    }
    let x = Tensor::scalar(1f32);
    let mut plain = plain_client(&server.url);
    let mut client = connect(&server.url).await;
    let echo_is_prompt = |client: &mut Client| {
        let mut client = client.clone();
        let x = x.clone();
        async move {
            let started = Instant::now();
            client
                .model_infer(raw_request("echo", &[("x", &x)]))
                .await
                .unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the slot was free"
            );
        }
    };

    // The gRPC deadline alone (grpc-timeout), enforced by the server.
    let mut request = Request::new(raw_request("spin", &[("x", &x)]));
    request.set_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let e = plain.model_infer(request).await.unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(2),
        "{took:?}"
    );
    echo_is_prompt(&mut client).await;

    // Triton's `timeout` parameter alone (microseconds).
    let mut request = raw_request("spin", &[("x", &x)]);
    request.parameters.extend([timeout_parameter(500_000)]);
    let started = Instant::now();
    let e = client.model_infer(request).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    echo_is_prompt(&mut client).await;

    // Both: the tighter wins.
    let mut request = raw_request("spin", &[("x", &x)]);
    request.parameters.extend([timeout_parameter(60_000_000)]);
    let mut request = Request::new(request);
    request.set_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let e = plain.model_infer(request).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    echo_is_prompt(&mut client).await;

    // A client that cancels (drops its call) with no deadline at all: the server's default
    // deadline is 10 s, so a prompt call after it shows the cancellation freed the slot.
    let call = client.model_infer(raw_request("spin", &[("x", &x)]));
    let cancelled = tokio::time::timeout(Duration::from_millis(300), call).await;
    assert!(
        cancelled.is_err(),
        "spin cannot have answered: {cancelled:?}"
    );
    echo_is_prompt(&mut client).await;

    // tonic's own client gives up at its deadline (and says CANCELLED); the server stops the
    // guest as the stream is reset, and the slot is free at once.
    let mut request = Request::new(raw_request("spin", &[("x", &x)]));
    request.set_timeout(Duration::from_millis(500));
    let e = client.model_infer(request).await.unwrap_err();
    assert!(
        matches!(e.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{e:?}"
    );
    echo_is_prompt(&mut client).await;
}

#[tokio::test]
async fn keys_are_needed_as_over_http_and_another_tenants_model_is_a_missing_one() {
    let keyed = Keyed::start();
    let alice_key = keyed.tenant("alice");
    let bob_key = keyed.tenant("bob");
    let alice = keyed.server.http().with_key(&alice_key);
    let r = alice.put("/v1/methods/add?export=add", &guest("example-add"));
    assert!(r.status < 300, "{}", String::from_utf8_lossy(&r.body));
    let mut client = connect(&keyed.server.url).await;
    let add = || raw_request("add", &[("a", &int32(&[1])), ("b", &int32(&[2]))]);

    // Health is open; everything else needs a key.
    assert!(client.server_live(pb::ServerLiveRequest {}).await.is_ok());
    assert!(client.server_ready(pb::ServerReadyRequest {}).await.is_ok());
    let e = client.model_infer(add()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = client
        .server_metadata(pb::ServerMetadataRequest {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let e = client
        .model_infer(keyed_request(add(), "wrpc_not_a_key"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let mut malformed = Request::new(add());
    malformed
        .metadata_mut()
        .insert("authorization", "Basic abc".parse().unwrap());
    let e = client.model_infer(malformed).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    // The same words as over HTTP.
    let http = keyed
        .server
        .http()
        .post_json("/v2/models/add/infer", &serde_json::json!({"inputs": []}));
    assert_eq!(http.status, 401);
    let e = client.model_infer(add()).await.unwrap_err();
    assert_eq!(e.message(), http.json()["error"].as_str().unwrap());

    // Alice calls her model.
    let out = client
        .model_infer(keyed_request(add(), &alice_key))
        .await
        .unwrap();
    assert_eq!(outputs(out.into_inner())[0].1, int32(&[3]));

    // To Bob, Alice's model is byte for byte a model that does not exist.
    let as_bob_add = client
        .model_infer(keyed_request(add(), &bob_key))
        .await
        .unwrap_err();
    let mut missing = add();
    missing.model_name = "nope".into();
    let as_bob_missing = client
        .model_infer(keyed_request(missing, &bob_key))
        .await
        .unwrap_err();
    assert_eq!(as_bob_add.code(), Code::NotFound);
    assert_eq!(
        as_bob_add.message().replace("`add`", "`NAME`"),
        as_bob_missing.message().replace("`nope`", "`NAME`")
    );
    for name in ["add", "nope"] {
        let metadata = client
            .model_metadata(keyed_request(
                pb::ModelMetadataRequest {
                    name: name.into(),
                    version: String::new(),
                },
                &bob_key,
            ))
            .await
            .unwrap_err();
        assert_eq!(metadata.code(), Code::NotFound);
        assert_eq!(
            metadata.message(),
            format!("no method named `{name}` is registered")
        );
        let ready = client
            .model_ready(keyed_request(
                pb::ModelReadyRequest {
                    name: name.into(),
                    version: String::new(),
                },
                &bob_key,
            ))
            .await
            .unwrap();
        assert!(!ready.into_inner().ready, "{name}");
    }
    let index = client
        .repository_index(keyed_request(
            pb::RepositoryIndexRequest::default(),
            &bob_key,
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(index.models.is_empty(), "{index:?}");
    // The admin key manages tenants; it does not call.
    let e = client
        .model_infer(keyed_request(add(), &keyed.admin_key))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
}

fn keyed_request<T>(message: T, key: &str) -> Request<T> {
    keyed(message, key)
}

#[tokio::test]
async fn health_checking_says_serving_and_reflection_lists_the_service() {
    use tokio_stream::StreamExt as _;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let keyed = Keyed::start();
    let channel = Channel::from_shared(keyed.server.url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "inference.GRPCInferenceService"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
    // Reflection needs no key and no .proto file: what `grpcurl -plaintext HOST:PORT list` does.
    let channel_for_alpha = channel.clone();
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a list of services: {answer:?}");
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    for expected in [
        "inference.GRPCInferenceService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    // Older tools ask v1alpha.
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as Alpha;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;
    let mut alpha = Alpha::new(channel_for_alpha);
    let request = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(AlphaRequest::ListServices(String::new())),
    };
    let answer = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner()
        .next()
        .await
        .unwrap()
        .unwrap();
    let Some(AlphaResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a list of services: {answer:?}");
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "inference.GRPCInferenceService"),
        "{list:?}"
    );
}

#[tokio::test]
async fn grpc_listen_serves_the_service_on_a_port_of_its_own() {
    let server = TestServer::start(&["--grpc-listen", "127.0.0.1:0"]);
    let grpc_url = server.grpc_url.clone().expect("a gRPC address printed");
    assert_ne!(grpc_url, server.url);
    let r = server
        .http()
        .put("/v1/methods/add?export=add", &guest("example-add"));
    assert!(r.status < 300);
    let mut client = connect(&grpc_url).await;
    let out = client
        .model_infer(raw_request(
            "add",
            &[("a", &int32(&[1])), ("b", &int32(&[2]))],
        ))
        .await
        .unwrap();
    assert_eq!(outputs(out.into_inner())[0].1, int32(&[3]));
    // Only gRPC there.
    let http = crate::support::Http::new(&grpc_url);
    assert_eq!(http.get("/v1/methods").status, 404);
}

#[tokio::test]
async fn the_tls_main_port_serves_grpc_too() {
    let pki = crate::tls::Pki::new();
    let chain = pki.path("chain.pem");
    let key = pki.path("key.pem");
    let server = TestServer::start(&[
        "--tls-cert",
        chain.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let ca = Certificate::from_pem(std::fs::read(pki.path("ca.pem")).unwrap());
    let channel = Channel::from_shared(server.url.clone())
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(ca)
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = GrpcInferenceServiceClient::new(channel);
    let meta = client
        .server_metadata(pb::ServerMetadataRequest {})
        .await
        .unwrap();
    assert_eq!(meta.into_inner().name, "wasmrpc");
}

/// A body that sends one frame, then never ends: a client that promised a large message.
struct Endless {
    sent: bool,
}

impl http_body::Body for Endless {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.sent {
            return std::task::Poll::Pending;
        }
        self.sent = true;
        // A frame header announcing a 100 MB message, and none of it.
        let mut header = vec![0u8];
        header.extend_from_slice(&100_000_000u32.to_be_bytes());
        std::task::Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(header)))))
    }
}

#[tokio::test]
async fn a_refused_key_is_answered_before_the_message_is_read() {
    let keyed = Keyed::start();
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<Endless>();
    for key in [None, Some("Bearer wrpc_not_a_key")] {
        let mut request = http::Request::post(format!(
            "{}/inference.GRPCInferenceService/ModelInfer",
            keyed.server.url
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
        if let Some(key) = key {
            request = request.header("authorization", key);
        }
        let request = request.body(Endless { sent: false }).unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), http.request(request))
            .await
            .expect("answered at once, with the message still unsent")
            .unwrap();
        assert_eq!(
            answer.headers().get("grpc-status").map(|v| v.as_bytes()),
            Some(&b"16"[..]),
            "{key:?}: {:?}",
            answer.headers()
        );
    }
}

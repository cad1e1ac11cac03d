//! The KServe v2 binary tensor data extension against the real server: a JSON header whose
//! length is in `Inference-Header-Content-Length`, then raw tensor bytes, on the way in and out;
//! every datatype, JSON and binary mixed, `BYTES` length-prefixed, and framing errors.

use half::{bf16, f16};
use serde_json::{Value, json};
use wasmrpc_proto::{DType, Element, Tensor};

use crate::kserve::server_with;
use crate::support::{Http, http::Response};

const HEADER: &str = "Inference-Header-Content-Length";

/// POST a JSON header and binary data after it, with the header's length.
fn post_binary(http: &Http, path: &str, header: &Value, data: &[&[u8]]) -> Response {
    let header = serde_json::to_vec(header).unwrap();
    let mut body = header.clone();
    for d in data {
        body.extend_from_slice(d);
    }
    http.with_header(HEADER, &header.len().to_string())
        .request("POST", path, Some(&body))
}

/// A response's JSON header and the binary data after it.
fn split(r: &Response) -> (Value, Vec<u8>) {
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let n: usize = r
        .header("inference-header-content-length")
        .expect("a binary response names its header's length")
        .parse()
        .unwrap();
    (
        serde_json::from_slice(&r.body[..n]).unwrap(),
        r.body[n..].to_vec(),
    )
}

fn binary_input(name: &str, t: &Tensor) -> Value {
    json!({
        "name": name, "datatype": t.dtype().kserve_name(), "shape": t.shape(),
        "parameters": {"binary_data_size": t.raw_data().len()}
    })
}

/// `add_<dtype>` of `a` and `b` in binary both ways: the sum's bytes, exactly.
fn check_add<T: Element + std::fmt::Debug>(http: &Http, a: Vec<T>, b: Vec<T>, sum: Vec<T>) {
    let method = format!("add_{}", T::DTYPE);
    let (a, b, sum) = (Tensor::vector(a), Tensor::vector(b), Tensor::vector(sum));
    let r = post_binary(
        http,
        &format!("/v2/models/{method}/infer"),
        &json!({
            "inputs": [binary_input("a", &a), binary_input("b", &b)],
            "outputs": [{"name": "output", "parameters": {"binary_data": true}}]
        }),
        &[a.raw_data(), b.raw_data()],
    );
    let (header, data) = split(&r);
    let output = &header["outputs"][0];
    assert_eq!(output["datatype"], T::DTYPE.kserve_name(), "{method}");
    assert_eq!(output["shape"], json!([a.shape()[0]]), "{method}");
    assert_eq!(
        output["parameters"]["binary_data_size"],
        json!(sum.raw_data().len()),
        "{method}"
    );
    assert!(output.get("data").is_none(), "{method}: {header}");
    assert_eq!(data, sum.raw_data(), "{method}");
    assert_eq!(header["model_name"], method);
}

#[test]
fn every_fixed_size_datatype_goes_through_binary_both_ways() {
    let methods: Vec<(String, String)> = DType::ALL
        .iter()
        .filter(|d| d.size().is_some())
        .map(|d| (format!("add_{d}"), format!("add_{d}")))
        .collect();
    let methods: Vec<(&str, &str, &str)> = methods
        .iter()
        .map(|(n, e)| (n.as_str(), "example-add", e.as_str()))
        .collect();
    let (_server, http) = server_with(&methods);
    check_add(
        &http,
        vec![true, false, true, false],
        vec![true, true, false, false],
        vec![true, true, true, false],
    );
    check_add(&http, vec![1i8, -2], vec![3, 4], vec![4, 2]);
    check_add(&http, vec![1i16, -300], vec![3, 4], vec![4, -296]);
    check_add(&http, vec![1i32, 70_000], vec![3, 4], vec![4, 70_004]);
    check_add(
        &http,
        vec![1i64, 1 << 40],
        vec![3, 4],
        vec![4, (1 << 40) + 4],
    );
    check_add(&http, vec![1u8, 250], vec![3, 4], vec![4, 254]);
    check_add(&http, vec![1u16, 60_000], vec![3, 4], vec![4, 60_004]);
    check_add(
        &http,
        vec![1u32, 4_000_000_000],
        vec![3, 4],
        vec![4, 4_000_000_004],
    );
    check_add(
        &http,
        vec![1u64, u64::MAX - 4],
        vec![3, 4],
        vec![4, u64::MAX],
    );
    check_add(
        &http,
        vec![f16::from_f32(1.5), f16::from_f32(-2.0)],
        vec![f16::from_f32(0.25), f16::from_f32(4.0)],
        vec![f16::from_f32(1.75), f16::from_f32(2.0)],
    );
    check_add(
        &http,
        vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)],
        vec![bf16::from_f32(0.5), bf16::from_f32(4.0)],
        vec![bf16::from_f32(2.0), bf16::from_f32(2.0)],
    );
    check_add(&http, vec![1.5f32, -2.0], vec![0.25, 4.0], vec![1.75, 2.0]);
    check_add(&http, vec![1.5f64, -2.0], vec![0.25, 4.0], vec![1.75, 2.0]);
}

#[test]
fn json_and_binary_mix_in_one_request_and_outputs_take_the_form_asked_for() {
    let (_server, http) = server_with(&[("add", "example-add", "add")]);
    let b = Tensor::vector(vec![10i32, 20]);
    let inputs = json!([
        {"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]},
        binary_input("b", &b)
    ]);
    // No output parameters: JSON, but still framed by the header length because the request was.
    let r = post_binary(
        &http,
        "/v2/models/add/infer",
        &json!({"inputs": inputs}),
        &[b.raw_data()],
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("inference-header-content-length"), None);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.json()["outputs"][0]["data"], json!([11, 22]));
    // binary_data_output for every output.
    let r = post_binary(
        &http,
        "/v2/models/add/infer",
        &json!({"inputs": inputs, "parameters": {"binary_data_output": true}}),
        &[b.raw_data()],
    );
    let (header, data) = split(&r);
    assert_eq!(header["outputs"][0]["parameters"]["binary_data_size"], 8);
    assert_eq!(data, Tensor::vector(vec![11i32, 22]).raw_data());
    // ...unless the output itself says JSON.
    let r = post_binary(
        &http,
        "/v2/models/add/infer",
        &json!({
            "inputs": inputs,
            "parameters": {"binary_data_output": true},
            "outputs": [{"name": "output", "parameters": {"binary_data": false}}]
        }),
        &[b.raw_data()],
    );
    assert_eq!(r.json()["outputs"][0]["data"], json!([11, 22]));
    // A JSON-only request may still ask for a binary answer.
    let r = http.post_json(
        "/v2/models/add/infer",
        &json!({
            "inputs": [
                {"name": "a", "datatype": "INT32", "shape": [1], "data": [1]},
                {"name": "b", "datatype": "INT32", "shape": [1], "data": [2]}
            ],
            "outputs": [{"name": "output", "parameters": {"binary_data": true}}]
        }),
    );
    assert_eq!(split(&r).1, 3i32.to_le_bytes());
}

#[test]
fn bytes_elements_are_a_four_byte_length_then_the_bytes() {
    let (_server, http) = server_with(&[("upper", "example-strings", "upper")]);
    let s = Tensor::from_strings([2], ["ab".as_bytes(), "é€".as_bytes()]).unwrap();
    let mut expected_raw = Vec::new();
    for e in ["ab", "é€"] {
        expected_raw.extend_from_slice(&(e.len() as u32).to_le_bytes());
        expected_raw.extend_from_slice(e.as_bytes());
    }
    assert_eq!(
        s.raw_data(),
        expected_raw,
        "the wire layout is the protocol's"
    );
    let r = post_binary(
        &http,
        "/v2/models/upper/infer",
        &json!({"inputs": [binary_input("s", &s)], "parameters": {"binary_data_output": true}}),
        &[s.raw_data()],
    );
    let (header, data) = split(&r);
    assert_eq!(header["outputs"][0]["datatype"], "BYTES");
    let out = Tensor::from_raw(DType::String, vec![2], data).unwrap();
    assert_eq!(
        out.to_strings().unwrap(),
        vec!["AB".as_bytes().to_vec(), "É€".as_bytes().to_vec()]
    );
}

#[test]
fn a_16_mib_float32_tensor_round_trips_in_binary() {
    let (_server, http) = server_with(&[("add_float32", "example-add", "add_float32")]);
    let n = 4 << 20; // 16 MiB of float32
    let a = Tensor::vector((0..n).map(|i| i as f32 * 0.5).collect::<Vec<f32>>());
    let b = Tensor::vector(vec![1.0f32; n]);
    let r = post_binary(
        &http,
        "/v2/models/add_float32/infer",
        &json!({
            "inputs": [binary_input("a", &a), binary_input("b", &b)],
            "parameters": {"binary_data_output": true}
        }),
        &[a.raw_data(), b.raw_data()],
    );
    let (header, data) = split(&r);
    assert_eq!(header["outputs"][0]["shape"], json!([n]));
    let sum = Tensor::from_raw(DType::Float32, vec![n as u64], data).unwrap();
    let sum = sum.to_vec::<f32>().unwrap();
    assert!(
        sum.iter()
            .enumerate()
            .all(|(i, &s)| s == i as f32 * 0.5 + 1.0)
    );
}

fn assert_refused(r: &Response, contains: &str) {
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let message = r.json()["error"].as_str().unwrap().to_string();
    assert!(message.contains(contains), "`{contains}` in: {message}");
    assert_eq!(r.header("x-wasmrpc-code"), Some("INVALID_ARGUMENT"));
}

#[test]
fn binary_framing_that_does_not_add_up_is_a_clear_400() {
    let (_server, http) = server_with(&[("add", "example-add", "add")]);
    let a = Tensor::vector(vec![1i32, 2]);
    let header = |size: Value| {
        json!({"inputs": [
            {"name": "a", "datatype": "INT32", "shape": [2], "parameters": {"binary_data_size": size}},
            {"name": "b", "datatype": "INT32", "shape": [2], "data": [1, 2]}
        ]})
    };
    let post = |h: &Value, data: &[u8]| post_binary(&http, "/v2/models/add/infer", h, &[data]);
    // binary_data_size disagreeing with the shape.
    assert_refused(
        &post(&header(json!(4)), &a.raw_data()[..4]),
        "needs 8 bytes",
    );
    // Past the body, negative, huge.
    assert_refused(
        &post(&header(json!(8)), &a.raw_data()[..4]),
        "runs past the end",
    );
    assert_refused(&post(&header(json!(-8)), a.raw_data()), "not -8");
    assert_refused(
        &post(&header(json!(u64::MAX)), a.raw_data()),
        "runs past the end",
    );
    // Bytes no input claims.
    assert_refused(
        &post(&header(json!(8)), &[0; 12]),
        "no input's binary_data_size",
    );
    // A header length past the body, negative, or not a number.
    let body = serde_json::to_vec(&header(json!(8))).unwrap();
    for (value, contains) in [
        ("99999999999999", "past the end"),
        ("-1", "whole number of bytes"),
        ("ten", "whole number of bytes"),
        ("18446744073709551616", "whole number of bytes"),
    ] {
        let r =
            http.with_header(HEADER, value)
                .request("POST", "/v2/models/add/infer", Some(&body));
        assert_refused(&r, contains);
    }
    // A header length that cuts the JSON short.
    let r = http
        .with_header(HEADER, "10")
        .request("POST", "/v2/models/add/infer", Some(&body));
    assert_refused(&r, "not a valid inference request");
    // binary_data_size without any binary part.
    let r = http.post_json("/v2/models/add/infer", &header(json!(8)));
    assert_refused(&r, "no Inference-Header-Content-Length");
    // An unknown model is NOT_FOUND whatever the body's binary data.
    let r = post_binary(
        &http,
        "/v2/models/absent/infer",
        &header(json!(8)),
        &[a.raw_data()],
    );
    assert_eq!(r.status, 404);
}

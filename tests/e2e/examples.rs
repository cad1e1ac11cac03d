//! Every example component registered over HTTP, listed with its signature, and called with
//! known answers.

use serde_json::{Value, json};

use crate::support::{TestServer, outputs, register, tensor};

fn close(a: &[Value], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.as_f64().unwrap() - y).abs() < 1e-5)
}

#[test]
fn add_is_listed_with_its_signature_and_adds() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let info = register(&http, "add", "example-add", Some("add"));
    assert_eq!(info["version"], 1);
    assert!(info["digest"].as_str().unwrap().starts_with("sha256:"));

    let list = http.get("/v1/methods").json();
    let methods = list["methods"].as_array().unwrap();
    assert_eq!(methods.len(), 1);
    let sig = &methods[0]["signature"];
    assert_eq!(sig["name"], "add");
    assert_eq!(sig["inputs"][0]["name"], "a");
    assert_eq!(sig["inputs"][0]["dtype"], "int32");
    assert_eq!(sig["inputs"][1]["name"], "b");
    assert_eq!(sig["outputs"][0]["dtype"], "int32");
    assert!(sig["doc"].as_str().unwrap().to_lowercase().contains("sum"));

    let r = http.call(
        "add",
        json!([
            tensor("int32", &[2, 2], json!([1, 2, 3, 4])),
            tensor("int32", &[2, 2], json!([10, 20, 30, 40]))
        ]),
        0,
    );
    let out = outputs(&r);
    assert_eq!(out[0], tensor("int32", &[2, 2], json!([11, 22, 33, 44])));
}

#[test]
fn add_works_for_every_numeric_dtype() {
    let server = TestServer::start(&[]);
    let http = server.http();
    for dtype in [
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
        "bfloat16", "float32", "float64",
    ] {
        let name = format!("add_{dtype}");
        register(&http, &name, "example-add", Some(&name));
        let r = http.call(
            &name,
            json!([
                tensor(dtype, &[3], json!([1, 2, 3])),
                tensor(dtype, &[3], json!([4, 5, 6]))
            ]),
            0,
        );
        let out = outputs(&r);
        assert_eq!(out[0]["dtype"], dtype);
        let data: Vec<f64> = out[0]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(data, vec![5.0, 7.0, 9.0], "{dtype}");
    }
}

#[test]
fn add_refuses_tensors_of_different_shapes() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "add", "example-add", Some("add"));
    let r = http.call(
        "add",
        json!([
            tensor("int32", &[2], json!([1, 2])),
            tensor("int32", &[3], json!([1, 2, 3]))
        ]),
        0,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.code(), "INVALID_ARGUMENT");
}

#[test]
fn matmul_softmax_and_strings_give_the_right_answers() {
    let server = TestServer::start(&[]);
    let http = server.http();
    register(&http, "matmul", "example-matmul", None);
    register(&http, "softmax", "example-softmax", None);
    register(&http, "upper", "example-strings", Some("upper"));

    let r = http.call(
        "matmul",
        json!([
            tensor("float32", &[2, 3], json!([1, 2, 3, 4, 5, 6])),
            tensor("float32", &[3, 2], json!([7, 8, 9, 10, 11, 12]))
        ]),
        0,
    );
    let out = outputs(&r);
    assert_eq!(out[0]["shape"], json!([2, 2]));
    assert!(close(
        out[0]["data"].as_array().unwrap(),
        &[58.0, 64.0, 139.0, 154.0]
    ));

    let r = http.call(
        "matmul",
        json!([
            tensor("float32", &[2, 3], json!([1, 2, 3, 4, 5, 6])),
            tensor("float32", &[2, 3], json!([1, 2, 3, 4, 5, 6]))
        ]),
        0,
    );
    assert_eq!(r.code(), "INVALID_ARGUMENT", "{}", r.message());

    let r = http.call(
        "softmax",
        json!([tensor("float32", &[2, 3], json!([1, 2, 3, 0, 0, 0]))]),
        0,
    );
    let out = outputs(&r);
    let e: Vec<f64> = [1f64, 2.0, 3.0].iter().map(|x| x.exp()).collect();
    let s: f64 = e.iter().sum();
    let third = 1.0 / 3.0;
    assert!(close(
        out[0]["data"].as_array().unwrap(),
        &[e[0] / s, e[1] / s, e[2] / s, third, third, third]
    ));

    let r = http.call(
        "upper",
        json!([tensor("string", &[2], json!(["hello", "wörld"]))]),
        0,
    );
    assert_eq!(
        outputs(&r)[0],
        tensor("string", &[2], json!(["HELLO", "WÖRLD"]))
    );
}

#[test]
fn a_multi_method_component_serves_each_method_it_exports() {
    let server = TestServer::start(&[]);
    let http = server.http();
    let r = http.put(
        "/v1/methods/linalg",
        &crate::support::guest("example-linalg"),
    );
    assert_eq!(r.status, 400, "several methods need ?export=");
    assert!(r.message().contains("transpose"), "{}", r.message());

    register(&http, "transpose", "example-linalg", None);
    register(&http, "total", "example-linalg", Some("sum"));
    let r = http.call(
        "transpose",
        json!([tensor("float32", &[2, 3], json!([1, 2, 3, 4, 5, 6]))]),
        0,
    );
    assert_eq!(
        outputs(&r)[0],
        tensor("float32", &[3, 2], json!([1.0, 4.0, 2.0, 5.0, 3.0, 6.0]))
    );
    let r = http.call(
        "total",
        json!([tensor("float32", &[4], json!([1, 2, 3, 4.5]))]),
        0,
    );
    assert_eq!(outputs(&r)[0], tensor("float32", &[], json!([10.5])));
}

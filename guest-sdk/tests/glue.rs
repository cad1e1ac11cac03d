//! The code `#[method]` and `export!` generate, driven natively through the component's `Guest`
//! implementation, as the host would call it.

use wasmrpc_guest::__private::{Guest, WitDtype, WitError, WitTensor};
use wasmrpc_guest::half::f16;
use wasmrpc_guest::{Element, Error, Tensor};

/// Element-wise sum.
///
///   Indented line.
#[wasmrpc_guest::method(a = [_, 3])]
fn add(a: Tensor<i32>, b: Tensor<i32>) -> Result<Tensor<i32>, Error> {
    a.zip_with(&b, i32::wrapping_add)
}

/// Splits a tensor in two.
#[wasmrpc_guest::method(name = "split", outputs = ["first", "second"], first = [], r#type = [2])]
fn halves(r#type: Tensor<f16>) -> (Tensor<f16>, Tensor<bool>) {
    let first = r#type.as_slice()[0];
    (Tensor::scalar(first), Tensor::from_vec(vec![true]))
}

/// Returns a shape other than the one it declares.
#[wasmrpc_guest::method(output = [_, _])]
fn liar(x: Tensor<u8>) -> Tensor<u8> {
    x
}

#[wasmrpc_guest::method]
fn constant() -> Result<(Tensor<String>,), Error> {
    Err(Error::failed_precondition("not today"))
}

mod nested {
    use wasmrpc_guest::{Tensor, log};

    /// Echoes its argument.
    #[wasmrpc_guest::method]
    pub(crate) fn echo(mut x: Tensor<String>) -> Tensor<String> {
        log::info(format!("echo of {} strings", x.len()));
        x.as_mut_slice().reverse();
        x
    }
}

wasmrpc_guest::export!(add, halves, liar, constant, nested::echo);

fn wit<T: Element>(shape: &[u64], data: Vec<T>) -> WitTensor {
    WitTensor {
        dtype: T::DTYPE.into(),
        shape: shape.to_vec(),
        data: T::encode(data).unwrap(),
    }
}

/// The dtype, shape and data of each tensor (the generated `WitTensor` has no `PartialEq`).
type Parts = Vec<(WitDtype, Vec<u64>, Vec<u8>)>;

fn parts(tensors: Vec<WitTensor>) -> Parts {
    tensors
        .into_iter()
        .map(|t| (t.dtype, t.shape, t.data))
        .collect()
}

fn call(name: &str, args: Vec<WitTensor>) -> Result<Parts, Error> {
    __WasmrpcComponent::call(name.to_owned(), args)
        .map(parts)
        .map_err(Error::from)
}

#[test]
fn signatures_list_every_method_in_order() {
    let sigs = __WasmrpcComponent::signatures();
    let names: Vec<&str> = sigs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["add", "split", "liar", "constant", "echo"]);

    let add = &sigs[0];
    assert_eq!(add.doc, "Element-wise sum.\n\n  Indented line.");
    assert_eq!(add.inputs.len(), 2);
    assert_eq!(add.inputs[0].name, "a");
    assert_eq!(add.inputs[0].dtype, WitDtype::I32);
    assert_eq!(add.inputs[0].shape, Some(vec![None, Some(3)]));
    assert_eq!(add.inputs[1].shape, None);
    assert_eq!(add.outputs[0].name, "output");

    let split = &sigs[1];
    assert_eq!(split.inputs[0].name, "type");
    assert_eq!(split.inputs[0].dtype, WitDtype::F16);
    assert_eq!(split.inputs[0].shape, Some(vec![Some(2)]));
    let outputs: Vec<_> = split
        .outputs
        .iter()
        .map(|o| (o.name.as_str(), o.dtype, o.shape.clone()))
        .collect();
    assert_eq!(
        outputs,
        [
            ("first", WitDtype::F16, Some(vec![])),
            ("second", WitDtype::Bool, None)
        ]
    );

    assert_eq!(sigs[3].doc, "");
    assert_eq!(sigs[3].outputs[0].name, "output_0");
    assert_eq!(sigs[4].inputs[0].dtype, WitDtype::Bytes);
}

#[test]
fn calls_dispatch_by_name_and_round_trip_tensors() {
    let out = call(
        "add",
        vec![wit(&[1, 3], vec![1, 2, 3]), wit(&[1, 3], vec![10, 20, 30])],
    )
    .unwrap();
    assert_eq!(out, parts(vec![wit(&[1, 3], vec![11, 22, 33])]));

    let half = |v: f32| f16::from_f32(v);
    let out = call("split", vec![wit(&[2], vec![half(1.5), half(2.0)])]).unwrap();
    assert_eq!(
        out,
        parts(vec![wit(&[], vec![half(1.5)]), wit(&[1], vec![true])])
    );

    let out = call(
        "echo",
        vec![wit(&[2], vec!["a".to_string(), "b".to_string()])],
    )
    .unwrap();
    assert_eq!(
        out,
        parts(vec![wit(&[2], vec!["b".to_string(), "a".to_string()])])
    );
}

#[test]
fn unknown_methods_are_not_found() {
    let err = call("mul", vec![]).unwrap_err();
    assert_eq!(
        err,
        Error::not_found(
            "no method `mul` in this component; it has: add, split, liar, constant, echo"
        )
    );
    // The Rust name of a renamed method is not its method name.
    assert!(matches!(call("halves", vec![]), Err(Error::NotFound(_))));
}

#[test]
fn arity_dtype_and_shape_are_checked_with_the_argument_named() {
    let err = call("add", vec![wit(&[3], vec![1, 2, 3])]).unwrap_err();
    assert_eq!(
        err,
        Error::invalid_argument("method add takes 2 arguments, got 1")
    );

    let err = call(
        "add",
        vec![
            wit(&[1, 3], vec![1, 2, 3]),
            wit(&[1, 3], vec![1.0f32, 2.0, 3.0]),
        ],
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::invalid_argument("argument `b`: expected int32, got float32")
    );

    let err = call(
        "add",
        vec![wit(&[3, 1], vec![1, 2, 3]), wit(&[3, 1], vec![1, 2, 3])],
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::invalid_argument("argument `a`: expected shape [_, 3], got [3, 1]")
    );

    let err = call("split", vec![wit(&[3], vec![f16::ONE; 3])]).unwrap_err();
    assert_eq!(
        err,
        Error::invalid_argument("argument `type`: expected shape [2], got [3]")
    );
}

#[test]
fn malformed_arguments_are_invalid_argument_never_a_panic() {
    let mut short = wit(&[1, 3], vec![1, 2, 3]);
    short.data.pop();
    let err = call("add", vec![short.clone(), short]).unwrap_err();
    assert_eq!(
        err,
        Error::invalid_argument("argument `a`: 3 elements need 12 bytes of data, got 11")
    );

    let bad_utf8 = WitTensor {
        dtype: WitDtype::Bytes,
        shape: vec![1],
        data: vec![1, 0, 0, 0, 0xff],
    };
    let err = call("echo", vec![bad_utf8]).unwrap_err();
    assert!(
        err.message()
            .starts_with("argument `x`: element 0 is not valid UTF-8"),
        "{err}"
    );

    let huge = WitTensor {
        dtype: WitDtype::U8,
        shape: vec![u64::MAX, u64::MAX],
        data: vec![],
    };
    assert!(matches!(
        call("liar", vec![huge]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn function_errors_and_wrong_output_shapes_are_reported() {
    let err = call("constant", vec![]).unwrap_err();
    assert_eq!(err, Error::failed_precondition("not today"));

    let err = call("liar", vec![wit(&[2], vec![1u8, 2])]).unwrap_err();
    assert_eq!(
        err,
        Error::internal("method liar returned output `output` of shape [2], but declares [_, _]")
    );
}

#[test]
fn wit_error_converts_back() {
    let err: WitError = Error::unimplemented("x").into();
    assert!(matches!(err, WitError::Unimplemented(m) if m == "x"));
}

mod generated_docs {
    use wasmrpc_guest::Tensor;

    macro_rules! negate {
        ($name:ident: $t:ty, $dtype:literal) => {
            #[doc = concat!("Negates a ", $dtype, " tensor.")]
            ///
            /// Second paragraph.
            #[wasmrpc_guest::method]
            pub(crate) fn $name(x: Tensor<$t>) -> Tensor<$t> {
                x.map(|v| -v)
            }
        };
    }

    negate!(neg_int8: i8, "int8");

    /// Title.
    #[doc = include_str!("doc-fragment.md")]
    #[wasmrpc_guest::method]
    pub(crate) fn included(x: Tensor<f64>) -> Tensor<f64> {
        x
    }
}

#[test]
fn docs_written_by_macros_or_included_are_kept() {
    use wasmrpc_guest::__private::Method;
    type Neg = generated_docs::__wasmrpc_method_neg_int8;
    assert_eq!(
        Neg::signature().doc,
        "Negates a int8 tensor.\n\nSecond paragraph."
    );
    type Included = generated_docs::__wasmrpc_method_included;
    assert_eq!(Included::signature().doc, "Title.\nIncluded text.");
}

"""call(name, args) as the host makes it: wire tensors in, wire tensors or a WIT error out; the
checks and messages match the Rust SDK's (guest-sdk/src/__private.rs)."""

import array
import struct

import pytest

import wasmrpc_guest as wg
from wasmrpc_guest import Tensor, function
from wasmrpc_guest.errors import BUILTIN_CODES, CODES, Error, code_of
from wasmrpc_guest.registry import Wire


def f32(shape, *values):
    return Wire("f32", list(shape), struct.pack(f"<{len(values)}f", *values))


def error_of(registry, name, args):
    with pytest.raises(Error) as info:
        registry.call(name, args)
    return info.value.code, info.value.message


@pytest.fixture
def linalg(fresh_registry):
    """A component of several methods, like examples/linalg."""

    @function
    def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]:
        f = factor.item()
        return Tensor([v * f for v in x.flat()], shape=x.shape)

    @function(outputs=["values", "indices"])
    def top(x: Tensor["float32", [None, 3]]) -> tuple[Tensor["float32"], Tensor["int64"]]:
        rows = x.tolist()
        return [max(r) for r in rows], array.array("q", [r.index(max(r)) for r in rows])

    @function
    def upper(s: Tensor["string"]) -> Tensor["string"]:
        return Tensor([v.upper() for v in s.flat()], shape=s.shape)

    return fresh_registry


def test_several_methods_dispatch_by_name(linalg):
    (out,) = linalg.call("scale", [f32([2], 1.0, 2.0), f32([], 3.0)])
    assert (out.dtype, out.shape, out.data) == ("f32", [2], struct.pack("<2f", 3.0, 6.0))
    values, indices = linalg.call("top", [f32([2, 3], 1, 5, 2, 9, 0, 0)])
    assert (values.dtype, values.shape, struct.unpack("<2f", values.data)) == ("f32", [2],
                                                                               (5.0, 9.0))
    assert (indices.dtype, indices.shape, struct.unpack("<2q", indices.data)) == ("i64", [2],
                                                                                  (1, 0))
    (s,) = linalg.call("upper", [Wire("bytes", [2], b"\x02\x00\x00\x00ab\x03\x00\x00\x00\xc3\xa9x")])
    assert (s.dtype, s.shape, s.data) == ("bytes", [2],
                                          b"\x02\x00\x00\x00AB\x03\x00\x00\x00\xc3\x89X")


def test_unknown_methods_are_not_found_and_listed(linalg):
    assert error_of(linalg, "x", []) == (
        "not-found", "no method `x` in this component; it has: scale, top, upper")


def test_arity_is_checked(linalg):
    assert error_of(linalg, "scale", [f32([1], 1.0)]) == (
        "invalid-argument", "method scale takes 2 arguments, got 1")
    assert error_of(linalg, "upper", []) == (
        "invalid-argument", "method upper takes 1 argument, got 0")


def test_argument_dtypes_are_checked_with_the_argument_named(linalg):
    assert error_of(linalg, "scale", [f32([1], 1.0), Wire("i32", [], bytes(4))]) == (
        "invalid-argument", "argument `factor`: expected float32, got int32")
    assert error_of(linalg, "scale", [Wire("bytes", [0], b""), f32([], 1.0)]) == (
        "invalid-argument", "argument `x`: expected float32, got string")


def test_argument_shapes_are_checked(linalg):
    assert error_of(linalg, "scale", [f32([1], 1.0), f32([1], 2.0)]) == (
        "invalid-argument", "argument `factor`: expected shape [], got [1]")
    assert error_of(linalg, "top", [f32([2, 2], 1, 2, 3, 4)]) == (
        "invalid-argument", "argument `x`: expected shape [_, 3], got [2, 2]")


def test_malformed_argument_data_names_the_argument(linalg):
    assert error_of(linalg, "scale", [f32([3], 1.0, 2.0), f32([], 1.0)]) == (
        "invalid-argument", "argument `x`: 3 elements need 12 bytes of data, got 8")
    assert error_of(linalg, "upper", [Wire("bytes", [1], b"\x01\x00\x00\x00\xff")])[1].startswith(
        "argument `s`: element 0 is not valid UTF-8")


def test_outputs_are_checked_against_their_declaration(fresh_registry):
    @function
    def wrong_shape(x: Tensor["uint8"]) -> Tensor["uint8", [None, None]]:
        return x

    @function
    def wrong_dtype(x: Tensor["uint8"]) -> Tensor["int8"]:
        return x

    @function
    def wrong_count(x: Tensor["uint8"]) -> tuple[Tensor["uint8"], Tensor["uint8"]]:
        return x

    @function
    def too_big(x: Tensor["uint8"]) -> Tensor["uint8"]:
        return [256]

    arg = [Wire("u8", [1], b"\x07")]
    assert error_of(fresh_registry, "wrong_shape", arg) == (
        "internal", "method wrong_shape returned output `output` of shape [1], but declares [_, _]")
    assert error_of(fresh_registry, "wrong_dtype", arg) == (
        "internal", "method wrong_dtype returned output `output` of dtype uint8, but declares int8")
    assert error_of(fresh_registry, "wrong_count", arg) == (
        "internal", "method wrong_count declares 2 outputs; return a tuple of 2, not Tensor")
    code, message = error_of(fresh_registry, "too_big", arg)
    assert code == "internal" and message.startswith("method too_big, output `output`:")


def test_plain_return_values_take_the_declared_dtype(fresh_registry):
    @function
    def as_list() -> Tensor["float16", [2]]:
        return [1, 2.5]

    @function
    def as_doubles() -> Tensor["float32"]:
        return array.array("d", [0.5])  # converted: the declaration says float32

    @function
    def as_scalar() -> Tensor["bool", []]:
        return True

    assert fresh_registry.call("as_list", [])[0].data == struct.pack("<2e", 1, 2.5)
    assert fresh_registry.call("as_doubles", [])[0].data == struct.pack("<f", 0.5)
    out = fresh_registry.call("as_scalar", [])[0]
    assert (out.dtype, out.shape, out.data) == ("bool", [], b"\x01")


# Every WIT error case, from the SDK's exception of that case and from Python's own exceptions.
@pytest.mark.parametrize("exc,code,message", [
    (wg.InvalidArgument("bad"), "invalid-argument", "bad"),
    (wg.FailedPrecondition("not now"), "failed-precondition", "not now"),
    (wg.OutOfRange("past"), "out-of-range", "past"),
    (wg.Unimplemented("later"), "unimplemented", "later"),
    (wg.Internal("bug"), "internal", "bug"),
    (wg.ResourceExhausted("big"), "resource-exhausted", "big"),
    (wg.NotFound("gone"), "not-found", "gone"),
    (ValueError("x must be positive"), "invalid-argument", "x must be positive"),
    (TypeError("not a number"), "invalid-argument", "not a number"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), "invalid-argument",
     "'utf-8' codec can't decode byte 0xff in position 0: bad"),
    (NotImplementedError(), "unimplemented", "NotImplementedError"),
    (MemoryError(), "resource-exhausted", "MemoryError"),
    (IndexError("list index out of range"), "out-of-range", "list index out of range"),
    (OverflowError("math range error"), "out-of-range", "math range error"),
    (KeyError("k"), "not-found", "k"),
    (ZeroDivisionError("division by zero"), "internal", "ZeroDivisionError: division by zero"),
    (RuntimeError(), "internal", "RuntimeError"),
    (AssertionError("x"), "internal", "AssertionError: x"),
    (SystemExit(3), "internal", "SystemExit: 3"),
])
def test_exceptions_map_onto_wit_error_cases(fresh_registry, exc, code, message):
    @function
    def fails() -> Tensor["int8"]:
        raise exc

    assert error_of(fresh_registry, "fails", []) == (code, message)


def test_the_table_uses_only_wit_cases():
    assert set(CODES) == {"invalid-argument", "failed-precondition", "out-of-range",
                          "unimplemented", "internal", "resource-exhausted", "not-found"}
    assert {code for _, code in BUILTIN_CODES} <= set(CODES)
    assert code_of(wg.Error("plain")) == ("internal", "plain")


def test_an_internal_error_prints_its_traceback_for_the_host_log(fresh_registry, capsys):
    @function
    def buggy() -> Tensor["int8"]:
        return 1 / 0

    error_of(fresh_registry, "buggy", [])
    assert "ZeroDivisionError" in capsys.readouterr().err

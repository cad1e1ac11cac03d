"""Every dtype of the WIT through the wire encoding, both ways, with the exact bytes a Rust guest
and the host use (little-endian, row-major; strings length-prefixed)."""

import math
import struct

import pytest

from wasmrpc_guest import dtypes
from wasmrpc_guest.errors import InvalidArgument

# (dtype, values, the wire bytes they are)
CASES = [
    ("bool", [True, False, True], b"\x01\x00\x01"),
    ("uint8", [0, 7, 255], b"\x00\x07\xff"),
    ("uint16", [1, 0xFFFF], b"\x01\x00\xff\xff"),
    ("uint32", [1, 0xFFFF_FFFF], b"\x01\x00\x00\x00\xff\xff\xff\xff"),
    ("uint64", [2**64 - 1], b"\xff" * 8),
    ("int8", [-128, -1, 127], b"\x80\xff\x7f"),
    ("int16", [1, -2], b"\x01\x00\xfe\xff"),
    ("int32", [-(2**31), 2**31 - 1], b"\x00\x00\x00\x80\xff\xff\xff\x7f"),
    ("int64", [-1, 2**63 - 1], b"\xff" * 8 + b"\xff" * 7 + b"\x7f"),
    ("float16", [1.5, -2.0, math.inf], b"\x00\x3e\x00\xc0\x00\x7c"),
    ("bfloat16", [1.0, -2.0], b"\x80\x3f\x00\xc0"),
    ("float32", [0.5, -0.0, math.inf], struct.pack("<3f", 0.5, -0.0, math.inf)),
    ("float64", [0.25, -1e300], struct.pack("<2d", 0.25, -1e300)),
    ("string", ["", "hé", "日本"], b"\x00\x00\x00\x00\x03\x00\x00\x00h\xc3\xa9"
                                  b"\x06\x00\x00\x00\xe6\x97\xa5\xe6\x9c\xac"),
    ("bytes", [b"", b"\x00\xff"], b"\x00\x00\x00\x00\x02\x00\x00\x00\x00\xff"),
]


@pytest.mark.parametrize("name,values,wire", CASES, ids=[c[0] for c in CASES])
def test_every_dtype_encodes_to_the_wire_bytes_and_back(name, values, wire):
    d = dtypes.lookup(name)
    assert dtypes.encode(d, values) == wire
    decoded = dtypes.decode(d, wire, len(values))
    assert list(decoded) == values
    assert all(type(a) is type(b) for a, b in zip(list(decoded), values))


def test_the_wit_names_cover_the_wit_enum_and_alias_the_user_names():
    wit_cases = ["bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "bf16",
                 "f32", "f64", "bytes"]
    assert sorted({d.wit for d in dtypes.ALL}) == sorted(wit_cases)
    assert dtypes.lookup("f32") is dtypes.FLOAT32
    assert dtypes.lookup("u8") is dtypes.UINT8
    # `bytes` is both the WIT case and the user name of the dtype of bytes elements.
    assert dtypes.lookup("bytes") is dtypes.BYTES
    with pytest.raises(TypeError, match="unknown dtype 'float'"):
        dtypes.lookup("float")


def test_bfloat16_rounds_to_nearest_even_like_rust():
    # 1 + 2^-8 is halfway between two bfloat16 values: ties go to the even one (1.0).
    assert dtypes.encode(dtypes.BFLOAT16, [1 + 2**-8]) == b"\x80\x3f"
    # 1 + 3 * 2^-8 is halfway too: the even neighbour is above.
    assert dtypes.encode(dtypes.BFLOAT16, [1 + 3 * 2**-8]) == b"\x82\x3f"
    nan = dtypes.encode(dtypes.BFLOAT16, [math.nan])
    assert math.isnan(dtypes.decode(dtypes.BFLOAT16, nan, 1)[0])


def test_numeric_arguments_are_read_in_place():
    wire = struct.pack("<2f", 1.0, 2.0)
    values = dtypes.decode(dtypes.FLOAT32, wire, 2)
    assert isinstance(values, memoryview) and values.obj is wire


@pytest.mark.parametrize("name,data,count,message", [
    ("float32", bytes(8), 3, "3 elements need 12 bytes of data, got 8"),
    ("bool", b"\x00\x02", 2, "element 1 is 2; a bool must be 0 or 1"),
    ("string", b"\x01\x00", 1, "element 0 of 1: the data ends before its length"),
    ("string", b"\x05\x00\x00\x00ab", 1, "element 0 of 1: its length 5 runs past the end"),
    ("string", b"\x00\x00\x00\x00x", 1, "1 bytes of data left after the last of 1 elements"),
    ("string", b"\x01\x00\x00\x00\xff", 1, "element 0 is not valid UTF-8"),
])
def test_malformed_wire_data_is_invalid_argument(name, data, count, message):
    with pytest.raises(InvalidArgument, match=message):
        dtypes.decode(dtypes.lookup(name), data, count)


def test_bytes_elements_need_not_be_utf8():
    assert dtypes.decode(dtypes.BYTES, b"\x01\x00\x00\x00\xff", 1) == [b"\xff"]


@pytest.mark.parametrize("name,values", [
    ("uint8", [256]), ("int8", [-129]), ("uint32", [-1]), ("int32", [1.5]), ("bool", [2]),
    ("bool", [0.0]), ("float16", [1e6]), ("string", [3]),
])
def test_values_that_do_not_fit_are_refused(name, values):
    with pytest.raises((ValueError, TypeError, OverflowError)):
        dtypes.encode(dtypes.lookup(name), values)

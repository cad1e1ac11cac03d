"""Tensor values: built from nested lists, scalars, array.array and memoryview, and read back as
lists, arrays and memoryviews, for every dtype; and the Tensor[...] annotation."""

import array
import math

import pytest

from wasmrpc_guest import Tensor
from wasmrpc_guest.dtypes import ALL
from wasmrpc_guest.tensor import TensorType

# One sample element per dtype (exactly representable in it).
SAMPLES = {"bool": True, "uint8": 200, "uint16": 60000, "uint32": 4_000_000_000,
           "uint64": 2**64 - 1, "int8": -100, "int16": -30000, "int32": -2**31, "int64": -2**63,
           "float16": 0.5, "bfloat16": -2.0, "float32": 1.25, "float64": 1e-300,
           "string": "héllo", "bytes": b"\x00raw"}


def test_every_dtype_has_a_sample():
    assert sorted(SAMPLES) == sorted(d.name for d in ALL)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_nested_lists_round_trip_for_every_dtype(name):
    v = SAMPLES[name]
    t = Tensor([[v, v, v], [v, v, v]], dtype=name)
    assert (t.dtype, t.shape, t.ndim, t.size) == (name, (2, 3), 2, 6)
    assert t.tolist() == [[v] * 3] * 2
    assert t.flat() == [v] * 6
    scalar = Tensor(v, dtype=name)
    assert (scalar.shape, scalar.item(), scalar.tolist()) == ((), v, v)


def test_shape_reshapes_flat_data_and_must_agree_with_it():
    t = Tensor([1, 2, 3, 4, 5, 6], shape=[2, 3], dtype="int32")
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t.reshape([3, 2]).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert Tensor([], shape=[3, 0]).tolist() == [[], [], []]
    with pytest.raises(ValueError, match=r"shape \[4\] needs 4 elements, got 6"):
        Tensor([1, 2, 3, 4, 5, 6], shape=[4])


def test_ragged_nested_lists_are_refused():
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="ragged"):
        Tensor([[1, 2], 3])
    with pytest.raises(ValueError, match="ragged"):
        Tensor([1, [2]])


def test_array_array_in_and_out_without_the_user_touching_bytes():
    t = Tensor(array.array("f", [1.0, 2.0, 3.0, 4.0]), shape=[2, 2])
    assert t.dtype == "float32"  # the buffer's format says it
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    a = t.array()
    assert a.typecode == "f" and a.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert Tensor(array.array("q", [-1]), dtype="int64").array() == array.array("q", [-1])


@pytest.mark.parametrize("name,code", [("bool", "B"), ("uint8", "B"), ("int16", "h"),
                                       ("uint64", "Q"), ("float16", "f"), ("bfloat16", "f"),
                                       ("float64", "d")])
def test_array_gives_the_closest_typecode(name, code):
    v = SAMPLES[name]
    a = Tensor([v, v], dtype=name).array()
    assert a.typecode == code and a.tolist() == [int(v) if code == "B" else v] * 2


def test_strings_have_no_array_or_view():
    t = Tensor(["a", "b"], dtype="string")
    with pytest.raises(TypeError):
        t.array()
    with pytest.raises(TypeError):
        t.view()


def test_memoryview_in_and_out():
    m = memoryview(array.array("i", [1, 2, 3, 4, 5, 6])).cast("B").cast("i", [2, 3])
    t = Tensor(m)
    assert (t.dtype, t.shape) == ("int32", (2, 3))
    v = t.view()
    assert v.readonly and v.format == "i" and v.shape == (2, 3)
    assert v.tolist() == [[1, 2, 3], [4, 5, 6]]
    # A tensor built from a list has a view too, of the declared dtype.
    assert Tensor([[True], [False]], dtype="bool").view().tolist() == [[True], [False]]
    assert Tensor(7.0, dtype="float64").view().tolist() == 7.0
    assert Tensor([], shape=[2, 0], dtype="uint8").view().tolist() == []


def test_bytes_are_a_uint8_buffer_or_one_string_element():
    assert Tensor(b"\x01\x02").tolist() == [1, 2]
    assert Tensor(b"\x01\x02").dtype == "uint8"
    assert Tensor(b"ab", dtype="bytes").tolist() == b"ab"
    assert Tensor("text").shape == ()


def test_equality_compares_dtype_shape_and_elements():
    assert Tensor([1, 2], dtype="int32") == Tensor(array.array("i", [1, 2]))
    assert Tensor([1, 2], dtype="int32") != Tensor([1, 2], dtype="int64")
    assert Tensor([1, 2], dtype="int32") != Tensor([[1, 2]], dtype="int32")
    assert math.isnan(Tensor([math.nan], dtype="float32").item())


def test_item_needs_exactly_one_element():
    assert Tensor([[5]], dtype="int8").item() == 5
    with pytest.raises(ValueError, match="item\\(\\) needs one element, the tensor has 2"):
        Tensor([1, 2]).item()


@pytest.mark.parametrize("key,dtype,shape", [
    ("float32", "float32", None),
    (("f32", []), "float32", ()),
    (("int64", [None, 3]), "int64", (None, 3)),
    (("uint8", (-1, -1)), "uint8", (None, None)),
    (("string", None), "string", None),
])
def test_the_annotation_carries_dtype_and_shape(key, dtype, shape):
    t = Tensor[key]
    assert isinstance(t, TensorType)
    assert (t.dtype.name, t.shape) == (dtype, shape)


@pytest.mark.parametrize("key", [("float32", [-2]), ("float32", [1.5]), ("float32", 3),
                                 "float", ("float32", [], 1)])
def test_bad_annotations_are_type_errors(key):
    with pytest.raises(TypeError):
        Tensor[key]


def test_the_annotation_builds_tensors_of_its_dtype():
    t = Tensor["int16"]([1, 2])
    assert t == Tensor([1, 2], dtype="int16")

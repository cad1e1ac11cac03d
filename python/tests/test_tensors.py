"""numpy arrays of every dtype through the wire and back, strings, scalars, and the 64 MiB
array; outputs are views over the response's bytes, not copies."""

import sys
import time

import numpy as np
import pytest

import wasmrpc
from wasmrpc import _native

ml_dtypes = pytest.importorskip("ml_dtypes")

# dtype -> (a, b, a + b as the add example defines it)
CASES = {
    "bool": ([True, False, False], [False, False, True], [True, False, True]),
    "int8": ([-128, 5, 127], [1, -5, 0], [-127, 0, 127]),
    "int16": ([-32768, 300, 7], [1, 300, -7], [-32767, 600, 0]),
    "int32": ([-(2**31), 70000, 1], [1, 70000, -1], [-(2**31) + 1, 140000, 0]),
    "int64": ([-(2**63), 2**40, 3], [1, 2**40, 4], [-(2**63) + 1, 2**41, 7]),
    "uint8": ([255, 0, 1], [0, 0, 1], [255, 0, 2]),
    "uint16": ([65535, 256, 1], [0, 256, 1], [65535, 512, 2]),
    "uint32": ([2**32 - 1, 2**20, 1], [0, 2**20, 1], [2**32 - 1, 2**21, 2]),
    "uint64": ([2**64 - 1, 2**40, 1], [0, 2**40, 1], [2**64 - 1, 2**41, 2]),
    "float16": ([0.5, -2.0, 65504.0], [0.25, 2.0, 0.0], [0.75, 0.0, 65504.0]),
    "bfloat16": ([0.5, -2.0, 1.5], [0.25, 2.0, 256.0], [0.75, 0.0, 257.5]),
    "float32": ([0.1, -1e30, 3.5], [0.2, 1e30, 0.25], None),
    "float64": ([0.1, -1e300, 3.5], [0.2, 1e300, 0.25], None),
}


def np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_dtype_round_trips_with_numpy(client, name):
    a_values, b_values, want = CASES[name]
    dtype = np_dtype(name)
    a = np.array(a_values, dtype=dtype).reshape(3, 1)
    b = np.array(b_values, dtype=dtype).reshape(3, 1)
    out = getattr(client, f"add_{name}_blocking")(a, b)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == (3, 1)
    expected = (a + b) if want is None else np.array(want, dtype=dtype).reshape(3, 1)
    np.testing.assert_array_equal(out.astype(np.float64) if name == "bfloat16" else out,
                                  expected.astype(np.float64) if name == "bfloat16" else expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_zero_d_arrays_are_scalars_both_ways(client, name):
    dtype = np_dtype(name)
    one = np.array(1, dtype=dtype)
    out = getattr(client, f"add_{name}_blocking")(one, np.zeros((), dtype=dtype))
    assert out.shape == () and out.dtype == np.dtype(dtype)
    assert out == one


def test_numpy_scalars_are_scalars(client):
    out = client.add_float64_blocking(np.float64(1.5), np.float64(2.0))
    assert out.shape == () and out == 3.5


def test_empty_and_non_contiguous_arrays_travel(client):
    empty = np.zeros((0, 4), dtype=np.int32)
    assert client.addition_blocking(empty, empty).shape == (0, 4)
    grid = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = grid[:, ::2].T  # neither C- nor F-contiguous
    np.testing.assert_array_equal(client.addition_blocking(view, view), view * 2)
    big_endian = np.arange(4, dtype=">i4")
    np.testing.assert_array_equal(client.addition_blocking(big_endian, big_endian), [0, 2, 4, 6])


def test_outputs_are_read_only_views_over_the_response_without_a_copy(client):
    out = client.add_float32_blocking(np.ones(1000, np.float32), np.ones(1000, np.float32))
    assert not out.flags.writeable and not out.flags.owndata
    base = out
    while isinstance(base, np.ndarray):
        base = base.base
    # numpy holds the native buffer through a memoryview: the bytes are the response's own.
    assert isinstance(base, memoryview) and isinstance(base.obj, _native.TensorBuffer), base
    writeable = np.array(out)
    writeable += 1
    assert writeable[0] == 3.0


def test_string_tensors_of_str_and_bytes_come_back_as_bytes(client):
    words = np.array([["hello", "wörld"], ["", "wasm"]])  # numpy.str_ elements
    out = client.upper_blocking(words)
    assert out.dtype == object and out.shape == (2, 2)
    assert out.tolist() == [[b"HELLO", "WÖRLD".encode()], [b"", b"WASM"]]
    as_bytes = np.array([b"abc", b"de"], dtype=object)
    assert client.upper_blocking(as_bytes).tolist() == [b"ABC", b"DE"]
    lengths = client.length_blocking(np.array(["wörld", ""], dtype=object))
    assert lengths.dtype == np.int64 and lengths.tolist() == [5, 0]
    assert client.upper_blocking("scalar").shape == ()


def test_a_string_tensor_of_other_objects_is_an_invalid_argument(client):
    with pytest.raises(wasmrpc.InvalidArgumentError, match="str or bytes"):
        client.upper_blocking(np.array([1, "a"], dtype=object))


def test_a_dtype_wasmrpc_lacks_is_an_invalid_argument(client):
    with pytest.raises(wasmrpc.InvalidArgumentError, match="complex128"):
        client.addition_blocking(np.array([1j]), np.array([1j]))


def test_bfloat16_without_ml_dtypes_is_a_clear_error(client, monkeypatch):
    out = client.add_bfloat16_blocking  # looked up while ml_dtypes is importable
    a = np.array([1.0], dtype=ml_dtypes.bfloat16)
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(ImportError, match="pip install ml_dtypes"):
        out(a, a)
    with pytest.raises(ImportError, match="ml_dtypes"):
        wasmrpc._tensors.numpy_dtype("bfloat16")
    # A spec names the dtype without needing numpy's bfloat16.
    assert wasmrpc.TensorSpec((), "bfloat16").dtype == "bfloat16"


def test_a_64_mib_float32_array_round_trips_and_its_time_is_printed(client, capsys):
    n = 16 * 1024 * 1024  # 64 MiB of float32
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, dtype=np.float32)
    client.add_float32_blocking(a[:1], b[:1])  # connection and instance warm
    started = time.perf_counter()
    out = client.add_float32_blocking(a, b)
    elapsed = time.perf_counter() - started
    assert out.shape == (n,) and out[0] == 0.5 and out[-1] == a[-1] + 0.5
    np.testing.assert_array_equal(out[:1000], a[:1000] + 0.5)
    with capsys.disabled():
        print(
            f"\n64 MiB float32 + 64 MiB float32 -> 64 MiB: {elapsed * 1000:.0f} ms "
            f"({3 * 64 / elapsed:.0f} MiB/s moved, native module {_native.__version__})"
        )


def test_binary_is_the_default_and_json_gives_the_same_bits(address):
    from wasmrpc import rpc

    x = np.array([np.nan, np.inf, -0.0, 1e-45, 3.4e38], np.float32)
    outs = []
    for encoding in ("binary", "json"):
        c = rpc.Client.create("http", address, name=encoding, encoding=encoding)
        outs.append(c.echo_blocking(x))
    assert outs[0].tobytes() == outs[1].tobytes() == x.tobytes()
    with pytest.raises(wasmrpc.InvalidArgumentError, match="binary, json"):
        rpc.Client.create("http", address, encoding="xml")

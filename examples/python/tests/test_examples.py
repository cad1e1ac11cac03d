"""The Python examples as plain Python (no component): the same answers as their Rust twins'
unit tests (examples/softmax, examples/strings), through the SDK's call path.

    target/py-venv/bin/python -m pytest examples/python/tests
"""

import importlib.util
import math
import pathlib
import struct
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "guest-sdk" / "python" / "src"))

from wasmrpc_guest import InvalidArgument, Tensor, registry  # noqa: E402
from wasmrpc_guest.registry import Wire  # noqa: E402


def load(example):
    """Imports examples/python/EXAMPLE/app.py into a fresh registry; returns (module, registry)."""
    registry.REGISTRY = registry.Registry()
    spec = importlib.util.spec_from_file_location(f"{example}_app", HERE.parent / example / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, registry.REGISTRY


@pytest.fixture
def softmax():
    return load("softmax")


@pytest.fixture
def strings():
    return load("strings")


def close(got, want):
    return len(got) == len(want) and all(abs(g - w) < 1e-6 for g, w in zip(got, want))


def test_each_row_sums_to_one(softmax):
    app, reg = softmax
    y = app.softmax(Tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype="float32"))
    assert y.shape == (2, 3)
    assert close(y.flat(), [0.09003057, 0.24472848, 0.66524094, 1 / 3, 1 / 3, 1 / 3])
    (out,) = reg.call("softmax", [Wire("f32", [2], struct.pack("<2f", 0.0, 0.0))])
    assert struct.unpack("<2f", out.data) == (0.5, 0.5)


def test_large_inputs_do_not_overflow_and_nan_spreads(softmax):
    app, _ = softmax
    assert close(app.softmax(Tensor([1000.0, 1000.0, -1000.0])).flat(), [0.5, 0.5, 0.0])
    assert all(math.isnan(v) for v in app.softmax(Tensor([1.0, math.nan])).flat())
    assert all(math.isnan(v) for v in app.softmax(Tensor([-math.inf, -math.inf])).flat())


def test_any_rank_and_empty_rows(softmax):
    app, _ = softmax
    assert close(app.softmax(Tensor([[[0.0, 0.0]], [[5.0, 5.0]]])).flat(), [0.5] * 4)
    assert app.softmax(Tensor([], shape=[3, 0])).shape == (3, 0)


def test_a_scalar_is_invalid_argument(softmax):
    app, reg = softmax
    with pytest.raises(InvalidArgument):
        app.softmax(Tensor(1.0))
    with pytest.raises(InvalidArgument, match="rank 1 or more"):
        reg.call("softmax", [Wire("f32", [], struct.pack("<f", 1.0))])


def test_upper_and_length(strings):
    app, reg = strings
    s = Tensor([["hello", "Wörld"], ["", "straße"]], dtype="string")
    assert app.upper(s).tolist() == [["HELLO", "WÖRLD"], ["", "STRASSE"]]
    assert app.length(Tensor(["abc", "日本語", ""], dtype="string")).flat() == [3, 3, 0]
    (out,) = reg.call("length", [Wire("bytes", [], b"\x02\x00\x00\x00hi")])
    assert (out.dtype, out.shape, out.data) == ("i64", [], struct.pack("<q", 2))
    assert [s.name for s in reg.signatures()] == ["upper", "length"]

"""What the tritonclient tests (sync and aio) share: the add example's datatypes with inputs whose
sums numpy knows, input builders, and checks of how an output came back."""

import json
import urllib.error
import urllib.request

import ml_dtypes
import numpy as np
import tritonclient.http as httpclient

# Every numeric datatype of the add example: (model, datatype, a, b). Integer sums wrap around (as
# numpy's do), float sums are IEEE 754 in the datatype itself.
ADD_CASES = [
    ("add_int8", "INT8", np.array([-128, 127, 5, -3], np.int8), np.array([-1, 1, 7, 3], np.int8)),
    ("add_int16", "INT16", np.array([-32768, 32767, 9], np.int16), np.array([-1, 1, -9], np.int16)),
    (
        "add_int32",
        "INT32",
        np.array([-(2**31), 2**31 - 1, 4], np.int32),
        np.array([-1, 1, 5], np.int32),
    ),
    (
        "add_int64",
        "INT64",
        np.array([-(2**63), 2**63 - 1, 6], np.int64),
        np.array([-1, 1, 7], np.int64),
    ),
    (
        "add_bool",
        "BOOL",
        np.array([True, False, True, False]),
        np.array([True, True, False, False]),
    ),
    ("add_uint8", "UINT8", np.array([255, 0, 17], np.uint8), np.array([1, 0, 3], np.uint8)),
    ("add_uint16", "UINT16", np.array([65535, 1, 2], np.uint16), np.array([1, 2, 3], np.uint16)),
    ("add_uint32", "UINT32", np.array([2**32 - 1, 7], np.uint32), np.array([2, 8], np.uint32)),
    (
        "add_uint64",
        "UINT64",
        np.array([2**64 - 1, 2**63, 5], np.uint64),
        np.array([2, 2**62, 6], np.uint64),
    ),
    (
        "add_float16",
        "FP16",
        np.array([0.5, 1.5, -2.25, 65504], np.float16),
        np.array([0.25, 0.1, 1, -1], np.float16),
    ),
    (
        "add_float32",
        "FP32",
        np.array([0.1, 1e30, -3.5, 16777216], np.float32),
        np.array([0.2, 1e30, 0.25, 1], np.float32),
    ),
    (
        "add_float64",
        "FP64",
        np.array([0.1, 1e300, -3.5], np.float64),
        np.array([0.2, 1e300, 2**-1074], np.float64),
    ),
]

# bfloat16 goes only as binary data: tritonclient 2.73 refuses `binary_data=False` for BF16 and
# takes ml_dtypes.bfloat16 arrays (np.float32 truncation is refused since r26.06).
BF16_CASE = (
    "add_bfloat16",
    "BF16",
    np.array([1, 2.5, -0.125, 3e38], ml_dtypes.bfloat16),
    np.array([1, 0.5, 0.125, 3e38], ml_dtypes.bfloat16),
)


def tensor(name, array, datatype, binary, module=httpclient):
    """An input named `name` holding `array`, as binary data or as JSON."""
    t = module.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array, binary_data=binary)
    return t


def output(name="output", binary=True, module=httpclient):
    return module.InferRequestedOutput(name, binary_data=binary)


def assert_came_as(result, name, binary):
    """`name` came back as binary data after the JSON header, or as JSON `data`."""
    out = result.get_output(name)
    assert out is not None, f"no output {name!r} in {result.get_response()}"
    size = (out.get("parameters") or {}).get("binary_data_size")
    if binary:
        assert size is not None and "data" not in out, (
            f"output {name!r} should be binary data (binary_tensor_data extension), got {out}"
        )
    else:
        assert size is None and "data" in out, f"output {name!r} should be JSON data, got {out}"


def assert_same(got, want):
    """Same dtype, shape and values, bit for bit (NaN-free inputs)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(got, want), (got, want)


def raw(url, method, path, body=None, headers=None):
    """A request with urllib, outside every client: (status, headers, body bytes)."""
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def server_error(url, method, path, body=None):
    """The server's own `{"error": "..."}` text and status for a request."""
    status, _, data = raw(url, method, path, body)
    return status, json.loads(data)["error"]

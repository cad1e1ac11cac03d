"""What the v2 client tests share (tritonclient's HTTP and gRPC clients, sync and aio, and
KServe's gRPC client): the add example's datatypes with inputs whose sums numpy knows, the
tensors every suite sends, input builders, checks of how an output came back, and requests made
outside every client (to compare answers, and to set up a tenant's models)."""

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


# The int32 inputs of `add` most tests send, and their sum.
A = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
B = np.array([[10, 20, 30], [40, 50, 60]], np.int32)

# BYTES through the strings example: `upper` upper-cases each element, `length` counts its
# characters.
WORDS = np.array([[b"hello", "wörld".encode()], [b"", "straße".encode()]], dtype=np.object_)
UPPER_WORDS = ["HELLO", "WÖRLD", "", "STRASSE"]
WORD_LENGTHS = np.array([[5, 5], [0, 6]], np.int64)


def sixteen_mib_pair():
    """Two float32 tensors of 16 MiB each (4M elements) for `add_float32`."""
    a = np.arange(4 << 20, dtype=np.float32)
    return a, (a * np.float32(0.5)).astype(np.float32)


def tensor(name, array, datatype, binary=None, module=httpclient):
    """An input named `name` holding `array`, as binary data or as JSON (the HTTP clients), or
    as the gRPC clients send it (`binary=None`)."""
    t = module.InferInput(name, list(array.shape), datatype)
    if binary is None:
        t.set_data_from_numpy(array)
    else:
        t.set_data_from_numpy(array, binary_data=binary)
    return t


def add_inputs(binary_a=None, binary_b=None, module=httpclient):
    """`a` = A and `b` = B for `add`, each as binary data or JSON (see `tensor`)."""
    return [tensor("a", A, "INT32", binary_a, module), tensor("b", B, "INT32", binary_b, module)]


def as_text(values):
    """BYTES elements as `str` (clients give `bytes` or `str`)."""
    return [x.decode() if isinstance(x, bytes) else x for x in np.asarray(values).flatten()]


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


def bearer(key):
    """The metadata (or headers) that carry a tenant's key."""
    return {"authorization": f"Bearer {key}"}


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


def grpc_code(error):
    """The gRPC status name of a client's error: `NOT_FOUND`... (tritonclient's
    InferenceServerException says `StatusCode.NOT_FOUND`; grpc's RpcError has `code()`)."""
    code = error.code() if callable(getattr(error, "code", None)) else error.status()
    return str(getattr(code, "name", code)).removeprefix("StatusCode.")


def register(url, key, name, wasm, export):
    """Register `wasm` (its `export`) as `name` over HTTP, for the tenant of `key` (`None`: the
    server has no keys)."""
    headers = bearer(key) if key else {}
    status, _, data = raw(url, "PUT", f"/v1/methods/{name}?export={export}", wasm, headers)
    assert status in (200, 201), data


def unregister(url, key, name):
    status, _, data = raw(url, "DELETE", f"/v1/methods/{name}", None, bearer(key))
    assert status == 200, data


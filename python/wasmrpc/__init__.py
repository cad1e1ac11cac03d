"""wasmrpc for Python: call tensor functions hosted as WebAssembly components, with numpy
arrays as tensors, through TensorFlow's RPC API (:mod:`wasmrpc.rpc`).

::

    import numpy as np
    from wasmrpc import rpc

    client = rpc.Client.create("http", "127.0.0.1:8080", name="demo")
    a = np.array([1, 2], dtype=np.int32)
    print(client.add_blocking(a, a * 10))  # [11 22]

Errors are exceptions named after the canonical codes (:mod:`wasmrpc.errors`), all under
:class:`RpcError`.
"""

from . import errors, rpc
from ._native import __version__
from ._tensors import DTYPES, TensorSpec
from .errors import (
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    Code,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    RpcError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)

__all__ = [
    "__version__",
    "rpc",
    "errors",
    "TensorSpec",
    "DTYPES",
    "Code",
    "RpcError",
    "OpError",
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
]

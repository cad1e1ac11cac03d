"""Element-wise sum of two float32 tensors of the same shape: the Python twin of examples/add's
`add_float32`, for the issue-33 rows of host/benches/run.sh (bench-only, not an example).

Built by host/benches/guests/build.sh: `wasmrpc build host/benches/guests/py_add/app.py`.
"""

import array
import operator

from wasmrpc_guest import InvalidArgument, Tensor, function


@function
def add(a: Tensor["float32"], b: Tensor["float32"]) -> Tensor["float32"]:
    """Element-wise sum of two float32 tensors of the same shape (IEEE 754)."""
    if a.shape != b.shape:
        raise InvalidArgument(f"shapes differ: {list(a.shape)} and {list(b.shape)}")
    x, y = a.array(), b.array()
    return Tensor(array.array("f", map(operator.add, x, y)), shape=a.shape)

"""The floor of a Python call (bench-only): `noop` takes the same two float32 tensors as the `add`
guests, reads neither and returns a scalar 0, so its latency is what a fresh CPython instance, the
runtime's entry and the arguments' lifting cost without the SDK's conversion or any loop
(docs/benchmarks.md, issue 33, "The floor of a call").

Build: `wasmrpc build host/benches/guests/py_noop/app.py`.
"""

from wasmrpc_guest import Tensor, function


@function
def noop(a: Tensor["float32"], b: Tensor["float32"]) -> Tensor["float32", []]:
    """Returns 0 without reading its arguments: the floor of a Python call."""
    return Tensor([0.0], shape=[])

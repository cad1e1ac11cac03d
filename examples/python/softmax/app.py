"""Softmax of a float32 tensor along its last axis: the Python twin of examples/softmax (Rust).

Exports `softmax(x: float32, any rank >= 1) -> output: float32` of the same shape. Each slice along
the last axis becomes exp(x - max) / sum(exp(x - max)): subtracting the slice's maximum first keeps
exp from overflowing. A slice containing NaN or +inf, or made only of -inf, gives NaN, as the Rust
twin and TensorFlow do. A scalar has no axis to normalise over: invalid-argument.

Build (README.md beside this file): componentize-py -d wit/tensor.wit -w tensor-function
componentize app -p examples/python/softmax -p guest-sdk/python/src -o softmax.wasm
"""

import math

from wasmrpc_guest import InvalidArgument, Tensor, function


@function
def softmax(x: Tensor["float32"]) -> Tensor["float32"]:
    """Softmax along the last axis of a float32 tensor of rank 1 or more, computed stably."""
    if x.ndim == 0:
        raise InvalidArgument("softmax needs a tensor of rank 1 or more, got a scalar")
    values = x.flat()
    n = x.shape[-1]
    out = []
    for start in range(0, len(values), n) if n else ():
        row = values[start:start + n]
        top = max(row)
        if math.isnan(top) or top == math.inf or top == -math.inf:
            out.extend([math.nan] * n)
            continue
        exps = [math.exp(v - top) for v in row]
        total = sum(exps)
        out.extend(e / total for e in exps)
    return Tensor(out, shape=x.shape)

"""{{name}}: a wasmrpc function in Python, built into a WebAssembly component by `wasmrpc build`
(componentize-py; the standard library is there, numpy is not).

Each `@function` is a method; its annotations are its signature and its docstring its doc.
"""

from wasmrpc_guest import Tensor, function


@function
def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]:
    """Multiplies every element of a float32 tensor by a scalar factor."""
    f = factor.item()
    return Tensor([v * f for v in x.flat()], shape=x.shape)

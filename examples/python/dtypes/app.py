"""Every dtype through the SDK inside a real component: `roundtrip_<dtype>(x) -> output`, which
returns its argument rebuilt from nested Python lists (so each element is decoded into a Python
value and encoded back), shape kept. check.mjs sends every dtype's edge values through it.

Build: see examples/python/README.md.
"""

from wasmrpc_guest import Tensor, function
from wasmrpc_guest.dtypes import ALL


def _roundtrip(dtype):
    def roundtrip(x):
        return Tensor(x.tolist(), shape=x.shape)

    roundtrip.__doc__ = f"Returns a {dtype} tensor unchanged, through Python values."
    roundtrip.__annotations__ = {"x": Tensor[dtype], "return": Tensor[dtype]}
    return function(name=f"roundtrip_{dtype}")(roundtrip)


for _dtype in ALL:
    _roundtrip(_dtype.name)

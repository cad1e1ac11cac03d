"""Write wasmrpc tensor functions in Python and build them into WebAssembly components with
componentize-py.

    from wasmrpc_guest import function, Tensor

    @function
    def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]:
        \"\"\"Multiplies every element by a scalar factor.\"\"\"
        f = factor.item()
        return Tensor([v * f for v in x.flat()], shape=x.shape)

| module | what |
|---|---|
| tensor.py | ``Tensor`` values and the ``Tensor[dtype, shape]`` annotation |
| dtypes.py | the WIT dtypes and their little-endian wire encoding |
| signature.py | signatures from annotations and docstrings |
| errors.py | one exception per WIT error case; Python's exceptions mapped onto them |
| registry.py | ``@function`` and the dispatch of ``call(name, args)`` |
| component.py | ``Method``, the componentize-py export (only importable inside a build) |
| log.py | log lines to the host |

README.md (next to pyproject.toml) says how to build a component.
"""

from .errors import (Error, FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     ResourceExhausted, Unimplemented)
from .registry import function
from .tensor import Tensor

__all__ = ["function", "Tensor", "Error", "InvalidArgument", "FailedPrecondition", "OutOfRange",
           "Unimplemented", "Internal", "ResourceExhausted", "NotFound"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # `from wasmrpc_guest import Method`: the componentize-py export, for an app module whose
    # functions are decorated in other modules (``@function`` gives ``Method`` only to the module
    # it decorates in). Imported lazily: it exists only while componentize-py builds.
    if name == "Method":
        from .component import Method
        return Method
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

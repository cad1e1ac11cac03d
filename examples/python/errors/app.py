"""Errors raised in a real component: `fail(kind)` raises the exception named by its string
argument, so check.mjs can see every row of the SDK's error table (guest-sdk/python/README.md)
arrive as the WIT error case it promises, and an unexpected exception answer `internal` instead of
trapping.

Build: see examples/python/README.md.
"""

import wasmrpc_guest as wg
from wasmrpc_guest import Tensor, function

RAISES = {
    "InvalidArgument": lambda: wg.InvalidArgument("bad value"),
    "FailedPrecondition": lambda: wg.FailedPrecondition("not now"),
    "OutOfRange": lambda: wg.OutOfRange("past the end"),
    "Unimplemented": lambda: wg.Unimplemented("later"),
    "Internal": lambda: wg.Internal("a bug"),
    "ResourceExhausted": lambda: wg.ResourceExhausted("too big"),
    "NotFound": lambda: wg.NotFound("no such row"),
    "ValueError": lambda: ValueError("x must be positive"),
    "TypeError": lambda: TypeError("not a number"),
    "IndexError": lambda: IndexError("list index out of range"),
    "KeyError": lambda: KeyError("k"),
    "NotImplementedError": lambda: NotImplementedError(),
    "MemoryError": lambda: MemoryError(),
    "ZeroDivisionError": lambda: ZeroDivisionError("division by zero"),
}


@function
def fail(kind: Tensor["string", []]) -> Tensor["int8"]:
    """Raises the exception named by `kind`; `none` returns [1]."""
    if kind.item() == "none":
        return [1]
    raise RAISES[kind.item()]()

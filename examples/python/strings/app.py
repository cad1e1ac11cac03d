"""String tensors: the Python twin of examples/strings (Rust).

Exports `upper(s: string) -> output: string`, the Unicode upper case of every element, shape
preserved, and `length(s: string) -> output: int64`, the number of Unicode code points of every
element. An element that is not valid UTF-8 is refused by the SDK with invalid-argument naming the
argument, before either function runs.

Build: see examples/python/README.md.
"""

from wasmrpc_guest import Tensor, function


@function
def upper(s: Tensor["string"]) -> Tensor["string"]:
    """Upper-cases every string of a string tensor (full Unicode case mapping); the shape is kept."""
    return Tensor([v.upper() for v in s.flat()], shape=s.shape)


@function
def length(s: Tensor["string"]) -> Tensor["int64"]:
    """The length of every string of a string tensor, in Unicode scalar values (not bytes)."""
    return Tensor([len(v) for v in s.flat()], shape=s.shape)

"""A method's signature, derived from a Python function's annotations and docstring.

    def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]:
        "Multiplies every element by a scalar factor."

gives the method ``scale`` with inputs ``x`` (float32, any shape) and ``factor`` (float32 scalar),
one output ``output`` (float32, any shape) and that doc. A ``tuple[...]`` return annotation is
several outputs (``output_0``, ``output_1``... unless named). Anything the WIT cannot express (a
parameter without a ``Tensor[...]`` annotation, ``*args``, defaults, keyword-only parameters) is a
``TypeError`` when the decorator runs, naming the parameter: at build time, not at the first call.
"""

from __future__ import annotations

import inspect
import re
import typing
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

from .dtypes import DType
from .tensor import Shape, Tensor, TensorType

# The one rule the server and clients share for method names (proto/src/names.rs).
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")


@dataclass(frozen=True)
class Spec:
    """The declared type of one input or output (the WIT ``tensor-spec``)."""

    name: str
    dtype: DType
    shape: Shape


@dataclass(frozen=True)
class Signature:
    """What one method takes and returns (the WIT ``method-signature``)."""

    name: str
    inputs: Tuple[Spec, ...]
    outputs: Tuple[Spec, ...]
    doc: str


def derive(func: Callable, name: Optional[str] = None,
           outputs: Optional[Sequence[str]] = None) -> Signature:
    """The signature of ``func``; ``name`` and ``outputs`` override the method and output names."""
    fname = getattr(func, "__qualname__", repr(func))
    method = func.__name__ if name is None else name
    if not isinstance(method, str) or not NAME_RULE.fullmatch(method):
        raise TypeError(
            f"method name {method!r} of {fname}: 1 to 128 of A-Z a-z 0-9 _ - . starting with a "
            "letter or digit (pass name=... to @function to choose another)")
    # eval_str resolves `from __future__ import annotations` strings in the function's module.
    annotations = inspect.get_annotations(func, eval_str=True)
    inputs = []
    for p in inspect.signature(func).parameters.values():
        where = f"parameter `{p.name}` of {fname}"
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"{where}: a method takes plain positional parameters only")
        if p.default is not p.empty:
            raise TypeError(f"{where}: a method's parameters have no defaults")
        inputs.append(Spec(p.name, *_tensor_type(annotations.get(p.name, p.empty), where)))
    if "return" not in annotations:
        raise TypeError(f"{fname}: annotate the return, e.g. -> Tensor['float32']")
    returned = annotations["return"]
    if typing.get_origin(returned) is tuple:
        types = typing.get_args(returned)
        if not types or Ellipsis in types:
            raise TypeError(f"{fname}: a tuple return lists each output, e.g. "
                            "tuple[Tensor['float32'], Tensor['int64']]")
        default = [f"output_{i}" for i in range(len(types))]
    else:
        types = (returned,)
        default = ["output"]
    names = list(default if outputs is None else outputs)
    if len(names) != len(types) or len(set(names)) != len(names) or not all(
            isinstance(n, str) and n for n in names):
        raise TypeError(f"{fname}: outputs= needs {len(types)} distinct names, got {outputs!r}")
    specs = [Spec(n, *_tensor_type(t, f"output `{n}` of {fname}")) for n, t in zip(names, types)]
    return Signature(method, tuple(inputs), tuple(specs), inspect.getdoc(func) or "")


def _tensor_type(annotation: object, where: str) -> Tuple[DType, Shape]:
    if isinstance(annotation, TensorType):
        return annotation.dtype, annotation.shape
    if annotation is Tensor:
        raise TypeError(f"{where}: Tensor needs a dtype, e.g. Tensor['float32']")
    if annotation is inspect.Parameter.empty:
        raise TypeError(f"{where}: annotate it Tensor[dtype] or Tensor[dtype, shape]")
    raise TypeError(f"{where}: annotate it Tensor[dtype] or Tensor[dtype, shape], "
                    f"not {annotation!r}")

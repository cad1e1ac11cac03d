"""The glue to componentize-py: ``Method``, the implementation of the exported WIT interface
``wasmrpc:tensor/method`` over the registry of ``@function``-decorated functions.

componentize-py (0.25.1) generates the bindings package ``wit_world`` for the world
``tensor-function`` and, for the exported interface ``method``, looks for a class named ``Method``
in the app module (the one named on its command line) implementing ``wit_world.exports.Method``:
``signatures()`` and ``call(name, args)``, errors raised as ``componentize_py_types.Err(...)``.
``@function`` puts this class into the app module, so the app module needs no class of its own.

Importing this module outside componentize-py (plain CPython) fails with ``ModuleNotFoundError``
for ``wit_world``: there are no bindings there.
"""

from __future__ import annotations

from typing import List

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from .errors import Error
from .registry import REGISTRY, Wire
from .signature import Spec

# WIT case name (`invalid-argument`) -> the generated variant case class (Error_InvalidArgument).
_ERROR_CASES = {
    "invalid-argument": types.Error_InvalidArgument,
    "failed-precondition": types.Error_FailedPrecondition,
    "out-of-range": types.Error_OutOfRange,
    "unimplemented": types.Error_Unimplemented,
    "internal": types.Error_Internal,
    "resource-exhausted": types.Error_ResourceExhausted,
    "not-found": types.Error_NotFound,
}


def _dtype(wit: str) -> "types.Dtype":
    # The generated enum's members are the WIT cases upper-cased: `bf16` -> Dtype.BF16.
    return types.Dtype[wit.upper()]


# Each generated enum member and its WIT case, both ways, made once: `Dtype.F32.name` and
# `Dtype[...]` are Python-level calls, paid per tensor of every call otherwise.
_WIT_OF = {d: d.name.lower() for d in types.Dtype}
_DTYPE_OF = {wit: d for d, wit in _WIT_OF.items()}


def _spec(spec: Spec) -> "types.TensorSpec":
    shape = None if spec.shape is None else list(spec.shape)
    return types.TensorSpec(name=spec.name, dtype=_dtype(spec.dtype.wit), shape=shape)


class Method(exports.Method):
    """The exported ``method`` interface, over ``registry.REGISTRY``."""

    def signatures(self) -> List["types.MethodSignature"]:
        return [
            types.MethodSignature(name=s.name, inputs=[_spec(i) for i in s.inputs],
                                  outputs=[_spec(o) for o in s.outputs], doc=s.doc)
            for s in REGISTRY.signatures()
        ]

    def call(self, name: str, args: List["types.Tensor"]) -> List["types.Tensor"]:
        wires = [Wire(_WIT_OF[a.dtype], a.shape, a.data) for a in args]
        try:
            outputs = REGISTRY.call(name, wires)
        except Error as e:
            raise Err(_ERROR_CASES[e.code](e.message)) from None
        return [types.Tensor(dtype=_DTYPE_OF[o.dtype], shape=o.shape, data=o.data)
                for o in outputs]

"""The ``@function`` decorator and the registry of decorated functions: what ``signatures()`` lists
and what ``call(name, args)`` dispatches to, in plain Python terms (``Wire`` tensors, ``Error``
exceptions). ``component.py`` puts the componentize-py bindings on top; the tests use this
directly, without them.

The behaviour and messages follow the Rust SDK (guest-sdk/src/__private.rs) so that a caller sees
the same answers whichever language a function was written in.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from math import prod
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import dtypes
from .errors import (Error, FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     ResourceExhausted, Unimplemented, code_of)
from .signature import Signature, Spec, derive
from .tensor import Tensor, matches, shape_text

_BY_CODE = {c.code: c for c in (InvalidArgument, FailedPrecondition, OutOfRange, Unimplemented,
                                Internal, ResourceExhausted, NotFound)}


@dataclass
class Wire:
    """A tensor as the WIT carries it: the WIT dtype case (``f32``...), the shape, the data bytes."""

    dtype: str
    shape: List[int]
    data: bytes


class Registry:
    """The methods of one component, in the order they were decorated."""

    def __init__(self) -> None:
        self._methods: Dict[str, Tuple[Signature, Callable]] = {}

    def add(self, func: Callable, name: Optional[str] = None,
            outputs: Optional[Sequence[str]] = None) -> Signature:
        """Registers ``func``; a second method of the same name is a ``TypeError``."""
        sig = derive(func, name, outputs)
        if sig.name in self._methods:
            raise TypeError(f"two methods are named {sig.name!r}; pass name=... to one of them")
        self._methods[sig.name] = (sig, func)
        return sig

    def signatures(self) -> List[Signature]:
        """Every method's signature, in decoration order."""
        return [sig for sig, _ in self._methods.values()]

    def call(self, name: str, args: Sequence[Wire]) -> List[Wire]:
        """Calls method ``name``: decodes and checks ``args``, runs the function, checks and
        encodes its outputs. Raises ``Error`` (a subclass per WIT case) for every failure."""
        entry = self._methods.get(name)
        if entry is None:
            raise NotFound(f"no method `{name}` in this component; it has: "
                           + ", ".join(self._methods))
        sig, func = entry
        try:
            values = _arguments(sig, args)
            result = func(*values)
            return _outputs(sig, result)
        except Error:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure must become a WIT error
            code, message = code_of(exc)
            if code == "internal":
                # The host captures stderr into the call's log: the traceback is where the bug is.
                traceback.print_exc(file=sys.stderr)
            raise _BY_CODE[code](message) from exc


REGISTRY = Registry()
"""The registry ``@function`` adds to and the component exports."""


def _arguments(sig: Signature, args: Sequence[Wire]) -> List[Tensor]:
    if len(args) != len(sig.inputs):
        noun = "argument" if len(sig.inputs) == 1 else "arguments"
        raise InvalidArgument(
            f"method {sig.name} takes {len(sig.inputs)} {noun}, got {len(args)}")
    return [_argument(spec, arg) for spec, arg in zip(sig.inputs, args)]


def _argument(spec: Spec, arg: Wire) -> Tensor:
    # The messages' "argument `x`" is only formatted on a failure: this runs for every argument.
    if arg.dtype != spec.dtype.wit:
        raise InvalidArgument(f"argument `{spec.name}`: expected {spec.dtype.name}, "
                              f"got {dtypes.from_wit(arg.dtype).name}")
    shape = tuple(arg.shape)
    try:
        values = dtypes.decode(spec.dtype, arg.data, prod(shape))
    except Error as e:
        raise type(e)(f"argument `{spec.name}`: {e.message}") from None
    if not matches(shape, spec.shape):
        raise InvalidArgument(f"argument `{spec.name}`: expected shape "
                              f"{shape_text(spec.shape)}, got {shape_text(shape)}")
    return Tensor._raw(spec.dtype, shape, values)


def _outputs(sig: Signature, result: object) -> List[Wire]:
    if len(sig.outputs) == 1:
        results = (result,)
    elif isinstance(result, (tuple, list)) and len(result) == len(sig.outputs):
        results = tuple(result)
    else:
        raise Internal(f"method {sig.name} declares {len(sig.outputs)} outputs; return a tuple "
                       f"of {len(sig.outputs)}, not {type(result).__name__}")
    return [_output(sig.name, spec, r) for spec, r in zip(sig.outputs, results)]


def _output(method: str, spec: Spec, value: object) -> Wire:
    try:
        # A plain value (list, scalar, array, memoryview) takes the declared dtype.
        t = value if isinstance(value, Tensor) else Tensor(value, dtype=spec.dtype)
        if t._dtype is not None and t._dtype.wit != spec.dtype.wit:
            raise Internal(f"method {method} returned output `{spec.name}` of dtype {t.dtype}, "
                           f"but declares {spec.dtype.name}")
        if not matches(t.shape, spec.shape):
            raise Internal(f"method {method} returned output `{spec.name}` of shape "
                           f"{shape_text(t.shape)}, "
                           f"but declares {shape_text(spec.shape)}")
        data = dtypes.encode(spec.dtype, t._values)
    except Internal:
        raise
    except Error as e:
        raise type(e)(f"output `{spec.name}`: {e.message}") from None
    except (ValueError, TypeError, OverflowError) as e:
        # A value the function built that does not fit its declaration is the function's bug.
        raise Internal(f"method {method}, output `{spec.name}`: {e}") from None
    return Wire(spec.dtype.wit, list(t.shape), data)


def function(func: Optional[Callable] = None, *, name: Optional[str] = None,
             outputs: Optional[Sequence[str]] = None):
    """Makes a function a method of this component; the function itself is returned unchanged, so
    it stays callable (and testable) as plain Python.

        @function
        def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]: ...

        @function(name="max", outputs=["values", "indices"])
        def max_(x: Tensor["float32"]) -> tuple[Tensor["float32"], Tensor["int64"]]: ...

    The signature comes from the annotations and the docstring (signature.py). When the
    componentize-py bindings are importable (while ``componentize-py`` builds the component),
    the function's module also gets the ``Method`` class componentize-py looks for, unless it
    defines one itself, so an ``app.py`` needs nothing but this decorator.
    """
    def register(f: Callable) -> Callable:
        REGISTRY.add(f, name, outputs)
        _export_from(sys.modules.get(f.__module__))
        return f

    return register if func is None else register(func)


def _export_from(module: object) -> None:
    if module is None or hasattr(module, "Method"):
        return
    try:
        from .component import Method
    except ModuleNotFoundError as e:
        if e.name in ("wit_world", "componentize_py_types") or (e.name or "").startswith(
                "wit_world."):
            return  # plain CPython (tests, scripts): there are no bindings to export through
        raise
    setattr(module, "Method", Method)

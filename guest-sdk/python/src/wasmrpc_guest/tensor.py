"""``Tensor``: the value a method takes and returns, and ``Tensor[...]``, the annotation that
declares its dtype and shape.

A tensor holds a dtype, a shape (a tuple, outermost first; ``()`` is a scalar) and its elements in
row-major order as a flat sequence of Python values. An argument's numeric elements are a
``memoryview`` over the bytes the host wrote (read in place, no copy on a little-endian host); a
tensor a function builds holds whatever flat sequence it was given. Users never see wire bytes:
they read ``flat()``, ``tolist()``, ``item()``, ``array()`` or ``view()``, and build from nested
lists, scalars, ``array.array``, ``memoryview`` or any other buffer.
"""

from __future__ import annotations

import array
from math import prod
from typing import Any, Optional, Sequence, Tuple

from . import dtypes
from .dtypes import DType

Shape = Optional[Tuple[Optional[int], ...]]
"""A declared shape: ``None`` for any rank, else one entry per dimension, ``None`` for any size."""

# The dtype a buffer's format says, for tensors built from a buffer without a dtype.
_BY_FORMAT = {d.fmt: d for d in dtypes.ALL if d.native}


class TensorType:
    """What ``Tensor["float32", [None, 3]]`` evaluates to: a declared dtype and shape.

    Calling it builds a tensor of that dtype: ``Tensor["int32"]([1, 2])``.
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: DType, shape: Shape):
        self.dtype = dtype
        self.shape = shape

    def __call__(self, data: Any, shape: Optional[Sequence[int]] = None) -> "Tensor":
        return Tensor(data, shape=shape, dtype=self.dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorType) and (self.dtype, self.shape) == (other.dtype,
                                                                               other.shape))

    def __hash__(self) -> int:
        return hash((self.dtype, self.shape))

    def __repr__(self) -> str:
        if self.shape is None:
            return f"Tensor[{self.dtype.name!r}]"
        return f"Tensor[{self.dtype.name!r}, {shape_text(self.shape)}]"


def parse_shape(shape: Any) -> Shape:
    """A declared shape from an annotation: ``None`` (any rank) or a list/tuple of dimensions,
    each an int >= 0 (fixed), or ``None`` / ``-1`` (any size, the WIT's ``none``)."""
    if shape is None:
        return None
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"a shape is a list of dimensions or None, not {shape!r}")
    dims = []
    for d in shape:
        if d is None or d == -1:
            dims.append(None)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            dims.append(d)
        else:
            raise TypeError(f"a dimension is an int >= 0, or None / -1 for any size, not {d!r}")
    return tuple(dims)


def shape_text(shape: Sequence[Optional[int]]) -> str:
    """A shape as the Rust SDK writes it in messages: ``[_, 3]``."""
    return "[" + ", ".join("_" if d is None else str(d) for d in shape) + "]"


def matches(shape: Tuple[int, ...], declared: Shape) -> bool:
    """Whether a shape matches a declared one: same rank and every fixed dimension equal."""
    return declared is None or (len(declared) == len(shape) and all(
        want is None or want == got for want, got in zip(declared, shape)))


class Tensor:
    """A dense tensor: ``dtype`` (a name, or None until a signature decides), ``shape``, elements.

    ``Tensor(data, shape=None, dtype=None)`` builds one from a nested list, a scalar, a string (for
    the string dtypes), an ``array.array``, a ``memoryview`` or another tensor. ``shape`` reshapes
    flat data (the element count must agree); ``dtype`` may be left out when the tensor is returned
    from a method, whose signature then decides it.
    """

    __slots__ = ("_dtype", "_shape", "_values")

    def __class_getitem__(cls, key: Any) -> TensorType:
        if isinstance(key, tuple):
            if len(key) != 2:
                raise TypeError("Tensor[dtype] or Tensor[dtype, shape], e.g. Tensor['float32', []]")
            return TensorType(dtypes.lookup(key[0]), parse_shape(key[1]))
        return TensorType(dtypes.lookup(key), None)

    def __init__(self, data: Any, shape: Optional[Sequence[int]] = None,
                 dtype: Any = None):
        dtype = dtypes.lookup(dtype) if dtype is not None else None
        values, own_shape, own_dtype = _flatten(data, dtype)
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            if any(d < 0 for d in shape) or prod(shape) != len(values):
                raise ValueError(
                    f"shape {list(shape)} needs {prod(shape)} elements, got {len(values)}")
        self._dtype = dtype or own_dtype
        self._shape = own_shape if shape is None else shape
        self._values = values

    @classmethod
    def _raw(cls, dtype: Optional[DType], shape: Tuple[int, ...], values: Sequence[Any]) -> "Tensor":
        """A tensor over an existing flat sequence, unchecked (the SDK's decoder uses it)."""
        t = cls.__new__(cls)
        t._dtype, t._shape, t._values = dtype, shape, values
        return t

    @property
    def dtype(self) -> Optional[str]:
        """The dtype's name (``float32``...), or None for a tensor built without one."""
        return self._dtype.name if self._dtype else None

    @property
    def shape(self) -> Tuple[int, ...]:
        """Dimensions, outermost first; ``()`` for a scalar."""
        return self._shape

    @property
    def ndim(self) -> int:
        """The rank: ``len(shape)``."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """The number of elements (1 for a scalar)."""
        return len(self._values)

    def flat(self) -> list:
        """The elements in row-major order, as a new list."""
        v = self._values
        return v.tolist() if isinstance(v, memoryview) else list(v)

    def tolist(self) -> Any:
        """The elements as nested lists, one level per dimension (a scalar: the element)."""
        flat = self.flat()
        if not self._shape:
            return flat[0]
        return _nest(flat, self._shape)

    def item(self) -> Any:
        """The only element; ``ValueError`` unless the tensor has exactly one."""
        if len(self._values) != 1:
            raise ValueError(f"item() needs one element, the tensor has {len(self._values)}")
        return self._values[0]

    def array(self) -> array.array:
        """The elements as a new flat ``array.array`` (bool as ``'B'``, float16 and bfloat16
        widened to ``'f'``, exactly); ``TypeError`` for strings."""
        d = self._dtype or _infer(self._values)
        if d is None or d.is_string:
            raise TypeError(f"no array.array for dtype {self.dtype}; use flat() or tolist()")
        code = {"?": "B", "e": "f", None: "f"}.get(d.fmt, d.fmt)
        v = self._values
        if isinstance(v, memoryview) and v.format == code:
            return array.array(code, v.tobytes())
        return array.array(code, [int(x) for x in v] if code == "B" else v)

    def view(self) -> memoryview:
        """A read-only ``memoryview`` of the elements with this tensor's shape (1-D when a
        dimension is 0, which a memoryview cannot express). Only for dtypes with a native format:
        bool, the integers, float32, float64; use ``array()`` or ``tolist()`` for the others."""
        d = self._dtype or _infer(self._values)
        if d is None or not d.native:
            raise TypeError(f"dtype {self.dtype} has no memoryview format; use array() or tolist()")
        v = self._values
        if not (isinstance(v, memoryview) and v.format == d.fmt):
            v = memoryview(dtypes.encode(d, v)).cast(d.fmt)
        v = v.toreadonly()
        if 0 in self._shape:
            return v
        return v.cast("B").cast(d.fmt, list(self._shape))

    def reshape(self, shape: Sequence[int]) -> "Tensor":
        """The same elements (not copied) with another shape of the same element count."""
        return Tensor(self, shape=shape)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Tensor) and self._dtype == other._dtype
                and self._shape == other._shape and self.flat() == other.flat())

    __hash__ = None  # mutable contents, like list

    def __repr__(self) -> str:
        return f"Tensor({self.tolist()!r}, shape={list(self._shape)}, dtype={self.dtype!r})"


def _infer(values: Sequence[Any]) -> Optional[DType]:
    return _BY_FORMAT.get(values.format) if isinstance(values, memoryview) else None


def _nest(flat: list, shape: Tuple[int, ...]) -> list:
    """Row-major flat elements as nested lists of ``shape`` (rank >= 1)."""
    if len(shape) == 1:
        return flat
    step = prod(shape[1:])
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _flatten(data: Any, dtype: Optional[DType]):
    """``(flat values, shape, dtype the data says or None)`` of tensor-like ``data``."""
    if isinstance(data, Tensor):
        return data._values, data._shape, data._dtype
    if isinstance(data, str):
        return [data], (), None
    if isinstance(data, (bytes, bytearray)) and dtype is not None and dtype.is_string:
        # One element of a string tensor; elsewhere bytes are a uint8 buffer (below).
        return [bytes(data)], (), None
    if isinstance(data, (list, tuple)):
        flat: list = []
        shape = _shape_of(data)
        _fill(data, shape, 0, flat)
        return flat, shape, None
    try:
        view = memoryview(data)
    except TypeError:
        return [data], (), None  # a scalar: int, float, bool, str...
    if view.ndim == 0:
        return [view.tolist()] if view.format in _BY_FORMAT else [view.tobytes()], (), _infer(view)
    shape = tuple(view.shape)
    try:
        # C-contiguous views of a native format: the same memory, flat, no copy.
        flat_view = view.cast("B").cast(view.format)
        return flat_view, shape, _infer(flat_view)
    except (TypeError, ValueError):
        flat = []
        _fill(view.tolist(), shape, 0, flat)
        return flat, shape, None


def _shape_of(data: Any) -> Tuple[int, ...]:
    """The shape nested lists/tuples claim, read down their first elements."""
    shape = []
    while isinstance(data, (list, tuple)):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return tuple(shape)


def _fill(data: Any, shape: Tuple[int, ...], depth: int, flat: list) -> None:
    """Appends the leaves of nested lists/tuples to ``flat`` in row-major order, checking that
    every level has the length ``shape`` says: a ragged nesting is a ``ValueError``."""
    if not isinstance(data, (list, tuple)) or len(data) != shape[depth]:
        got = len(data) if isinstance(data, (list, tuple)) else "a scalar"
        raise ValueError(
            f"ragged nested list: {got} at depth {depth}, expected {shape[depth]} elements")
    if depth == len(shape) - 1:
        # The innermost level: the leaves go in with one C-level extend, after a C-level look at
        # their types (a Python call per element would cost more than the whole encoding).
        kinds = set(map(type, data))
        if list in kinds or tuple in kinds:
            raise ValueError(f"ragged nested list: a list where depth {depth + 1} holds scalars")
        flat.extend(data)
        return
    for x in data:
        _fill(x, shape, depth + 1, flat)

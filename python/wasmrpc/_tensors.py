"""numpy arrays to and from the wire: the dtype names, :class:`TensorSpec`, and the
``(dtype, shape, data)`` triples the native core takes and gives.

Outputs are numpy views over the bytes of the response (no copy); they are read-only, and
``numpy.array(x)`` makes a writeable copy. String tensors come back as ``object`` arrays of
``bytes``, as TensorFlow's ``.numpy()`` gives them.
"""

from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import numpy as np

from .errors import InvalidArgumentError

#: Every dtype of the WIT package, by its name on the wire (TensorFlow's names).
DTYPES = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "string",
)

_FIXED = {name: np.dtype(name) for name in DTYPES if name not in ("bfloat16", "string")}
_BFLOAT16_HELP = (
    "bfloat16 tensors need the ml_dtypes package, which gives numpy its bfloat16 dtype: "
    "pip install ml_dtypes (or pip install 'wasmrpc[bfloat16]')"
)


def bfloat16() -> np.dtype:
    """numpy's bfloat16 dtype, from ml_dtypes; ImportError saying so when it is missing."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError(_BFLOAT16_HELP) from None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a wire dtype name (``object`` for strings)."""
    if name in _FIXED:
        return _FIXED[name]
    if name == "bfloat16":
        return bfloat16()
    if name == "string":
        return np.dtype(object)
    raise InvalidArgumentError(f"unknown dtype `{name}`; the dtypes are {', '.join(DTYPES)}")


def dtype_name(dtype: Any) -> str:
    """The wire name of a dtype given as a name, a numpy dtype or a type (``np.float32``,
    ``float``, ``str``, ``ml_dtypes.bfloat16``...)."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    if dtype in (str, bytes, np.str_, np.bytes_, object):
        return "string"
    if hasattr(dtype, "as_numpy_dtype"):  # a TensorFlow dtype
        dtype = dtype.as_numpy_dtype
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise InvalidArgumentError(f"{dtype!r} is not a dtype") from None
    return _name_of_numpy(np_dtype)


def _name_of_numpy(np_dtype: np.dtype) -> str:
    if np_dtype.kind in "USO":
        return "string"
    if np_dtype.name == "bfloat16":
        return "bfloat16"
    name = np_dtype.newbyteorder("=").name if np_dtype.byteorder != "|" else np_dtype.name
    if name in _FIXED:
        return name
    raise InvalidArgumentError(
        f"numpy dtype {np_dtype} has no wasmrpc dtype; the dtypes are {', '.join(DTYPES)}"
    )


class TensorSpec:
    """The type of one tensor: shape and dtype, as ``tf.TensorSpec(shape, dtype)``.

    ``shape`` is a sequence of sizes (``None`` or -1 for a dynamic one), ``()`` for a scalar,
    or ``None`` for any rank; ``dtype`` a wire name, a numpy dtype or a type.
    """

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape: Optional[Sequence[Optional[int]]], dtype: Any = "float32", name: Optional[str] = None):
        self.shape = None if shape is None else tuple(None if d is None or d < 0 else int(d) for d in shape)
        self.dtype = dtype_name(dtype)
        self.name = name

    def _wire(self):
        return (self.dtype, None if self.shape is None else list(self.shape))

    def is_compatible_with(self, value: Any) -> bool:
        """Whether ``value`` (an array) has this spec's dtype and shape."""
        array = np.asarray(value)
        try:
            if _name_of_numpy(array.dtype) != self.dtype:
                return False
        except InvalidArgumentError:
            return False
        if self.shape is None:
            return True
        return len(self.shape) == array.ndim and all(
            want is None or want == have for want, have in zip(self.shape, array.shape)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorSpec) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype}{name})"


def _little_endian(array: np.ndarray) -> np.ndarray:
    order = array.dtype.byteorder
    if order == ">" or (order == "=" and sys.byteorder == "big"):
        return array.astype(array.dtype.newbyteorder("<"))
    return array


def _strings(array: np.ndarray) -> list:
    out = []
    for item in array.reshape(-1).tolist():
        if isinstance(item, str):
            out.append(item.encode("utf-8"))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            out.append(bytes(item))
        else:
            raise InvalidArgumentError(
                f"a string tensor holds str or bytes elements, not {type(item).__name__}"
            )
    return out


def _convertible(natural: np.ndarray, target: np.dtype) -> bool:
    """Whether a Python value, read by numpy as ``natural``, may take the dtype ``target`` of a
    method's signature without changing its meaning (no float truncated to an int, no int out
    of range)."""
    have, want = natural.dtype.kind, target.kind
    if have == "b":
        return want == "b"
    if have in "iu" and want in "iu":
        return bool(np.array_equal(natural.astype(target).astype(natural.dtype), natural))
    if want == "f" or target.name == "bfloat16":
        return have in "iuf"
    return False


def to_wire(value: Any, spec_dtype: Optional[str] = None):
    """One argument as a ``(dtype, shape, data)`` triple.

    numpy arrays and numpy scalars keep their dtype. Other values (Python numbers, lists,
    strings, objects with ``.numpy()`` or ``__array__``) take the dtype of the method's
    signature, ``spec_dtype``, when they fit it exactly, else numpy's reading of them.
    """
    if not isinstance(value, (np.ndarray, np.generic)) and hasattr(value, "numpy"):
        value = value.numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
    else:
        try:
            array = np.asarray(value)
        except Exception as e:  # ragged lists and the like
            raise InvalidArgumentError(f"cannot make a tensor of {type(value).__name__}: {e}") from None
        if spec_dtype is not None and array.dtype.kind not in "USO":
            if spec_dtype != "string":
                target = numpy_dtype(spec_dtype)
                if _convertible(array, target):
                    array = array.astype(target)
    name = _name_of_numpy(array.dtype)
    shape = list(array.shape)
    if name == "string":
        return (name, shape, _strings(array))
    data = np.ascontiguousarray(_little_endian(array)).reshape(-1).view(np.uint8)
    return (name, shape, data)


def from_wire(triple) -> np.ndarray:
    """One output as a numpy array: a read-only view over the response's bytes, or an object
    array of ``bytes`` for strings."""
    name, shape, data = triple
    if name == "string":
        array = np.empty(len(data), dtype=object)
        array[:] = data
        return array.reshape(shape)
    dtype = numpy_dtype(name)
    if sys.byteorder == "big":
        dtype = dtype.newbyteorder("<")
    return np.frombuffer(data, dtype=dtype).reshape(shape)

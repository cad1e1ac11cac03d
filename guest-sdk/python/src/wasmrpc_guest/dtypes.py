"""Element types: the dtypes of the WIT package and their little-endian wire encoding.

One row per case of the WIT `dtype` enum (wit/tensor.wit), named as users see them elsewhere in
wasmrpc (TensorFlow's names: ``float32``, ``int64``, ``string``...). The WIT case names (``f32``,
``i64``, ``bytes``...) are accepted as aliases. The WIT ``bytes`` case has two Python faces, as in
the Rust SDK (``String`` / ``Vec<u8>``): ``string`` elements are ``str`` (the wire bytes must be
UTF-8) and ``bytes`` elements are ``bytes``.

Fixed-size elements travel row-major, little-endian; a bool is one byte, 0 or 1; a string element
is a little-endian u32 length followed by its bytes. Decoding and encoding go through ``struct``
and ``memoryview`` so that they hold on any host byte order, and a little-endian host (wasm32 is
one) reads numeric wire bytes in place.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .errors import InvalidArgument, ResourceExhausted

_LITTLE = sys.byteorder == "little"


@dataclass(frozen=True)
class DType:
    """One element type: its user-facing name, the WIT case it travels as, and its layout."""

    name: str
    """The name users see: ``float32``, ``string``..."""
    wit: str
    """The WIT enum case: ``f32``, ``bytes``..."""
    size: Optional[int]
    """Bytes per element on the wire; ``None`` for the variable-length string types."""
    fmt: Optional[str]
    """The ``struct`` format character of one element (``None`` for bf16 and strings)."""
    native: bool
    """Whether ``fmt`` is also a ``memoryview`` / ``array`` format (so it can be viewed in place)."""

    def __repr__(self) -> str:
        return self.name

    @property
    def is_string(self) -> bool:
        """Whether elements are variable-length (``string`` or ``bytes``)."""
        return self.size is None


BOOL = DType("bool", "bool", 1, "?", True)
UINT8 = DType("uint8", "u8", 1, "B", True)
UINT16 = DType("uint16", "u16", 2, "H", True)
UINT32 = DType("uint32", "u32", 4, "I", True)
UINT64 = DType("uint64", "u64", 8, "Q", True)
INT8 = DType("int8", "i8", 1, "b", True)
INT16 = DType("int16", "i16", 2, "h", True)
INT32 = DType("int32", "i32", 4, "i", True)
INT64 = DType("int64", "i64", 8, "q", True)
# struct knows half precision ('e'), but memoryview.cast and array.array do not.
FLOAT16 = DType("float16", "f16", 2, "e", False)
# No Python format at all: bfloat16 is the upper half of a float32, converted by hand below.
BFLOAT16 = DType("bfloat16", "bf16", 2, None, False)
FLOAT32 = DType("float32", "f32", 4, "f", True)
FLOAT64 = DType("float64", "f64", 8, "d", True)
STRING = DType("string", "bytes", None, None, False)
BYTES = DType("bytes", "bytes", None, None, False)

ALL = (BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32,
       FLOAT64, STRING, BYTES)

# The WIT alias `bytes` names the dtype whose elements are `bytes`, which is also its own name.
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({d.wit: d for d in ALL if d.wit not in _BY_NAME})

# The native sizes of the memoryview formats must be the wire sizes; true on every platform
# CPython runs on (wasm32, x86-64, aarch64), checked once so a surprise fails loudly, not silently.
for _d in ALL:
    if _d.native:
        assert struct.calcsize(_d.fmt) == _d.size, _d


def lookup(name: Any) -> DType:
    """The dtype called ``name`` (a user-facing or a WIT name), or ``TypeError`` listing the names."""
    if isinstance(name, DType):
        return name
    if isinstance(name, str) and name in _BY_NAME:
        return _BY_NAME[name]
    names = ", ".join(d.name for d in ALL)
    raise TypeError(f"unknown dtype {name!r}; the dtypes are: {names}")


def from_wit(case: str) -> DType:
    """The dtype of a WIT case, for messages: the WIT ``bytes`` case is called ``string``, as in
    the JSON API and the Rust SDK."""
    for d in ALL:
        if d.wit == case:
            return d
    raise ValueError(f"unknown WIT dtype {case!r}")


def _check_len(data_len: int, count: int, size: int) -> None:
    if count * size != data_len:
        raise InvalidArgument(
            f"{count} elements need {count * size} bytes of data, got {data_len}")


def decode(dtype: DType, data: bytes, count: int) -> Sequence[Any]:
    """The ``count`` elements in wire bytes ``data``, as a flat sequence of Python values (a
    ``memoryview`` read in place where the layout allows, else a list).

    Raises ``InvalidArgument`` when the bytes do not hold exactly ``count`` valid elements.
    """
    if dtype.is_string:
        return _decode_strings(dtype, data, count)
    _check_len(len(data), count, dtype.size)
    if dtype is BOOL:
        # Any byte but 0 and 1 is refused, as in the Rust SDK: `?` would read 2 as True.
        if bytes(data).translate(None, b"\x00\x01"):
            i, b = next((i, b) for i, b in enumerate(data) if b > 1)
            raise InvalidArgument(f"element {i} is {b}; a bool must be 0 or 1")
    if dtype is BFLOAT16:
        return _widen_bf16(data, count)
    if dtype.native and _LITTLE:
        return memoryview(data).cast("B").cast(dtype.fmt)
    return list(struct.unpack(f"<{count}{dtype.fmt}", data))


def encode(dtype: DType, values: Sequence[Any]) -> bytes:
    """The wire bytes of a flat sequence of Python values.

    Raises ``ValueError`` / ``TypeError`` (from ``struct``) when a value does not fit the dtype,
    ``ResourceExhausted`` when a string element is longer than a u32 length can say.
    """
    if dtype.is_string:
        return _encode_strings(values)
    if isinstance(values, memoryview) and values.format == dtype.fmt and _LITTLE:
        return values.tobytes()
    if dtype is BFLOAT16:
        return _narrow_bf16(values)
    if dtype is BOOL:
        # struct's `?` packs any truthy object as 1; only real booleans and 0/1 are elements.
        for i, v in enumerate(values):
            if v not in (0, 1) or isinstance(v, float):
                raise ValueError(f"element {i} is {v!r}, not a bool")
    try:
        return struct.pack(f"<{len(values)}{dtype.fmt}", *values)
    except struct.error as e:
        raise ValueError(f"a value does not fit {dtype.name}: {e}") from None


def _widen_bf16(data: bytes, count: int) -> Sequence[float]:
    """bfloat16 elements as float32 values: each 2-byte element becomes the upper half of a
    little-endian float32 whose lower half is zero (exact: every bfloat16 is a float32)."""
    wide = bytearray(4 * count)
    wide[2::4] = data[0::2]
    wide[3::4] = data[1::2]
    if _LITTLE:
        return memoryview(bytes(wide)).cast("f")
    return list(struct.unpack(f"<{count}f", wide))  # pragma: no cover (big-endian hosts)


def _narrow_bf16(values: Sequence[Any]) -> bytes:
    """float values as bfloat16, rounded to nearest even as Rust's ``half::bf16::from_f32`` does
    (so a Python guest and a Rust guest give the same bits); NaN stays a (quiet) NaN."""
    try:
        wide = struct.pack(f"<{len(values)}f", *values)
    except (struct.error, OverflowError) as e:
        raise ValueError(f"a value does not fit bfloat16: {e}") from None
    out = bytearray(2 * len(values))
    for i, (bits,) in enumerate(struct.iter_unpack("<I", wide)):
        if bits & 0x7FFF_FFFF > 0x7F80_0000:
            half = (bits >> 16) | 0x0040
        else:
            half = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        out[2 * i] = half & 0xFF
        out[2 * i + 1] = half >> 8
    return bytes(out)


def _decode_strings(dtype: DType, data: bytes, count: int) -> list:
    out = []
    view = memoryview(data)
    pos = 0
    for i in range(count):
        if pos + 4 > len(view):
            raise InvalidArgument(f"element {i} of {count}: the data ends before its length")
        (n,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if pos + n > len(view):
            raise InvalidArgument(
                f"element {i} of {count}: its length {n} runs past the end of the data")
        raw = bytes(view[pos:pos + n])
        pos += n
        if dtype is STRING:
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise InvalidArgument(f"element {i} is not valid UTF-8: {e.reason}") from None
        else:
            out.append(raw)
    if pos != len(view):
        raise InvalidArgument(
            f"{len(view) - pos} bytes of data left after the last of {count} elements")
    return out


def _encode_strings(values: Sequence[Any]) -> bytes:
    out = bytearray()
    for i, v in enumerate(values):
        if isinstance(v, str):
            v = v.encode("utf-8")
        elif isinstance(v, (bytes, bytearray, memoryview)):
            v = bytes(v)
        else:
            raise TypeError(f"element {i} is {type(v).__name__}, not str or bytes")
        if len(v) > 0xFFFF_FFFF:
            raise ResourceExhausted(
                f"element {i} has {len(v)} bytes; a string element holds at most {0xFFFF_FFFF}")
        out += struct.pack("<I", len(v))
        out += v
    return bytes(out)

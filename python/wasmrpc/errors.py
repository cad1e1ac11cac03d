"""The exceptions of wasmrpc: one per canonical code (the codes TensorFlow and gRPC share), all
under :class:`RpcError`, which carries ``code`` (a :class:`Code`) and ``message``.

A few also derive from the Python exception that means the same, so generic handlers work:
``InvalidArgumentError`` is a ``ValueError``, ``DeadlineExceededError`` a ``TimeoutError`` and
``UnimplementedError`` a ``NotImplementedError``.
"""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """The canonical codes, numbered as in TensorFlow (``tf.errors``) and gRPC."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    def __str__(self) -> str:
        return self.name


class RpcError(Exception):
    """A failed call or operation: ``code`` (a :class:`Code`) and ``message``.

    ``error_code`` is ``code`` under TensorFlow's ``OpError`` name.
    """

    code: Code = Code.UNKNOWN

    def __init__(self, message: str = "", code: Code | None = None):
        super().__init__(message)
        if code is not None:
            self.code = Code(code)
        self.message = message

    @property
    def error_code(self) -> Code:
        return self.code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):
        # Pickled exceptions (multiprocessing) come back as the same class.
        return (type(self), (self.message, self.code))


class CancelledError(RpcError):
    code = Code.CANCELLED


class UnknownError(RpcError):
    code = Code.UNKNOWN


class InvalidArgumentError(RpcError, ValueError):
    code = Code.INVALID_ARGUMENT


class DeadlineExceededError(RpcError, TimeoutError):
    code = Code.DEADLINE_EXCEEDED


class NotFoundError(RpcError):
    code = Code.NOT_FOUND


class AlreadyExistsError(RpcError):
    code = Code.ALREADY_EXISTS


class PermissionDeniedError(RpcError):
    code = Code.PERMISSION_DENIED


class ResourceExhaustedError(RpcError):
    code = Code.RESOURCE_EXHAUSTED


class FailedPreconditionError(RpcError):
    code = Code.FAILED_PRECONDITION


class AbortedError(RpcError):
    code = Code.ABORTED


class OutOfRangeError(RpcError):
    code = Code.OUT_OF_RANGE


class UnimplementedError(RpcError, NotImplementedError):
    code = Code.UNIMPLEMENTED


class InternalError(RpcError):
    code = Code.INTERNAL


class UnavailableError(RpcError):
    code = Code.UNAVAILABLE


class DataLossError(RpcError):
    code = Code.DATA_LOSS


class UnauthenticatedError(RpcError):
    code = Code.UNAUTHENTICATED


#: TensorFlow's name for the base class.
OpError = RpcError

_BY_CODE = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def exception_class(code: Code | int | str) -> type[RpcError]:
    """The exception class of a code (a :class:`Code`, its number or its name)."""
    if isinstance(code, str):
        code = Code[code]
    return _BY_CODE.get(Code(code), UnknownError)


def from_code(code: Code | int | str, message: str) -> RpcError:
    """The exception for ``code`` with ``message`` (the native core raises these)."""
    cls = exception_class(code)
    return cls(message)


__all__ = ["Code", "RpcError", "OpError", "exception_class", "from_code"] + [
    cls.__name__ for cls in _BY_CODE.values()
]

"""Why a method failed: one exception class per case of the WIT ``error`` variant, and the table
that maps Python's own exceptions onto those cases.

Raise ``InvalidArgument("...")`` (or any class here) to choose the code; the message reaches the
caller as written. Python's built-in exceptions are mapped by ``code_of`` (README.md has the table),
so ``raise ValueError("x must be positive")`` already answers ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

from typing import Tuple


class Error(Exception):
    """A method failure with a canonical code. Use one of the subclasses."""

    code = "internal"
    """The WIT case name (``invalid-argument``...); the host answers the code of the same name."""

    @property
    def message(self) -> str:
        """The message, without the code."""
        return str(self.args[0]) if self.args else ""


class InvalidArgument(Error):
    """The arguments are wrong regardless of state: dtype, shape, values."""

    code = "invalid-argument"


class FailedPrecondition(Error):
    """The call cannot run in the current state."""

    code = "failed-precondition"


class OutOfRange(Error):
    """An index or value past the valid range."""

    code = "out-of-range"


class Unimplemented(Error):
    """The method (or a case of it) is not implemented."""

    code = "unimplemented"


class Internal(Error):
    """A bug in the function."""

    code = "internal"


class ResourceExhausted(Error):
    """The function refused to allocate what the call needs."""

    code = "resource-exhausted"


class NotFound(Error):
    """The requested item does not exist."""

    code = "not-found"


CODES = ("invalid-argument", "failed-precondition", "out-of-range", "unimplemented", "internal",
         "resource-exhausted", "not-found")
"""The WIT error cases, in the WIT's order."""

# Python's exceptions, most specific first (the first `isinstance` match wins). A TypeError is
# usually a caller passing the wrong kind of value to a function written for another, so it is
# the caller's error, like ValueError; everything unlisted is a bug in the function: internal.
BUILTIN_CODES: Tuple[Tuple[type, str], ...] = (
    (NotImplementedError, "unimplemented"),
    (MemoryError, "resource-exhausted"),
    (IndexError, "out-of-range"),
    (OverflowError, "out-of-range"),
    (KeyError, "not-found"),
    (ValueError, "invalid-argument"),
    (TypeError, "invalid-argument"),
)


def code_of(exc: BaseException) -> Tuple[str, str]:
    """The WIT case and the message for an exception raised by a method."""
    if isinstance(exc, Error):
        return exc.code, exc.message
    for cls, code in BUILTIN_CODES:
        if isinstance(exc, cls):
            # One argument as written: str(KeyError("k")) would add quotes.
            text = str(exc.args[0]) if len(exc.args) == 1 else str(exc)
            return code, text if text else type(exc).__name__
    # An unexpected exception: its type says more than its text alone ("KeyError: 'x'" style).
    text = str(exc)
    return "internal", f"{type(exc).__name__}: {text}" if text else type(exc).__name__

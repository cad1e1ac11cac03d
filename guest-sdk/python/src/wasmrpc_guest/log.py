"""Log lines to the host: ``log.info("...")`` and friends.

Inside a component each line goes to the imported WIT ``log`` interface, which the host captures
and caps per call; on plain CPython (tests) a line is printed to stderr as ``[LEVEL] message``, as
the Rust SDK does natively.
"""

from __future__ import annotations

import sys

try:
    from wit_world.imports import log as _wit
except ModuleNotFoundError:
    _wit = None


def log(level: str, message: object) -> None:
    """Writes one line at ``level``: trace, debug, info, warn or error."""
    if level not in ("trace", "debug", "info", "warn", "error"):
        raise ValueError(f"unknown log level {level!r}")
    if _wit is None:
        print(f"[{level.upper()}] {message}", file=sys.stderr)
    else:
        _wit.log(_wit.Level[level.upper()], str(message))


def trace(message: object) -> None:
    """Very detailed diagnostics."""
    log("trace", message)


def debug(message: object) -> None:
    """Diagnostics."""
    log("debug", message)


def info(message: object) -> None:
    """Normal operation."""
    log("info", message)


def warn(message: object) -> None:
    """Something looks wrong."""
    log("warn", message)


def error(message: object) -> None:
    """Something failed."""
    log("error", message)

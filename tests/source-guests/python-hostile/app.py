"""A hostile Python guest: each method tries something the sandbox must stop or refuse, and the
ones that can observe their failure report it as a string, so tests/e2e/python_guests.rs can check
that the attempt failed *inside* the guest while the call itself answered cleanly.

Built with `wasmrpc build` (componentize-py); imports WASI 0.2 as every componentize-py build does.
"""

import os
import sys
import time

from wasmrpc_guest import Tensor, function


def _said(text: str) -> Tensor:
    return Tensor([text], shape=[])


@function
def spin(x: Tensor["float32", []]) -> Tensor["float32", []]:
    """Never returns: the deadline must end it."""
    n = 0
    while True:
        n += 1


@function
def grow(x: Tensor["float32", []]) -> Tensor["float32", []]:
    """Allocates a MiB at a time, keeping every one, until memory runs out."""
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


@function
def read_file(path: Tensor["string", []]) -> Tensor["string", []]:
    """Tries to read a file; says what happened."""
    try:
        with open(path.item(), "rb") as f:
            return _said(f"read {len(f.read())} bytes")
    except Exception as e:  # noqa: BLE001 - whatever it is, the test wants to see it
        return _said(f"{type(e).__name__}: {e}")


@function
def list_dir(path: Tensor["string", []]) -> Tensor["string", []]:
    """Tries to list a directory; says what happened."""
    try:
        return _said("listed: " + ",".join(sorted(os.listdir(path.item()))))
    except Exception as e:  # noqa: BLE001
        return _said(f"{type(e).__name__}: {e}")


@function
def environment(x: Tensor["float32", []]) -> Tensor["string", []]:
    """The environment variables, arguments and working directory the guest can see."""
    try:
        cwd = os.getcwd()
    except Exception as e:  # noqa: BLE001
        cwd = f"{type(e).__name__}"
    return _said(f"env={sorted(os.environ.items())} argv={sys.argv} cwd={cwd}")


@function
def connect(host: Tensor["string", []]) -> Tensor["string", []]:
    """Tries to open a TCP connection to host:port; says what happened."""
    try:
        import socket  # componentize-py's CPython may have none: that is a failure too
        h, p = host.item().rsplit(":", 1)
        socket.create_connection((h, int(p)), timeout=1).close()
        return _said("connected")
    except Exception as e:  # noqa: BLE001
        return _said(f"{type(e).__name__}: {e}")


@function
def clock_step(x: Tensor["float32", []]) -> Tensor["int64", [2]]:
    """The smallest non-zero step, in nanoseconds, between successive readings of the monotonic
    and of the wall clock (0 if a clock never moved while it was read for about 20 ms)."""
    steps = []
    for read in (time.monotonic_ns, time.time_ns):
        smallest = 0
        start = time.monotonic_ns()
        last = read()
        while time.monotonic_ns() - start < 20_000_000:
            now = read()
            if now != last:
                step = now - last
                smallest = step if smallest == 0 else min(smallest, step)
                last = now
        steps.append(smallest)
    return Tensor(steps, shape=[2])


@function
def sleep(seconds: Tensor["float32", []]) -> Tensor["float32", []]:
    """Sleeps in the host (a clock subscription), not in wasm code: the deadline must end it."""
    time.sleep(seconds.item())
    return seconds

"""PaddlePaddle's ``paddle.distributed.rpc`` over a wasmrpc cluster.

::

    from wasmrpc.distributed import rpc

    rpc.init_rpc("worker0", rank=0, world_size=3, master_endpoint="nats://127.0.0.1:4222")
    ret = rpc.rpc_sync("worker1", "add", args=(np.int32(2), np.int32(3)))
    fut = rpc.rpc_async("worker2", "add", args=(np.int32(2), np.int32(3)))
    print(ret, fut.wait(), rpc.get_all_worker_infos())
    rpc.shutdown()

``master_endpoint`` says what this process becomes:

- the cluster's NATS server (``nats://HOST:PORT``, or a bare ``HOST:PORT`` where NATS
  answers): this process **joins the cluster as worker** ``name`` of rank ``rank``, serving on
  ``PADDLE_WORKER_ENDPOINT`` or a free loopback port (``listen=`` picks another), as every
  process of Paddle's examples does;
  ``init_rpc`` then waits until ``world_size`` processes have called it so (the cluster may have
  other workers too);
- any worker's HTTP address (``HOST:PORT`` or ``http://HOST:PORT``): this process is a
  **client** of the cluster, named ``name``; a call addressed to ``name`` runs on that worker.

Where Paddle runs a Python function ``fn`` on the other worker, wasmrpc runs the method of
that name registered in the cluster: ``fn`` is the method's name, or a function whose
``__name__`` is. Arguments are tensors (numpy arrays, numpy scalars or Python numbers, given
the method's dtypes); ``kwargs`` are not supported. A timeout of 0 or less means none, as in
Paddle. ``rank``, ``world_size`` and ``master_endpoint`` default to Paddle's environment
variables ``PADDLE_TRAINER_ID``, ``PADDLE_TRAINERS_NUM`` and ``PADDLE_MASTER_ENDPOINT``.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Union

from .. import _native, _trace
from .._remote import Pending, method_name, wire_args
from .._tensors import from_wire
from ..errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    UnavailableError,
)
from ..rpc import Client, StatusOrResult, _value

#: Paddle's default timeout: none.
_DEFAULT_RPC_TIMEOUT = -1

#: The barrier the workers of ``init_rpc`` meet at.
_INIT_BARRIER = "paddle-init"

#: How long ``init_rpc`` gives the endpoint to answer, in milliseconds.
_CONNECT_TIMEOUT_MS = 30_000


class WorkerInfo:
    """A worker of the cluster: ``name``, ``rank``, and the ``ip`` and ``port`` it serves
    HTTP on (Paddle's ``WorkerInfo``)."""

    __slots__ = ("name", "rank", "ip", "port")

    def __init__(self, name: str, rank: int, ip: str, port: int):
        self.name = name
        self.rank = rank
        self.ip = ip
        self.port = port

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkerInfo):
            return NotImplemented
        return (self.name, self.rank, self.ip, self.port) == (
            other.name,
            other.rank,
            other.ip,
            other.port,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.rank, self.ip, self.port))

    def __repr__(self) -> str:
        return f"{{name: {self.name}, rank: {self.rank}, ip: {self.ip}, port: {self.port}}}"


class FutureWrapper(Pending):
    """A call started by :func:`rpc_async`: :meth:`wait` gives its value (Paddle's
    ``FutureWrapper``); ``done()``, and ``await future`` in asyncio code."""

    __slots__ = ()

    def wait(self) -> Any:
        """The call's value once it completes; raises its error."""
        return self._result.get_value()


class _Process:
    """This process's part in the cluster, from ``init_rpc`` to ``shutdown``."""

    def __init__(self, client: Client, native: "_native.NativeRpc", server: Optional[Any]):
        self.client = client
        self.native = native
        # This process's own worker, when it joined as one.
        self.server = server


_lock = threading.Lock()
_process: Optional[_Process] = None


def _current() -> _Process:
    process = _process
    if process is None:
        raise FailedPreconditionError(
            "wasmrpc.distributed.rpc is not initialised: call init_rpc(name, rank, world_size, "
            "master_endpoint) first"
        )
    return process


def _env_int(value: Optional[int], variable: str) -> Optional[int]:
    if value is not None:
        return int(value)
    text = os.environ.get(variable)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{variable}={text!r} is not an integer") from None


def init_rpc(
    name: str,
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    master_endpoint: Optional[str] = None,
    *,
    listen: Optional[str] = None,
    key: Optional[str] = None,
    ca_cert: Union[str, os.PathLike, None] = None,
) -> None:
    """Join the cluster as ``name`` (see the module's documentation for what
    ``master_endpoint`` makes this process), and wait until it has ``world_size`` workers
    when given.

    ``listen`` is where this process's worker serves (a worker only; default
    ``PADDLE_WORKER_ENDPOINT``, as in Paddle, else a free loopback port); ``key`` and ``ca_cert``
    are a tenant's API key and a CA to trust when ``master_endpoint`` is an ``https://``
    worker. Raises ``FailedPreconditionError`` when already initialised, ``UnavailableError``
    when the endpoint cannot be reached or ``name`` is taken by another worker.
    """
    global _process
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("init_rpc needs this process's name, a non-empty string")
    rank = _env_int(rank, "PADDLE_TRAINER_ID")
    world_size = _env_int(world_size, "PADDLE_TRAINERS_NUM")
    if master_endpoint is None:
        master_endpoint = os.environ.get("PADDLE_MASTER_ENDPOINT") or None
    if master_endpoint is None:
        raise ValueError(
            "init_rpc needs master_endpoint (or PADDLE_MASTER_ENDPOINT): the cluster's NATS "
            "server (nats://HOST:PORT) to join as a worker, or a worker's HTTP address"
        )
    if world_size is not None and world_size < 1:
        raise ValueError(f"world_size must be 1 or more, got {world_size}")
    with _lock:
        if _process is not None:
            raise FailedPreconditionError(
                "wasmrpc.distributed.rpc is already initialised in this process; call "
                "shutdown() first"
            )
        connect = functools.partial(
            Client.create, name=name, timeout_in_ms=_CONNECT_TIMEOUT_MS, key=key, ca_cert=ca_cert
        )
        nats = master_endpoint if master_endpoint.startswith(("nats://", "tls://")) else None
        client = None
        if nats is None:
            layer = "https" if master_endpoint.startswith("https://") else "http"
            try:
                client = connect(layer, master_endpoint)
            except UnavailableError:
                # A bare HOST:PORT that does not answer HTTP may be the NATS server, which
                # greets every connection (an HTTP server waits to be spoken to).
                if "://" in master_endpoint or not _native.speaks_nats(master_endpoint):
                    raise
                nats = "nats://" + master_endpoint
        server = None
        if nats is not None:
            if listen is None:
                listen = os.environ.get("PADDLE_WORKER_ENDPOINT") or "127.0.0.1:0"
            server = _native.NativeServer.join_cluster(listen, nats, name, rank or 0)
            server.start()
        try:
            if server is not None:
                client = connect("http", server.address)
            if server is not None and world_size is not None:
                _gather(client, name, world_size)
            native = _native.NativeRpc.attach(client._native, name, world_size)
        except BaseException:
            if server is not None:
                server.shutdown()
            raise
        _process = _Process(client, native, server)


def _gather(client: Client, name: str, world_size: int) -> None:
    """Wait until ``world_size`` processes have called ``init_rpc`` as workers (Paddle's
    start-up barrier): the cluster may have other workers too."""
    while True:
        try:
            client._native.barrier(_INIT_BARRIER, name, world_size, 0)
            return
        except DeadlineExceededError:
            # The server bounds one wait; arriving again is harmless (one arrival per name).
            continue


def _destination(to: Union[str, WorkerInfo]) -> str:
    return to.name if isinstance(to, WorkerInfo) else to


def rpc_sync(
    to: Union[str, WorkerInfo],
    fn: Union[str, Callable[..., Any]],
    args: Optional[Sequence[Any]] = None,
    kwargs: Optional[dict] = None,
    timeout: float = _DEFAULT_RPC_TIMEOUT,
    *,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
) -> Any:
    """Run ``fn`` on worker ``to`` and return its value (one array, or a list for several
    outputs). ``timeout`` in seconds; 0 or less means none. Raises the call's error:
    ``UnavailableError`` when ``to`` is gone, ``DeadlineExceededError`` past the timeout.
    ``traceparent`` (and ``tracestate``): the W3C trace context the call carries, instead of
    the current OpenTelemetry span's."""
    process = _current()
    method = method_name(fn)
    traceparent, tracestate = _trace.context(traceparent, tracestate)
    outputs = process.native.rpc_sync(
        _destination(to),
        method,
        wire_args(process.client, method, args, kwargs),
        float(timeout),
        traceparent=traceparent,
        tracestate=tracestate,
    )
    return _value([from_wire(t) for t in outputs], True)


def rpc_async(
    to: Union[str, WorkerInfo],
    fn: Union[str, Callable[..., Any]],
    args: Optional[Sequence[Any]] = None,
    kwargs: Optional[dict] = None,
    timeout: float = _DEFAULT_RPC_TIMEOUT,
    *,
    traceparent: Optional[str] = None,
    tracestate: Optional[str] = None,
) -> FutureWrapper:
    """Start ``fn`` on worker ``to`` and return at once; ``wait()`` on the result gives the
    value as :func:`rpc_sync` would (the trace context too)."""
    process = _current()
    method = method_name(fn)
    traceparent, tracestate = _trace.context(traceparent, tracestate)
    pending = process.native.rpc_async(
        _destination(to),
        method,
        wire_args(process.client, method, args, kwargs),
        float(timeout),
        traceparent=traceparent,
        tracestate=tracestate,
    )
    return FutureWrapper(StatusOrResult(pending, True))


def shutdown() -> None:
    """Wait for this process's outstanding calls and (when ``init_rpc`` had a ``world_size``)
    for every process to call ``shutdown``, then leave: a worker stops taking calls, finishes
    its own and leaves the cluster. ``init_rpc`` may be called again afterwards."""
    global _process
    with _lock:
        process = _current()
        try:
            process.native.shutdown()
        finally:
            if process.server is not None:
                process.server.shutdown()
            _process = None


def register(
    method_name: str,
    component: Union[bytes, bytearray, memoryview, str, os.PathLike],
    export: Optional[str] = None,
) -> dict:
    """Register a component (its bytes, or a ``.wasm`` file's path) in the cluster as
    ``method_name`` through this process's connection (not in Paddle, whose functions are
    Python). Every worker can run it within a second; returns the method's info."""
    return _current().client.register(method_name, component, export)


def get_worker_info(name: str) -> WorkerInfo:
    """The live worker named ``name``; ``NotFoundError`` when there is none."""
    return WorkerInfo(*_current().native.get_worker_info(name))


def get_all_worker_infos() -> List[WorkerInfo]:
    """Every live worker of the cluster, by rank then name."""
    return [WorkerInfo(*w) for w in _current().native.get_all_worker_infos()]


def get_current_worker_info() -> WorkerInfo:
    """This process's worker (when it joined as one), else the worker it is connected to."""
    return WorkerInfo(*_current().native.get_current_worker_info())


__all__ = [
    "WorkerInfo",
    "FutureWrapper",
    "init_rpc",
    "rpc_sync",
    "rpc_async",
    "shutdown",
    "register",
    "get_worker_info",
    "get_all_worker_infos",
    "get_current_worker_info",
]

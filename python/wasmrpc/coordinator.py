"""TensorFlow's ``tf.distribute.experimental.coordinator.ClusterCoordinator`` over a wasmrpc
cluster.

::

    from wasmrpc.coordinator import ClusterCoordinator

    coordinator = ClusterCoordinator("127.0.0.1:8081")      # any worker of the cluster
    results = [coordinator.schedule("add", args=(np.int32(i), np.int32(1))) for i in range(10)]
    coordinator.join()
    print([r.fetch() for r in results])

:meth:`ClusterCoordinator.schedule` runs a method registered in the cluster on any available
worker and returns a :class:`RemoteValue` at once. A scheduled call runs at least once: when
its worker dies it runs again on another. One that cannot complete (no worker can take it)
raises :class:`~wasmrpc.errors.CancelledError` from ``fetch()``, never hangs.

Where TensorFlow builds the coordinator from a ``ParameterServerStrategy``, wasmrpc builds it
from the cluster: a worker's address or a :class:`wasmrpc.rpc.Client` of one.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence, Union

from . import _native, _trace
from ._remote import Pending, method_name, wire_args
from .errors import InvalidArgumentError
from .rpc import Client, StatusOrResult

_DEFAULT_NAME = "wasmrpc-coordinator"


class RemoteValue(Pending):
    """The value of a scheduled call: :meth:`fetch` waits for it (TensorFlow's
    ``RemoteValue``); ``done()``, and ``await value`` in asyncio code."""

    __slots__ = ()

    def fetch(self) -> Any:
        """The value (a numpy array, or a list for several outputs) once the call completes;
        raises ``CancelledError`` when it could not complete, or the method's error."""
        return self._result.get_value()

    def get(self) -> Any:
        """As :meth:`fetch` (TensorFlow's ``get`` returns tensors where ``fetch`` returns numpy
        values; here both are numpy arrays)."""
        return self.fetch()


class ClusterCoordinator:
    """Schedules calls on the workers of a cluster.

    ``cluster``: the address of any worker (``HOST:PORT``, ``http://`` or ``https://``), or a
    :class:`wasmrpc.rpc.Client` connected to one. ``key`` and ``ca_cert`` are as for
    :meth:`wasmrpc.rpc.Client.create` when an address is given.
    """

    def __init__(
        self,
        cluster: Union[str, Client],
        *,
        key: Optional[str] = None,
        ca_cert: Union[str, os.PathLike, None] = None,
        timeout_in_ms: int = 30_000,
    ):
        if isinstance(cluster, Client):
            client = cluster
        elif isinstance(cluster, str):
            layer = "https" if cluster.startswith("https://") else "http"
            client = Client.create(
                layer, cluster, name=_DEFAULT_NAME, timeout_in_ms=timeout_in_ms,
                key=key, ca_cert=ca_cert,
            )
        else:
            raise InvalidArgumentError(
                "a ClusterCoordinator is made from a worker's address or a wasmrpc.rpc.Client, "
                f"not {type(cluster).__name__}"
            )
        self._client = client
        self._native = _native.NativeCoordinator(client._native)

    def schedule(
        self,
        fn: Union[str, Callable[..., Any]],
        args: Optional[Sequence[Any]] = None,
        kwargs: Optional[dict] = None,
    ) -> RemoteValue:
        """Run ``fn`` (a method's name, or a function whose ``__name__`` is one) with ``args``
        on any available worker; returns a :class:`RemoteValue` at once."""
        method = method_name(fn)
        # The current OpenTelemetry span's trace context, if any, goes with the call.
        traceparent, tracestate = _trace.context()
        pending = self._native.schedule(
            method,
            wire_args(self._client, method, args, kwargs),
            traceparent=traceparent,
            tracestate=tracestate,
        )
        return RemoteValue(StatusOrResult(pending, True))

    def join(self) -> None:
        """Wait until everything scheduled has finished; raises the first error of a scheduled
        call since the last ``join`` (as TensorFlow does)."""
        self._native.join()

    def done(self) -> bool:
        """Whether everything scheduled has finished (never waits)."""
        return self._native.done()

    def fetch(self, val: Any) -> Any:
        """The values of a :class:`RemoteValue` or of a list, tuple or dict of them (the same
        structure, fetched), as TensorFlow's ``coordinator.fetch``."""
        if isinstance(val, RemoteValue):
            return val.fetch()
        if isinstance(val, list):
            return [self.fetch(v) for v in val]
        if isinstance(val, tuple):
            return tuple(self.fetch(v) for v in val)
        if isinstance(val, dict):
            return {k: self.fetch(v) for k, v in val.items()}
        return val


__all__ = ["ClusterCoordinator", "RemoteValue"]

"""TensorFlow's ``tf.distribute.experimental.rpc``, over wasmrpc: :class:`Client` and
:class:`Server`, with :class:`StatusOrResult` for calls that complete later.

::

    from wasmrpc import rpc
    client = rpc.Client.create("http", "127.0.0.1:8080", name="demo")
    value = client.addition_blocking(np.int32(2), np.int32(3))

The methods registered on the server are added to the client as ``client.NAME(*args)``
(returns a :class:`StatusOrResult` at once) and ``client.NAME_blocking(*args)`` (returns the
value, or raises). Errors are the exceptions of :mod:`wasmrpc.errors`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from . import _native, _trace
from ._tensors import TensorSpec, from_wire, to_wire
from .errors import Code, InvalidArgumentError, RpcError

#: The rpc layers: ``http`` (HTTP/2 in clear text), ``https`` (HTTP/2 over TLS), and ``grpc``
#: (TensorFlow's name) and ``grpcs``: every call a gRPC ``ModelInfer`` of the Open Inference
#: Protocol, in clear text and over TLS. (Until gRPC was served, ``grpc`` meant ``http``.)
RPC_LAYERS = ("http", "https", "grpc", "grpcs")

_DEFAULT_NAME = "wasmrpc-python"


def _layer(rpc_layer: str) -> str:
    if rpc_layer not in RPC_LAYERS:
        raise ValueError(
            f"unsupported rpc_layer {rpc_layer!r}; supported layers: {', '.join(RPC_LAYERS)}"
        )
    return rpc_layer


def _timeout(ms: Optional[float]) -> int:
    if ms is None:
        return 0
    ms = int(ms)
    if ms < 0:
        raise ValueError(f"timeout_in_ms must be 0 or more, got {ms}")
    return ms


class StatusOrResult:
    """The result of a call started by :meth:`Client.call` or ``client.NAME(...)``.

    ``is_ok()``, ``get_error()`` and ``get_value()`` wait for the call to complete (with the GIL
    released) and may be called any number of times. ``await result`` gives the value in
    asyncio code. Dropping it does not cancel the call.
    """

    __slots__ = ("_pending", "_single", "__weakref__")

    def __init__(self, pending: "_native.NativePending", single: bool):
        self._pending = pending
        self._single = single

    def is_ok(self) -> bool:
        """Whether the call succeeded."""
        return self._pending.error() is None

    def get_error(self) -> Tuple[Code, str]:
        """``(code, message)``: ``(Code.OK, "")`` for a call that succeeded."""
        error = self._pending.error()
        if error is None:
            return (Code.OK, "")
        return (Code[error[0]], error[1])

    def get_value(self) -> Any:
        """The output (a numpy array), or a list of them for a method with several outputs
        or a list of ``output_specs``; raises the call's error."""
        return _value([from_wire(t) for t in self._pending.wait()], self._single)

    def done(self) -> bool:
        """Whether the call has completed (never waits)."""
        return self._pending.done()

    def __await__(self):
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle():
            if future.cancelled():
                return
            try:
                future.set_result(self.get_value())
            except BaseException as e:  # the call's error, raised in the awaiting task
                future.set_exception(e)

        def completed():
            # From a runtime thread: hand over to the loop's own thread.
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:  # the loop has closed meanwhile
                pass

        self._pending.add_done_callback(completed)
        return future.__await__()

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<StatusOrResult {state}>"


def _value(outputs: list, single: bool) -> Any:
    """The outputs as a call's value: the one array, or the list."""
    if single and len(outputs) == 1:
        return outputs[0]
    return outputs


def _output_structure(output_specs: Any) -> Tuple[Optional[list], Optional[bool]]:
    """Specs as the native core takes them, and whether the value is one array (a single spec)
    rather than a list (a list of specs); ``(None, None)`` without specs."""
    if output_specs is None:
        return None, None
    if isinstance(output_specs, TensorSpec):
        return [output_specs._wire()], True
    if isinstance(output_specs, (list, tuple)):
        specs = []
        for spec in output_specs:
            if not isinstance(spec, TensorSpec):
                raise InvalidArgumentError(
                    f"output_specs holds TensorSpec values, not {type(spec).__name__}"
                )
            specs.append(spec._wire())
        return specs, False
    raise InvalidArgumentError(
        f"output_specs is a TensorSpec or a list of them, not {type(output_specs).__name__}"
    )


class Client:
    """A client of one wasmrpc server: ``tf.distribute.experimental.rpc.Client``.

    Make one with :meth:`Client.create`. It is safe to share between threads (calls are
    multiplexed over one HTTP/2 connection) and survives ``fork`` (a child reconnects on its
    first call).
    """

    def __init__(self, native: "_native.NativeClient"):
        # Use Client.create.
        self._native = native
        self._lock = threading.Lock()
        self._methods: dict = {}
        self._added: set = set()
        self._load_methods()

    @staticmethod
    def create(
        rpc_layer: str,
        address: str,
        name: str = "",
        timeout_in_ms: int = 0,
        *,
        key: Optional[str] = None,
        ca_cert: Union[str, os.PathLike, None] = None,
        ca_cert_pem: Union[bytes, str, Sequence[Union[bytes, str]], None] = None,
        encoding: str = "binary",
    ) -> "Client":
        """Connect to the server at ``address`` and list its methods.

        ``rpc_layer``: ``"http"`` or ``"https"`` (HTTP/2, clear or TLS), ``"grpc"`` or
        ``"grpcs"`` (calls as gRPC ``ModelInfer``, clear or TLS); any other is a ``ValueError``.
        ``address``: ``host:port`` or a URL of the layer's scheme. ``name`` identifies the client in the server's logs. ``timeout_in_ms``
        bounds creation (``DeadlineExceededError`` past it) and is every call's default timeout;
        0 means none. ``key`` is a tenant's API key; ``ca_cert`` (a PEM file's path) and
        ``ca_cert_pem`` (its contents, or a list of them) are CAs to trust for ``https``;
        ``encoding`` is ``"binary"`` (KServe v2 binary tensors, the default) or ``"json"`` (the
        HTTP layers only).
        """
        layer = _layer(rpc_layer)
        pems: List[bytes] = []
        if ca_cert is not None:
            with open(ca_cert, "rb") as f:
                pems.append(f.read())
        if ca_cert_pem is not None:
            items = [ca_cert_pem] if isinstance(ca_cert_pem, (bytes, str)) else list(ca_cert_pem)
            pems.extend(p.encode() if isinstance(p, str) else bytes(p) for p in items)
        native = _native.NativeClient.create(
            layer,
            address,
            name or _DEFAULT_NAME,
            _timeout(timeout_in_ms),
            key,
            pems,
            encoding,
        )
        return Client(native)

    # -- the method list -------------------------------------------------------------------

    def _load_methods(self) -> None:
        methods = {m["name"]: m for m in json.loads(self._native.methods_json())}
        with self._lock:
            self._methods = methods
            # Methods deleted since: their attributes go.
            wanted = set(methods) | {m + "_blocking" for m in methods}
            for attr in self._added - wanted:
                self.__dict__.pop(attr, None)
            self._added &= wanted
            for method_name in methods:
                self._add_method(method_name)

    def _add_method(self, method_name: str) -> None:
        # A method named like one of the client's own attributes (`call`...) is reached through
        # `call(method_name, ...)` only.
        for attr, blocking in ((method_name, False), (method_name + "_blocking", True)):
            if attr in self._added or hasattr(type(self), attr):
                continue
            self.__dict__[attr] = self._method_callable(method_name, blocking)
            self._added.add(attr)

    def _method_callable(self, method_name: str, blocking: bool) -> Callable[..., Any]:
        if blocking:

            def method(*args: Any) -> Any:
                # Waited for in the native core, without a task and a result to hand over.
                traceparent, tracestate = _trace.context()
                outputs = self._native.call_blocking(
                    method_name,
                    self._args(method_name, list(args)),
                    traceparent=traceparent,
                    tracestate=tracestate,
                )
                return _value([from_wire(t) for t in outputs], True)

        else:

            def method(*args: Any) -> Any:
                return self._call_method(method_name, args)

        method.__name__ = method_name + ("_blocking" if blocking else "")
        info = self._methods.get(method_name)
        doc = info["signature"].get("doc", "") if info else ""
        method.__doc__ = doc + (
            "\n\nReturns the value (raises on error)." if blocking else "\n\nReturns a StatusOrResult."
        )
        return method

    def __getattr__(self, attr: str) -> Any:
        # A method registered after creation: refresh once, then look again.
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            self.refresh()
        except RpcError as e:
            # `hasattr` and `getattr(client, name, default)` expect an AttributeError.
            raise AttributeError(
                f"'Client' object has no attribute {attr!r} (the method list could not be "
                f"refreshed: {e})"
            ) from e
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(
                f"'Client' object has no attribute {attr!r}: no such method is registered on "
                f"{self.address}"
            ) from None

    def refresh(self) -> None:
        """Fetch the server's method list again (methods registered since creation)."""
        self._native.refresh()
        self._load_methods()

    def list_registered_methods(self) -> List[dict]:
        """The server's methods as at creation or the last refresh: name, version, signature
        (inputs, outputs, doc)..."""
        with self._lock:
            return list(self._methods.values())

    # -- calls -----------------------------------------------------------------------------

    def _signature(self, method_name: str) -> Optional[dict]:
        info = self._methods.get(method_name)
        return info["signature"] if info else None

    def _args(self, method_name: str, args: Optional[Sequence[Any]]) -> list:
        if args is None:
            args = []
        elif not isinstance(args, (list, tuple)):
            args = [args]
        signature = self._signature(method_name)
        inputs = signature["inputs"] if signature else []
        return [
            to_wire(arg, inputs[i]["dtype"] if i < len(inputs) else None)
            for i, arg in enumerate(args)
        ]

    def _call_method(self, method_name: str, args: Sequence[Any]) -> StatusOrResult:
        traceparent, tracestate = _trace.context()
        pending = self._native.call(
            method_name,
            self._args(method_name, list(args)),
            traceparent=traceparent,
            tracestate=tracestate,
        )
        return StatusOrResult(pending, True)

    def call(
        self,
        method_name: str,
        args: Optional[Sequence[Any]] = None,
        output_specs: Any = None,
        timeout_in_ms: int = 0,
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> StatusOrResult:
        """Start a call of ``method_name`` with ``args`` (numpy arrays, numpy scalars or Python
        values) and return at once.

        ``output_specs``: a :class:`TensorSpec` (the value is then one array) or a list of them
        (a list), each output checked against its spec (``InvalidArgumentError`` if one does
        not fit). ``timeout_in_ms``: 0 uses the client's default; past it the result is
        ``DeadlineExceededError`` and the server stops the guest. ``traceparent`` (and
        ``tracestate``): the W3C trace context the call carries, instead of the current
        OpenTelemetry span's (``InvalidArgumentError`` if malformed).
        """
        specs, single = _output_structure(output_specs)
        timeout = _timeout(timeout_in_ms)
        traceparent, tracestate = _trace.context(traceparent, tracestate)
        pending = self._native.call(
            method_name,
            self._args(method_name, args),
            specs,
            timeout or None,
            traceparent=traceparent,
            tracestate=tracestate,
        )
        return StatusOrResult(pending, True if single is None else single)

    # -- registrations (beyond TensorFlow's client) ------------------------------------------

    def register(
        self,
        method_name: str,
        component: Union[bytes, bytearray, memoryview, str, os.PathLike],
        export: Optional[str] = None,
    ) -> dict:
        """Register a component (its bytes, or a path to a ``.wasm`` file) on the server as
        ``method_name``; ``export`` picks one method of a multi-method component. Returns the
        method's info; the client gets ``NAME`` and ``NAME_blocking`` at once."""
        info = json.loads(self._native.register(method_name, _component_bytes(component), export))
        self._load_methods()
        return info

    def delete(self, method_name: str) -> List[int]:
        """Unregister ``method_name`` (every version); returns the versions deleted."""
        versions = self._native.delete(method_name)
        self.refresh()
        return versions

    @property
    def address(self) -> str:
        """The server's address, ``http://host:port``."""
        return self._native.address

    @property
    def name(self) -> str:
        """The client's name."""
        return self._native.name

    def __repr__(self) -> str:
        return f"<wasmrpc.rpc.Client {self.name!r} at {self.address}, {len(self._methods)} methods>"

    def __reduce__(self):
        # Pickled (a `spawn` process pool's arguments), a client is what it was created with
        # (its key included) and connects again where it is unpickled.
        return (_reconnect, tuple(self._native.settings()))


def _reconnect(rpc_layer, address, name, timeout_ms, key, ca_certs_pem, encoding) -> Client:
    native = _native.NativeClient.create(
        rpc_layer, address, name, timeout_ms, key, [bytes(p) for p in ca_certs_pem], encoding
    )
    return Client(native)


def _component_bytes(component: Any) -> bytes:
    if isinstance(component, (bytes, bytearray, memoryview)):
        return bytes(component)
    if isinstance(component, (str, os.PathLike)):
        with open(component, "rb") as f:
            return f.read()
    raise InvalidArgumentError(
        f"a component is its bytes or a path to a .wasm file, not {type(component).__name__}"
    )


class Server:
    """A wasmrpc server inside this Python process: ``tf.distribute.experimental.rpc.Server``.

    The real server (the same code as ``wasmrpc serve``), with its store in a temporary
    directory removed when the server is gone. It serves on loopback addresses only.
    """

    def __init__(self, native: "_native.NativeServer"):
        # Use Server.create.
        self._native = native

    @staticmethod
    def create(rpc_layer: str, address: str) -> "Server":
        """A server for ``address`` (``host:port``; port 0 picks a free one, ``localhost``
        means 127.0.0.1) over ``rpc_layer`` (``"http"``, or TensorFlow's ``"grpc"``: the one port
        serves both HTTP and gRPC). The port is bound when this returns; it serves after
        :meth:`start`."""
        if rpc_layer not in ("http", "grpc"):
            raise ValueError(
                f"unsupported rpc_layer {rpc_layer!r} for a server; supported layers: http, grpc"
            )
        return Server(_native.NativeServer.create("http", address))

    def register(
        self,
        method_name: str,
        func: Union[bytes, bytearray, memoryview, str, os.PathLike],
        *,
        export: Optional[str] = None,
    ) -> dict:
        """Register a component, as its bytes or a path to a ``.wasm`` file, under
        ``method_name``; ``export`` picks one method of a multi-method component. Works before
        and after :meth:`start`; registering a name again makes a new version."""
        if isinstance(func, (bytes, bytearray, memoryview)):
            info = self._native.register(method_name, component=bytes(func), export=export)
        elif isinstance(func, (str, os.PathLike)):
            info = self._native.register(method_name, path=os.fspath(func), export=export)
        else:
            raise InvalidArgumentError(
                "a wasmrpc method is a WebAssembly component (its bytes or a path), "
                f"not {type(func).__name__}"
            )
        return json.loads(info)

    def start(self) -> None:
        """Serve in the background; returns at once (a second start is
        ``FailedPreconditionError``)."""
        self._native.start()

    def join(self) -> None:
        """Wait until the server has shut down (Ctrl-C interrupts the wait)."""
        self._native.join()

    def shutdown(self) -> None:
        """Stop accepting calls, let in-flight ones finish, and wait for that."""
        self._native.shutdown()

    @property
    def address(self) -> str:
        """The bound address, ``host:port``."""
        return self._native.address

    def __repr__(self) -> str:
        return f"<wasmrpc.rpc.Server at {self.address}>"


__all__ = ["Client", "Server", "StatusOrResult", "TensorSpec", "RPC_LAYERS"]

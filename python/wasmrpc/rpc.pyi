"""Type stubs of wasmrpc.rpc: TensorFlow's tf.distribute.experimental.rpc over wasmrpc."""

import os
from typing import Any, Callable, Generator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._tensors import TensorSpec as TensorSpec
from .errors import Code

RPC_LAYERS: Tuple[str, ...]

_Component = Union[bytes, bytearray, memoryview, str, os.PathLike]
_Value = Union[np.ndarray, List[np.ndarray]]
_OutputSpecs = Union[TensorSpec, Sequence[TensorSpec], None]

class StatusOrResult:
    def is_ok(self) -> bool:
        """Whether the call succeeded (waits for it)."""
    def get_error(self) -> Tuple[Code, str]:
        """(code, message); (Code.OK, "") for a call that succeeded (waits for it)."""
    def get_value(self) -> Any:
        """The output array (a list for several outputs or a list of output_specs); raises the
        call's error (waits for it)."""
    def done(self) -> bool:
        """Whether the call has completed (never waits)."""
    def __await__(self) -> Generator[Any, None, Any]: ...

class Client:
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
    ) -> Client:
        """Connect to the server at address and list its methods; ValueError for an
        unsupported rpc_layer, DeadlineExceededError past timeout_in_ms."""
    def call(
        self,
        method_name: str,
        args: Optional[Sequence[Any]] = None,
        output_specs: _OutputSpecs = None,
        timeout_in_ms: int = 0,
        *,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> StatusOrResult:
        """Start a call and return at once."""
    def list_registered_methods(self) -> List[dict]: ...
    def refresh(self) -> None: ...
    def register(self, method_name: str, component: _Component, export: Optional[str] = None) -> dict: ...
    def delete(self, method_name: str) -> List[int]: ...
    @property
    def address(self) -> str: ...
    @property
    def name(self) -> str: ...
    def __getattr__(self, method_name: str) -> Callable[..., Any]:
        """`client.NAME(*args)` -> StatusOrResult, `client.NAME_blocking(*args)` -> value, for
        every method registered on the server."""

class Server:
    @staticmethod
    def create(rpc_layer: str, address: str) -> Server:
        """A server bound to address ("host:port"; port 0 picks one)."""
    def register(self, method_name: str, func: _Component, *, export: Optional[str] = None) -> dict: ...
    def start(self) -> None: ...
    def join(self) -> None: ...
    def shutdown(self) -> None: ...
    @property
    def address(self) -> str: ...

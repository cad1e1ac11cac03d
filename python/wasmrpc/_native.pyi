"""Type stubs of the native core (python/src/): used by wasmrpc.rpc, not meant to be called
directly."""

from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

_Data = Union["TensorBuffer", List[bytes], np.ndarray, bytes]
_Triple = Tuple[str, Sequence[int], _Data]
_Spec = Tuple[str, Optional[Sequence[Optional[int]]]]

class TensorBuffer:
    """The bytes of one output tensor, read-only, exposed through the buffer protocol."""

    def __len__(self) -> int: ...

class NativePending:
    def done(self) -> bool: ...
    def wait(self) -> List[Tuple[str, List[int], Union[TensorBuffer, List[bytes]]]]: ...
    def error(self) -> Optional[Tuple[str, str]]: ...
    def add_done_callback(self, callback: Callable[[], object]) -> None: ...

class NativeClient:
    @staticmethod
    def create(
        rpc_layer: str,
        address: str,
        name: str,
        timeout_ms: int,
        key: Optional[str] = None,
        ca_certs_pem: Sequence[bytes] = ...,
        encoding: str = "binary",
    ) -> NativeClient: ...
    @property
    def address(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def timeout_ms(self) -> int: ...
    def settings(
        self,
    ) -> Tuple[str, str, str, int, Optional[str], List[List[int]], str]: ...
    def methods_json(self) -> str: ...
    def refresh(self) -> None: ...
    def call(
        self,
        method_name: str,
        args: List[_Triple],
        output_specs: Optional[List[_Spec]] = None,
        timeout_ms: Optional[int] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> NativePending: ...
    def call_blocking(
        self,
        method_name: str,
        args: List[_Triple],
        output_specs: Optional[List[_Spec]] = None,
        timeout_ms: Optional[int] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> List[Tuple[str, List[int], Union[TensorBuffer, List[bytes]]]]: ...
    def register(self, name: str, component: bytes, export: Optional[str] = None) -> str: ...
    def delete(self, name: str) -> List[int]: ...
    def barrier(self, name: str, member: str, count: int, timeout_ms: int) -> List[str]: ...

class NativeServer:
    @staticmethod
    def create(rpc_layer: str, address: str) -> NativeServer: ...
    @staticmethod
    def join_cluster(address: str, nats: str, name: str, rank: int) -> NativeServer: ...
    @property
    def address(self) -> str: ...
    def register(
        self,
        name: str,
        component: Optional[bytes] = None,
        path: Optional[str] = None,
        export: Optional[str] = None,
    ) -> str: ...
    def start(self) -> None: ...
    def join(self) -> None: ...
    def shutdown(self) -> None: ...

_Worker = Tuple[str, int, str, int]

class NativeRpc:
    @staticmethod
    def attach(client: NativeClient, name: str, world_size: Optional[int] = None) -> NativeRpc: ...
    def rpc_sync(
        self,
        to: str,
        method: str,
        args: list,
        timeout_s: float,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> List[Tuple[str, List[int], Union[TensorBuffer, List[bytes]]]]: ...
    def rpc_async(
        self,
        to: str,
        method: str,
        args: list,
        timeout_s: float,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> NativePending: ...
    def get_worker_info(self, name: str) -> _Worker: ...
    def get_all_worker_infos(self) -> List[_Worker]: ...
    def get_current_worker_info(self) -> _Worker: ...
    def shutdown(self) -> None: ...

class NativeCoordinator:
    def __init__(self, client: NativeClient) -> None: ...
    def schedule(
        self,
        method: str,
        args: list,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> NativePending: ...
    def join(self) -> None: ...
    def done(self) -> bool: ...

def speaks_nats(address: str, timeout_ms: int = 1000) -> bool: ...

"""PaddlePaddle's ``paddle.distributed.rpc`` over a wasmrpc cluster.

Not available yet: every function raises :class:`wasmrpc.errors.UnimplementedError` (also a
``NotImplementedError``) naming the missing cluster support.
"""

from .._cluster import unavailable

init_rpc = unavailable("wasmrpc.distributed.rpc.init_rpc")
rpc_sync = unavailable("wasmrpc.distributed.rpc.rpc_sync")
rpc_async = unavailable("wasmrpc.distributed.rpc.rpc_async")
shutdown = unavailable("wasmrpc.distributed.rpc.shutdown")
get_worker_info = unavailable("wasmrpc.distributed.rpc.get_worker_info")
get_all_worker_infos = unavailable("wasmrpc.distributed.rpc.get_all_worker_infos")
get_current_worker_info = unavailable("wasmrpc.distributed.rpc.get_current_worker_info")

__all__ = [
    "init_rpc",
    "rpc_sync",
    "rpc_async",
    "shutdown",
    "get_worker_info",
    "get_all_worker_infos",
    "get_current_worker_info",
]

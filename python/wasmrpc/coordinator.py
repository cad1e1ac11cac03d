"""TensorFlow's ``ClusterCoordinator`` over a wasmrpc cluster.

Not available yet: making a :class:`ClusterCoordinator` raises
:class:`wasmrpc.errors.UnimplementedError` (also a ``NotImplementedError``) naming the missing
cluster support.
"""

from ._cluster import MISSING
from .errors import UnimplementedError


class ClusterCoordinator:
    """Not available yet (needs cluster support)."""

    def __init__(self, *args, **kwargs):
        raise UnimplementedError(MISSING.format(what="wasmrpc.coordinator.ClusterCoordinator"))


__all__ = ["ClusterCoordinator"]

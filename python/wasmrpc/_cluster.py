"""What the cluster APIs say until this package has cluster support."""

from .errors import UnimplementedError

MISSING = (
    "{what} needs wasmrpc's cluster support (workers joined over NATS, `wasmrpc serve "
    "--cluster`), which this version of the Python package does not have yet; "
    "wasmrpc.rpc.Client and wasmrpc.rpc.Server work against one server"
)


def unavailable(what: str):
    """A function that raises UnimplementedError naming ``what``."""

    def missing(*args, **kwargs):
        raise UnimplementedError(MISSING.format(what=what))

    missing.__name__ = what.rsplit(".", 1)[-1]
    missing.__doc__ = f"Not available yet: {MISSING.format(what=what)}."
    return missing

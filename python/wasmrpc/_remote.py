"""What Paddle's rpc and TF's coordinator share: naming the method a call runs, its arguments as
tensors, and the handle of a call that completes later."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from .errors import InvalidArgumentError, RpcError
from .rpc import Client, StatusOrResult


def method_name(fn: Union[str, Callable[..., Any]]) -> str:
    """The method a call runs: ``fn`` itself, or the ``__name__`` of a function standing for it
    (Paddle's and TF's ``fn`` is a Python function; here it names a registered method)."""
    if isinstance(fn, str):
        return fn
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(
        f"fn is the name of a method registered in the cluster (or a function of that name), "
        f"not {type(fn).__name__}"
    )


def wire_args(
    client: Client, method: str, args: Optional[Sequence[Any]], kwargs: Optional[dict]
) -> list:
    """``args`` as tensors for ``method`` (its input dtypes guide Python numbers); ``kwargs``
    are refused, a method's tensors being positional."""
    if kwargs:
        raise InvalidArgumentError(
            "a wasmrpc method takes its tensors in order: pass them as args, not kwargs"
        )
    if method not in client._methods:
        # Registered since the client was made (on any worker).
        try:
            client.refresh()
        except RpcError:
            pass
    return client._args(method, args)


class Pending:
    """A call that completes later: ``done()`` and ``await``; subclasses name the wait."""

    __slots__ = ("_result",)

    def __init__(self, result: StatusOrResult):
        self._result = result

    def done(self) -> bool:
        """Whether the call has completed (never waits)."""
        return self._result.done()

    def __await__(self):
        return self._result.__await__()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {'done' if self.done() else 'pending'}>"

"""The floor of a Python call without the SDK (bench-only): the WIT export by hand, answering `noop`
like host/benches/guests/py_noop, so that `py_noop` less this is what the SDK costs a call
(docs/benchmarks.md, issue 33, "Faster calls").

Build: `wasmrpc build host/benches/guests/py_bare/app.py`.
"""

from wit_world import exports
from wit_world.imports import types


def _spec(name, shape):
    return types.TensorSpec(name=name, dtype=types.Dtype.F32, shape=shape)


class Method(exports.Method):
    def signatures(self):
        return [types.MethodSignature(name="noop", inputs=[_spec("a", None), _spec("b", None)],
                                      outputs=[_spec("output", [])],
                                      doc="Returns 0 without the SDK: the floor of a Python call.")]

    def call(self, name, args):
        return [types.Tensor(dtype=types.Dtype.F32, shape=[], data=bytes(4))]

"""The componentize-py glue (component.py) against STUBBED bindings.

componentize-py generates `wit_world` and `componentize_py_types` only while it builds a component,
so these tests put stand-ins into sys.modules: the same names and shapes as the code
`componentize-py -d wit/tensor.wit -w tensor-function bindings DIR` (0.25.1) writes (an enum `Dtype`
with upper-case members, dataclasses for the records, `Error_<Case>` classes, the `Method`
protocol, `Err` an exception carrying the error). That the real bindings agree is shown by
building examples/python/softmax with componentize-py and calling it (README.md).
"""

import dataclasses
import enum
import importlib
import struct
import sys
import types as pytypes
from typing import List, Optional

import pytest



def _stub_bindings():
    """Stand-in modules for the generated bindings, as a {name: module} dict."""
    t = pytypes.ModuleType("wit_world.imports.types")
    t.Dtype = enum.Enum("Dtype", ["BOOL", "U8", "U16", "U32", "U64", "I8", "I16", "I32", "I64",
                                  "F16", "BF16", "F32", "F64", "BYTES"], start=0)

    @dataclasses.dataclass
    class Tensor_:
        dtype: t.Dtype
        shape: List[int]
        data: bytes

    @dataclasses.dataclass
    class TensorSpec:
        name: str
        dtype: t.Dtype
        shape: Optional[List[Optional[int]]]

    @dataclasses.dataclass
    class MethodSignature:
        name: str
        inputs: list
        outputs: list
        doc: str

    t.Tensor, t.TensorSpec, t.MethodSignature = Tensor_, TensorSpec, MethodSignature
    for case in ["InvalidArgument", "FailedPrecondition", "OutOfRange", "Unimplemented",
                 "Internal", "ResourceExhausted", "NotFound"]:
        setattr(t, f"Error_{case}", dataclasses.make_dataclass(f"Error_{case}", [("value", str)]))

    log = pytypes.ModuleType("wit_world.imports.log")
    log.Level = enum.Enum("Level", ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"], start=0)
    log.lines = []
    log.log = lambda level, message: log.lines.append((level.name, message))

    exports = pytypes.ModuleType("wit_world.exports")

    class Method:  # the generated Protocol, reduced to what matters: a base class
        pass

    exports.Method = Method
    imports = pytypes.ModuleType("wit_world.imports")
    imports.types, imports.log = t, log
    world = pytypes.ModuleType("wit_world")
    world.exports, world.imports = exports, imports

    cpt = pytypes.ModuleType("componentize_py_types")

    @dataclasses.dataclass(frozen=True)
    class Err(Exception):
        value: object

    cpt.Err = Err
    return {"wit_world": world, "wit_world.exports": exports, "wit_world.imports": imports,
            "wit_world.imports.types": t, "wit_world.imports.log": log,
            "componentize_py_types": cpt}


@pytest.fixture
def bindings(monkeypatch):
    """The stubs in sys.modules, and the glue modules imported anew against them."""
    stubs = _stub_bindings()
    for name, module in stubs.items():
        monkeypatch.setitem(sys.modules, name, module)
    _forget_glue()
    yield stubs
    _forget_glue()


def _forget_glue():
    """Drops the glue modules, so the next import binds to the bindings in sys.modules then."""
    import wasmrpc_guest
    for name in ("component", "log"):
        sys.modules.pop(f"wasmrpc_guest.{name}", None)
        wasmrpc_guest.__dict__.pop(name, None)


@pytest.fixture
def app(bindings):
    """A user's app module: nothing but decorated functions, as app.py would be."""
    module = pytypes.ModuleType("user_app")
    sys.modules["user_app"] = module
    source = '''
from wasmrpc_guest import Tensor, function, OutOfRange

@function
def scale(x: Tensor["bfloat16", [None]], factor: Tensor["bfloat16", []]) -> Tensor["bfloat16"]:
    """Scales."""
    f = factor.item()
    return [v * f for v in x.flat()]

@function
def pick(x: Tensor["int32"], i: Tensor["uint64", []]) -> Tensor["int32", []]:
    if i.item() >= x.size:
        raise OutOfRange(f"index {i.item()} of {x.size}")
    return x.flat()[i.item()]
'''
    exec(compile(source, "user_app.py", "exec"), module.__dict__)
    yield module
    del sys.modules["user_app"]


def test_the_decorator_gives_the_app_module_its_method_class(app, bindings):
    from wasmrpc_guest.component import Method
    assert app.Method is Method
    assert issubclass(Method, bindings["wit_world.exports"].Method)


def test_an_app_that_defines_method_itself_keeps_it(bindings):
    module = pytypes.ModuleType("own_app")
    module.Method = object
    sys.modules["own_app"] = module
    try:
        exec("from wasmrpc_guest import Tensor, function\n"
             "@function\ndef f() -> Tensor['f32']: ...", module.__dict__)
        assert module.Method is object
    finally:
        del sys.modules["own_app"]


def test_without_bindings_the_decorator_adds_nothing():
    module = pytypes.ModuleType("plain_app")
    sys.modules["plain_app"] = module
    try:
        exec("from wasmrpc_guest import Tensor, function\n"
             "@function\ndef f() -> Tensor['f32']: ...", module.__dict__)
        assert not hasattr(module, "Method")
    finally:
        del sys.modules["plain_app"]


def test_signatures_are_the_wit_records(app, bindings):
    t = bindings["wit_world.imports.types"]
    sigs = app.Method().signatures()
    assert [s.name for s in sigs] == ["scale", "pick"]
    assert sigs[0] == t.MethodSignature(
        name="scale",
        inputs=[t.TensorSpec("x", t.Dtype.BF16, [None]), t.TensorSpec("factor", t.Dtype.BF16, [])],
        outputs=[t.TensorSpec("output", t.Dtype.BF16, None)], doc="Scales.")
    assert sigs[1].outputs == [t.TensorSpec("output", t.Dtype.I32, [])]


def test_every_dtype_maps_onto_its_wit_case(bindings):
    from wasmrpc_guest import dtypes
    component = importlib.import_module("wasmrpc_guest.component")
    t = bindings["wit_world.imports.types"]
    assert {d.wit for d in dtypes.ALL} == {m.name.lower() for m in t.Dtype}
    assert component._dtype("bytes") is t.Dtype.BYTES


def test_call_converts_both_ways(app, bindings):
    t = bindings["wit_world.imports.types"]
    x = t.Tensor(t.Dtype.BF16, [2], b"\x80\x3f\x00\xc0")  # [1.0, -2.0]
    factor = t.Tensor(t.Dtype.BF16, [], b"\x40\x40")  # 3.0
    (out,) = app.Method().call("scale", [x, factor])
    assert out == t.Tensor(t.Dtype.BF16, [2], b"\x40\x40\xc0\xc0")  # [3.0, -6.0]
    arg = t.Tensor(t.Dtype.I32, [3], struct.pack("<3i", 4, 5, 6))
    (out,) = app.Method().call("pick", [arg, t.Tensor(t.Dtype.U64, [], struct.pack("<Q", 2))])
    assert out == t.Tensor(t.Dtype.I32, [], struct.pack("<i", 6))


def test_errors_are_raised_as_err_of_the_wit_case(app, bindings):
    t = bindings["wit_world.imports.types"]
    err = bindings["componentize_py_types"].Err
    arg = t.Tensor(t.Dtype.I32, [1], struct.pack("<i", 4))
    with pytest.raises(err) as info:
        app.Method().call("pick", [arg, t.Tensor(t.Dtype.U64, [], struct.pack("<Q", 9))])
    assert info.value.value == t.Error_OutOfRange("index 9 of 1")
    with pytest.raises(err) as info:
        app.Method().call("nope", [])
    assert isinstance(info.value.value, t.Error_NotFound)
    with pytest.raises(err) as info:
        app.Method().call("pick", [arg])
    assert info.value.value == t.Error_InvalidArgument("method pick takes 2 arguments, got 1")


def test_log_lines_go_to_the_wit_log_inside_a_component(bindings):
    log = importlib.import_module("wasmrpc_guest.log")
    log.warn("slow")
    log.log("debug", 3)
    assert bindings["wit_world.imports.log"].lines == [("WARN", "slow"), ("DEBUG", "3")]
    with pytest.raises(ValueError):
        log.log("loud", "x")


def test_log_lines_go_to_stderr_on_plain_cpython(capsys):
    _forget_glue()
    log = importlib.import_module("wasmrpc_guest.log")
    log.info("hello")
    assert capsys.readouterr().err == "[INFO] hello\n"


def test_method_can_be_imported_from_the_package_for_apps_that_decorate_elsewhere(bindings):
    import wasmrpc_guest
    from wasmrpc_guest import Method
    assert Method is importlib.import_module("wasmrpc_guest.component").Method
    with pytest.raises(AttributeError):
        wasmrpc_guest.Nothing


def test_without_bindings_method_is_not_importable():
    with pytest.raises(ModuleNotFoundError, match="componentize_py_types|wit_world"):
        from wasmrpc_guest import Method  # noqa: F401

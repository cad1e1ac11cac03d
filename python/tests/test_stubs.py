"""The type stubs (.pyi) name what the modules have, so editors complete the real API."""

import ast
import pathlib

import pytest

import wasmrpc
from wasmrpc import _native, rpc

PACKAGE = pathlib.Path(wasmrpc.__file__).parent


def _stub_names(stub):
    tree = ast.parse((PACKAGE / stub).read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("__")
            }
    return names


@pytest.mark.parametrize("stub, module", [("rpc.pyi", rpc), ("_native.pyi", _native)])
def test_every_class_and_method_in_a_stub_exists(stub, module):
    for cls_name, methods in _stub_names(stub).items():
        cls = getattr(module, cls_name)
        for method in methods:
            assert hasattr(cls, method), f"{stub}: {cls_name}.{method}"


def test_the_package_is_marked_typed():
    assert (PACKAGE / "py.typed").exists()

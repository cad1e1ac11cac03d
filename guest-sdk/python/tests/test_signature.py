"""Signatures derived from annotations and docstrings, and the mistakes refused at decoration."""

from __future__ import annotations  # the annotations below are strings: they must still resolve

from typing import Tuple

import pytest

from wasmrpc_guest import Tensor, function
from wasmrpc_guest.dtypes import FLOAT32, INT64, STRING
from wasmrpc_guest.signature import Spec


def test_the_issue_example(fresh_registry):
    @function
    def scale(x: Tensor["float32"], factor: Tensor["float32", []]) -> Tensor["float32"]:
        """Multiplies every element by a scalar factor."""

    (sig,) = fresh_registry.signatures()
    assert sig.name == "scale"
    assert sig.inputs == (Spec("x", FLOAT32, None), Spec("factor", FLOAT32, ()))
    assert sig.outputs == (Spec("output", FLOAT32, None),)
    assert sig.doc == "Multiplies every element by a scalar factor."


def test_decorating_leaves_the_function_callable():
    @function
    def double(x: Tensor["int64"]) -> Tensor["int64"]:
        return [2 * v for v in x.flat()]

    assert double(Tensor([1, 2], dtype="int64")) == [2, 4]


def test_a_tuple_return_is_several_outputs_named_or_numbered(fresh_registry):
    @function
    def split(x: Tensor["string", [None]]) -> tuple[Tensor["string"], Tensor["int64", [-1]]]:
        """Two outputs.

        The docstring is cleaned of its indentation."""

    @function(name="max", outputs=["values", "indices"])
    def max_(x: Tensor["float32"]) -> Tuple[Tensor["float32"], Tensor["int64"]]:
        pass

    split_sig, max_sig = fresh_registry.signatures()
    assert split_sig.inputs == (Spec("x", STRING, (None,)),)
    assert split_sig.outputs == (Spec("output_0", STRING, None), Spec("output_1", INT64, (None,)))
    assert split_sig.doc == "Two outputs.\n\nThe docstring is cleaned of its indentation."
    assert max_sig.name == "max"
    assert [o.name for o in max_sig.outputs] == ["values", "indices"]
    assert max_sig.doc == ""


def test_methods_are_listed_in_decoration_order_and_names_are_unique(fresh_registry):
    @function
    def b(x: Tensor["int8"]) -> Tensor["int8"]: ...

    @function
    def a() -> Tensor["int8"]: ...

    assert [s.name for s in fresh_registry.signatures()] == ["b", "a"]
    assert fresh_registry.signatures()[1].inputs == ()
    with pytest.raises(TypeError, match="two methods are named 'a'"):
        @function(name="a")
        def other(x: Tensor["int8"]) -> Tensor["int8"]: ...


@pytest.mark.parametrize("source,message", [
    ("def f(x) -> Tensor['f32']: ...", "parameter `x` of f: annotate it Tensor"),
    ("def f(x: int) -> Tensor['f32']: ...", "parameter `x` of f: annotate it .* not <class 'int'>"),
    ("def f(x: Tensor) -> Tensor['f32']: ...", "Tensor needs a dtype"),
    ("def f(x: Tensor['f32']): ...", "annotate the return"),
    ("def f(x: Tensor['f32']) -> int: ...", "output `output` of f"),
    ("def f(*x: Tensor['f32']) -> Tensor['f32']: ...", "plain positional parameters only"),
    ("def f(*, x: Tensor['f32']) -> Tensor['f32']: ...", "plain positional parameters only"),
    ("def f(x: Tensor['f32'] = None) -> Tensor['f32']: ...", "have no defaults"),
    ("def f(x: Tensor['f32']) -> tuple[Tensor['f32'], ...]: ...", "lists each output"),
    ("def _f(x: Tensor['f32']) -> Tensor['f32']: ...", "method name '_f'"),
])
def test_what_the_wit_cannot_express_is_refused_at_decoration(source, message):
    scope = {"Tensor": Tensor}
    exec(source, scope)
    func = scope["f"] if "f" in scope else scope["_f"]
    with pytest.raises(TypeError, match=message):
        function(func)


def test_method_names_follow_the_shared_rule():
    def f(x: Tensor["f32"]) -> Tensor["f32"]: ...

    for bad in ["a/b", "", "x" * 129, ".a"]:
        with pytest.raises(TypeError, match="method name"):
            function(name=bad)(f)
    function(name="v1.scale-2_x")(f)


def test_output_names_must_match_the_outputs():
    def f(x: Tensor["f32"]) -> tuple[Tensor["f32"], Tensor["f32"]]: ...

    for bad in (["one"], ["a", "a"], ["a", "b", "c"]):
        with pytest.raises(TypeError, match="outputs= needs 2 distinct names"):
            function(outputs=bad)(f)

"""How kernel.py meets the rest of qnb: one base class the frontend recognises, named
records for the launch signature, and the kernel cache through its public API only."""

import ast
import pathlib

import numpy as np
import pytest

import qnb
from qnb.function import QnbFunction
from qnb.signature import ArgSpec
from tests.helpers import define

KERNEL_PY = pathlib.Path(qnb.__file__).parent / "kernel.py"

SCOPE, _ = define("""
    @qnb.func
    def twice(v):
        return v * 2.0

    @qnb.kernel
    def k(x, scale: qnb.f32, n: qnb.i32, mode: qnb.Template):
        x[0] = twice(x[0]) * scale + n
    """)


def test_kernels_and_funcs_are_one_kind_of_function():
    kernel, func = SCOPE["k"], SCOPE["twice"]
    assert isinstance(kernel, QnbFunction) and isinstance(func, QnbFunction)
    assert (kernel.decorator, func.decorator) == ("@qnb.kernel", "@qnb.func")
    assert kernel.parsed.name == "k" and func.parsed.name == "twice"


def test_decorating_again_names_the_decorator_from_the_class():
    with pytest.raises(qnb.QnbTypeError, match=r"'k' is already a @qnb\.kernel"):
        qnb.func(SCOPE["k"])
    with pytest.raises(qnb.QnbTypeError, match=r"'twice' is already a @qnb\.func"):
        qnb.kernel(SCOPE["twice"])


def test_the_signature_is_named_records():
    x = np.zeros(4, np.float32)
    signature, runtime = SCOPE["k"]._signature((x, 1.5, 3, (1, "a")))
    assert all(isinstance(spec, ArgSpec) for spec in signature)
    array, scale, n, mode = signature
    assert (array.kind, array.dtype, array.ndim) == ("array", qnb.f32, 1)
    assert (scale.kind, scale.dtype, n.kind, n.dtype) == ("scalar", qnb.f32, "scalar", qnb.i32)
    assert mode.kind == "template" and mode.value == (1, "a")
    assert mode.shown == "Template = (1, 'a')"
    assert [spec.described() for spec in signature] == [
        "Array[f32, 1]",
        "f32",
        "i32",
        "Template = (1, 'a')",
    ]
    assert runtime == [x, 1.5, 3]  # a Template is not a runtime argument


def test_kernel_py_reaches_the_cache_through_its_public_api_only():
    tree = ast.parse(KERNEL_PY.read_text())
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("qnb.cache."):
            private.append(node.module)
        if isinstance(node, ast.Import):
            private += [a.name for a in node.names if a.name.startswith("qnb.cache.")]
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "cache"
            and node.attr in {"lookup", "store", "key", "report", "fresh", "cli"}
        ):
            private.append(f"cache.{node.attr}")
    assert private == []
    import qnb.cache

    def is_cache(value):  # `cache` (from qnb import cache) or `_cache()`
        if isinstance(value, ast.Call):
            return isinstance(value.func, ast.Name) and value.func.id == "_cache"
        return isinstance(value, ast.Name) and value.id == "cache"

    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_cache(node.value)
    }
    assert used and used <= set(qnb.cache.__all__), used - set(qnb.cache.__all__)

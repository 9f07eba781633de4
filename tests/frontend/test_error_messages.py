"""Errors say what the user wrote, in the user's terms (Python's spelling, no internal class
names, no template placeholders), at the user's own line."""

from pathlib import Path

import numpy as np
import pytest

import qnb
from tests.helpers import define


@pytest.fixture(autouse=True)
def cpu():
    with qnb.backend("cpu"):
        yield


def error_of(body: str, error=qnb.QnbError) -> qnb.QnbError:
    """The error launching ``def k(x, y):`` with ``body`` (lines split on "; ")."""
    lines = "".join(f"    {line}\n" for line in body.split("; "))
    with pytest.raises(error) as info:
        scope, _ = define(f"import math\n@qnb.kernel\ndef k(x, y):\n{lines}")
        scope["k"](np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32))
    err = info.value
    assert err.lineno is not None and err.lineno >= 4, err
    return err


@pytest.mark.parametrize(
    "body,expected",
    [
        ("t = Tile16.load(x, 0, 0); t.T.cholesky_()", "variable (t.cholesky_(...), not an"),
        ("s = x.shape", "x.shape must be indexed: x.shape[d]"),
        ("t = Tile16.zeros(); s = t.sum", "t.sum is a method; call it"),
        ("x.shape()", "x.shape must be indexed"),
        ("t = Tile16(x)", "expected a dtype such as qnb.f32, got an array"),
        ("y[0, 0] = Tile16.load(x, 0, 0)", "t.store(y, row, col)"),
        ("t = Tile16.zeros(); t[0:2, 0] = 1", "cannot be sliced"),
        ("t = Tile16.zeros(); u = t << 2", "the operator << needs i32 operands, not f32"),
        ("t = Tile16.zeros(); t <<= 2", "the operator << needs i32 operands, not f32"),
        ("b = 1 in (1, 2)", "the comparison 'in' is not"),
        ("b = x is y", "the comparison 'is' is not"),
        ("v = Vec16.eye()", "Vec16 has no attribute 'eye'"),
        ("y[0, 0] = np.float32", "the dtype float32 cannot be used as a value"),
        ("y[0, 0] = qnb.Template", "qnb.Template cannot be used as a value"),
    ],
)
def test_messages_speak_the_users_language(body, expected):
    err = error_of(body)
    assert expected in err.message
    internals = ("{", "_Method", "ArrayView", "_Template", "Vec16()", "float32()", "LShift", "In ")
    assert not any(word in err.message for word in internals), err


@pytest.mark.parametrize(
    "call", ["math.erf(x[0, 0])", "math.floor(x[0, 0])", "print(1)", "np.zeros(3)",
             "np.arctan(x[0, 0])", "enumerate(3)", "reversed(3)", "__import__('os')"],
)  # fmt: skip
def test_library_functions_are_not_supported_and_the_message_lists_what_is(call):
    err = error_of(f"z = {call}")
    assert isinstance(err, qnb.QnbSyntaxError)  # an unsupported construct (DESIGN)
    name = call.partition("(")[0]
    assert err.message.startswith(f"{name} is not supported in kernels")
    assert "qnb.exp" in err.message and "@qnb.func" in err.message
    assert "pass it as a parameter" not in err.message and "decorate it" not in err.message


def test_matmul_in_place_works():
    scope, _ = define("""
        @qnb.kernel
        def k(x, y):
            t = Tile16.load(x, 0, 0)
            t @= Tile16.eye() * 2.0
            t.store(y, 0, 0)
        """)
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    y = np.zeros_like(x)
    scope["k"](x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_a_template_tuple_names_its_bad_element():
    scope, _ = define("@qnb.kernel\ndef k(y, n: qnb.Template):\n    y[0] = 1\n")
    with pytest.raises(qnb.QnbTypeError) as info:
        scope["k"](np.zeros(1), (1, (2, np.zeros(2))))
    assert "element [1][1] is of type numpy.ndarray" in info.value.message
    assert info.value.lineno == 2


def test_decorating_twice_points_at_the_def():
    scope, _ = define("def f(y):\n    y[0] = 1\n")
    for decorate in (qnb.kernel, qnb.func):
        with pytest.raises(qnb.QnbTypeError) as info:
            decorate(qnb.kernel(scope["f"]))
        assert info.value.lineno == 1 and "already a @qnb.kernel" in info.value.message


def test_bad_array_annotations_are_qnb_type_errors_at_the_users_line():
    for make in (lambda: qnb.Array[qnb.f32, 4], lambda: qnb.Array[np.int64]):
        with pytest.raises(qnb.QnbTypeError) as info:
            make()
        assert info.value.filename == __file__ and info.value.lineno is not None


def test_an_unavailable_backend_is_reported_at_the_def_line():
    from qnb.backends import registry

    if registry.get("cuda").info().available:
        pytest.skip("cuda is available here")
    scope, _ = define("@qnb.kernel(backend='cuda')\ndef k(y):\n    y[0] = 1\n")
    with pytest.raises(qnb.BackendError) as info:
        scope["k"](np.zeros(1))
    assert info.value.lineno == 2


@pytest.mark.parametrize(
    "body",
    ["if qnb.static(use_fast_path):;     y[0, 0] = 1.0", "y[0, 0] = qnb.static(use_fast_path)"],
)
def test_an_undefined_name_inside_static_is_named(body):
    err = error_of(body, qnb.QnbTypeError)
    assert err.message == "name 'use_fast_path' is not defined", err.message


def test_a_dtype_chosen_by_a_runtime_condition_says_so():
    err = error_of("dt = qnb.f32 if x[0, 0] > 0 else qnb.f16", qnb.QnbTypeError)
    assert "dtype f32 cannot be chosen by a runtime condition" in err.message
    assert "qnb.static" in err.message and "arithmetic" not in err.message


def test_a_name_bound_differently_on_two_paths_says_what_it_holds():
    err = error_of("p = 3; if x[0, 0] > 0:;     p = (1, 2); y[0, 0] = p[0]", qnb.QnbTypeError)
    assert "'p' is bound to the tuple (1, 2)" in err.message, err.message
    assert "an array, a tuple, a dtype" not in err.message


@pytest.mark.parametrize(
    ("name", "value", "body", "hint"),
    [
        ("L", [1, 2], "x[0, 0] = L[0]", "make it a tuple"),
        ("ns", __import__("types").SimpleNamespace(flag=[1]), "x[0, 0] = 1.0 if ns.flag else 0.0",
         "make it a tuple"),
        ("ns", __import__("types").SimpleNamespace(f=lambda: 1), "x[0, 0] = 1.0 if ns.f else 0.0",
         "decorate it with @qnb.func"),
        ("ns", __import__("types").SimpleNamespace(a=np.ones(2)), "x[0, 0] = ns.a[0]",
         "pass it as a parameter"),
        ("A", np.ones(3), "x[0, 0] = A[0]", "pass it as a parameter"),
    ],
)  # fmt: skip
def test_a_capture_error_says_what_to_do_with_that_kind_of_value(name, value, body, hint):
    scope, _ = define(f"@qnb.kernel\ndef k(x):\n    {body}\n", {name: value})
    with pytest.raises(qnb.QnbCaptureError) as info:
        scope["k"](np.zeros((2, 2), np.float32))
    assert info.value.message.endswith(hint) or hint in info.value.message


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: qnb.Tile16.zeros(), "Tile16.zeros"),
        (lambda: qnb.Tile16(qnb.f32), "Tile16(...)"),
        (lambda: qnb.Vec16.zeros(), "Vec16.zeros"),
        (lambda: qnb.program_id(0), "program_id"),
    ],
)
def test_a_language_name_called_outside_a_kernel_says_where_it_runs(call, name):
    """Tiles live inside kernels: a qnb error at the user's line, which also says how to
    look at a tile (a trace of the kernel, TileView)."""
    with pytest.raises(qnb.QnbOutsideKernelError) as info:
        call()
    err = info.value
    assert isinstance(err, qnb.QnbError) and isinstance(err, RuntimeError)
    assert err.message.startswith(f"{name} was called outside a kernel.")
    assert "@qnb.kernel" in err.message
    assert (err.filename, err.lineno) == (__file__, call.__code__.co_firstlineno)
    if name.startswith(("Tile", "Vec")):
        assert "Tiles and vecs live only inside kernels" in err.message
        assert "kernel.trace[grid](*args)" in err.message and "TileView" in err.message
    else:
        assert "program_id runs only inside kernels" in err.message


def test_outside_a_kernel_the_traceback_holds_one_frame_of_qnb():
    import traceback

    with pytest.raises(qnb.QnbOutsideKernelError) as info:
        qnb.Tile16.zeros()
    frames = traceback.extract_tb(info.value.__traceback__)
    # qnb's frames are those of files in its package directory, not those whose path
    # holds "qnb" (a checkout named qnb holds this test file too)
    package = Path(qnb.__file__).resolve().parent
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(package)]
    assert [f.name for f in ours] == ["zeros"]

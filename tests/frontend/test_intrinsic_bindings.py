"""Each typing rule is bound to the qnb.language stub it implements, and the two agree:
every stub has a rule, every rule names a stub, their parameters match (names, order,
defaults, keyword-only). The check runs at import; here it is shown to refuse a
deliberately mismatched stub/rule pair with a clear message."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import qnb
from qnb import language
from qnb.errors import QnbOutsideKernelError
from qnb.frontend import bindings, semantics
from qnb.frontend.bindings import BindingError, check_bindings, rule
from qnb.frontend.capture import _FOREIGN_INTRINSICS


def test_every_language_stub_has_one_rule_whose_parameters_match():
    stubs = bindings.language_stubs(language)
    check_bindings(semantics.RULES, stubs)  # what importing semantics ran
    named = {f"{s.__qualname__}" for s in stubs}
    # the enumeration sees every kind of stub (it is not vacuous)
    for expected in (
        "exp",
        "where",
        "program_id",
        "static",
        "Tile16",  # Tile16(dtype)
        "Tile16.zeros",
        "Tile16.load",
        "Tile16.load_",
        "Tile16.sum",
        "Tile16.solve_triangular_",
        "Vec16.load",
        "Vec16.load_row",
        "Vec16.store_col",
        "Vec16.sum",
    ):
        assert expected in named
    assert len(stubs) == len({id(s) for s in stubs}) >= 50
    bound = {id(s) for r in semantics.RULES for s in r.stubs}
    assert bound == {id(s) for s in stubs}


def test_the_walkers_tables_come_from_the_bindings():
    for name in ("exp", "maximum", "mma", "outer", "arange", "program_id", "where", "static"):
        found = semantics.INTRINSICS[name]
        assert getattr(language, name) in found.stubs
    assert semantics.SHAPED_INTRINSICS[("tile", "class")].stubs == (language.Tile16,)
    assert semantics.SHAPED_INTRINSICS[("vec", "load_row")].stubs == (language.Vec16.load_row,)
    assert language.Vec16.sum in semantics.TILE_METHODS["sum"].stubs
    assert language.Tile16.sum in semantics.TILE_METHODS["sum"].stubs
    # math/NumPy twins name a bound intrinsic
    assert set(_FOREIGN_INTRINSICS.values()) <= set(semantics.INTRINSICS)
    # and no string joins a rule to its stub: each stub's tag is its own qualified name
    for stub in bindings.language_stubs(language):
        tag = getattr(stub, "_qnb_intrinsic", None)
        assert tag is None or tag == stub.__qualname__


# ---------------------------------------------------------------------------- refusals


def _stub_pair(stub_source: str, rule_source: str):
    """A stub and a rule bound to it, both defined from source (the rule's parameters
    after the (builder, node, target) every rule takes)."""
    scope: dict = {}
    exec(textwrap.dedent(f"def fake{stub_source}:\n    '''A stub.'''\n"), scope)  # noqa: S102
    stub = scope["fake"]
    exec(f"def fake_rule(builder, node, target, {rule_source}): pass", scope)  # noqa: S102
    return stub, rule(stub)(scope["fake_rule"])


@pytest.mark.parametrize(
    ("stub", "rule_params", "why"),
    [
        ("(a, b)", "a, c", "parameter 2 is 'c' in the rule, 'b' in the stub"),
        ("(a, b=1)", "a, b=2", "'b' defaults to 2 in the rule, defaults to 1 in the stub"),
        ("(a, b=1)", "a, b", "'b' has no default in the rule, defaults to 1 in the stub"),
        ("(a, b=0)", "a, b=0.0", "'b' defaults to 0.0 in the rule, defaults to 0 in the stub"),
        (
            "(arr, *, other=0)",
            "arr, other=0",
            "'other' is positional or keyword in the rule, keyword-only in the stub",
        ),
        ("(x)", "x, y=None", "the rule takes 2 parameters, the stub 1"),
    ],
)
def test_a_mismatched_stub_and_rule_are_refused_with_a_clear_message(stub, rule_params, why):
    fake, fake_rule = _stub_pair(stub, rule_params)
    with pytest.raises(BindingError) as info:
        check_bindings([fake_rule], [fake])
    message = str(info.value)
    assert message.startswith(f"the rule fake_rule takes ({rule_params}) but qnb.fake takes ")
    assert message.endswith(why)


def test_a_matching_pair_passes():
    fake, fake_rule = _stub_pair(
        "(arr, row, *, other=0, dtype=None)", "arr, row, *, other=0, dtype=None"
    )
    check_bindings([fake_rule], [fake])


def test_a_stub_without_a_rule_is_refused():
    fake, fake_rule = _stub_pair("(x)", "x")
    lonely, _ = _stub_pair("(y)", "y")
    with pytest.raises(BindingError, match=r"no typing rule for qnb\.fake: bind one with @rule"):
        check_bindings([fake_rule], [fake, lonely])


def test_a_rule_bound_to_no_stub_or_to_a_foreign_object_is_refused():
    with pytest.raises(BindingError, match="is bound to no language stub"):
        rule()(lambda builder, node, target: None)
    with pytest.raises(
        BindingError, match="is bound to <built-in function sin>, which is not a stub"
    ):
        check_bindings([rule(math.sin, name="sin")(lambda builder, node, target, x: None)], [])


def test_a_stub_with_two_rules_and_a_method_name_with_two_rules_are_refused():
    fake, first = _stub_pair("(x)", "x")
    second = rule(fake)(first.fn)
    with pytest.raises(BindingError, match=r"qnb\.fake has two rules"):
        check_bindings([first, second], [fake])

    class A:
        def m(self, x):
            """A method."""

    class B:
        def m(self, x):
            """Another of the same name."""

    with pytest.raises(BindingError, match="the method 'm' has two rules"):
        check_bindings(
            [rule(A.m)(lambda b, n, t, x: None), rule(B.m)(lambda b, n, t, x: None)], [A.m, B.m]
        )


def test_a_real_stub_whose_rule_disagrees_fails_the_import():
    """Change one stub's signature (as an edit of language.py would) and the import of
    the rules fails, naming both."""
    code = textwrap.dedent(
        """
        import importlib
        import qnb.language as language
        from qnb.frontend import semantics
        def row(self, i):
            "Row i."
        language.Tile16.row = row
        try:
            importlib.reload(semantics)
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == (
        "BindingError the rule _m_line('row') takes (index) but qnb.row takes (i): "
        "parameter 1 is 'index' in the rule, 'i' in the stub"
    )


# ---------------------------------------------------------------------------- the stubs a user reads


def test_every_stub_has_a_docstring_and_shaped_constructors_show_their_parameters():
    for stub in bindings.language_stubs(language):
        assert (stub.__doc__ or "").strip(), stub
    assert inspect.signature(qnb.Tile[8, 32].load) == inspect.signature(qnb.Tile16.load)
    assert inspect.signature(qnb.Vec[64].load_row) == inspect.signature(qnb.Vec16.load_row)
    assert qnb.Tile[8, 32].zeros.__doc__ == qnb.Tile16.zeros.__doc__


@pytest.mark.parametrize(
    "name",
    [
        n
        for n, v in vars(language).items()
        # (static and cdiv also work on the host: static returns its value, cdiv divides)
        if inspect.isfunction(v) and hasattr(v, "_qnb_intrinsic") and n not in ("static", "cdiv")
    ],
)
def test_every_intrinsic_called_outside_a_kernel_raises(name):
    stub = getattr(language, name)
    args = [1.0] * sum(
        p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        for p in inspect.signature(stub).parameters.values()
    )
    with pytest.raises(QnbOutsideKernelError, match="was called outside a kernel"):
        stub(*args)


# ---------------------------------------------------------------------------- each path still finds its rule


def test_every_way_of_naming_an_intrinsic_reaches_its_rule():
    """The tag, a math/NumPy twin, a builtin, a shaped class and its constructors, a
    method by keyword (the stubs' parameter names)."""

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], v: qnb.Array[qnb.f32, 1]):
        t = qnb.Tile[8, 16].load(x, 0, 0, other=0.0)
        u = qnb.exp(t) + math.exp(1.0) + np.maximum(t, 0.5) + abs(t)
        u = u + min(t.row(index=1).sum(), 3.0) + float(len(v))
        w = qnb.Tile[8, 16](qnb.f32) + qnb.Tile[8, 16].full(2.0, dtype=qnb.f32)
        line = qnb.Vec[16].load_row(x, 2, 0, other=-1.0)
        s = qnb.Tile16.zeros(qnb.f32)
        s.eye_()
        s.cholesky_()
        (u + w + line[None, :] + s.sum(axis=0, keepdims=True)).store(out, 0, 0)

    x = np.random.default_rng(1).uniform(0.5, 1.5, (8, 16)).astype(np.float32)
    out = np.full((8, 16), np.nan, np.float32)
    v = np.zeros(5, np.float32)
    k[1](x, out, v)
    expected = (
        np.exp(x)
        + math.exp(1.0)
        + np.maximum(x, 0.5)
        + np.abs(x)
        + min(x[1].sum(dtype=np.float32), 3.0)
        + 5.0
        + 2.0
        + x[2][None, :]
        + 1.0
    )
    np.testing.assert_allclose(out, expected, rtol=1e-5)


# ---------------------------------------------------------------------------- binding a call's arguments

# What a bad call says (the messages the rules gave when each bound its own arguments,
# kept word for word), at the user's line.
BAD_CALLS = [
    ("qnb.exp()", "exp() is missing the argument 'x'"),
    ("qnb.abs(t, x=t)", "abs() got multiple values for 'x'"),
    ("qnb.floor(y=t)", "floor() got an unexpected keyword argument 'y'"),
    ("qnb.maximum(t, t, t)", "max() takes at most 2 arguments (3 given)"),
    ("qnb.where(mask=t > 0, a=t)", "qnb.where() is missing the argument 'b'"),
    ("qnb.program_id(ax=0)", "qnb.program_id() got an unexpected keyword argument 'ax'"),
    (
        "Tile16.load(x, 0, 0, 0)",
        "Tile16.load() takes 3 positional arguments (4 given); other and dtype are keyword "
        "arguments (other=...)",
    ),
    ("qnb.Tile[8, 32].load(x, 0)", "Tile[8, 32].load() is missing the argument 'col'"),
    ("qnb.Tile[8, 16](qnb.f32, 1)", "Tile[8, 16].zeros() takes at most 1 arguments (2 given)"),
    ("Tile16.zeros(dtpye=qnb.f32)", "Tile16.zeros() got an unexpected keyword argument 'dtpye'"),
    (
        "Vec16.load_row(x, 0, 0, 1)",
        "Vec16.load_row() takes 3 positional arguments (4 given); other are keyword arguments "
        "(other=...)",
    ),
    ("Vec16.load(arr=v, start=0)", "Vec16.load() got an unexpected keyword argument 'arr'"),
    ("t.load_(x, 0, 16, 0, 16, 1)", "load_() takes at most 5 arguments (6 given)"),
    ("u.load_(x, 0, 16, 0, 16)", "load_ is a tile method, not one of a Vec16[f32]"),
    ("u.store_col(x, 0)", "store_col() is missing the argument 'col'"),
    ("t.store_col(x, 0)", ".store_col() is a vec method, not one of a Tile16[f32]"),
    ("t.sum(0, True, 1)", "sum() takes at most 2 arguments (3 given)"),
    ("t.col(i=0)", "col() got an unexpected keyword argument 'i'"),
    ("t.cholesky_(e=1)", "cholesky_() got an unexpected keyword argument 'e'"),
    (
        "t.solve_triangular_(B=t, lower=True, x=1)",
        "solve_triangular_() got an unexpected keyword argument 'x'",
    ),
]


@pytest.mark.parametrize(("call", "message"), BAD_CALLS, ids=[c for c, _ in BAD_CALLS])
def test_a_bad_call_says_what_python_would_at_the_users_line(call, message):
    from tests.helpers import define

    scope, filename = define(
        f"""
        @qnb.kernel(backend="cpu")
        def k(x: qnb.Array[qnb.f32, 2], v: qnb.Array[qnb.f32, 1]):
            t = Tile16.load(x, 0, 0)
            u = t.row(0)
            r = {call}
        """
    )
    with pytest.raises(qnb.QnbTypeError) as info:
        scope["k"].source("ir")
    assert info.value.message == message
    assert (info.value.filename, info.value.lineno) == (filename, 6)

"""Fuzz: random kernels, well-typed or not, never make the compiler raise anything but a qnb
error at the user's line (standards: "never an internal traceback").

Expressions mix tiles, vecs, bool tiles, scalars of several dtypes, every operator, method
and intrinsic, with arguments of any kind and arity; most are ill-typed. Each kernel is
launched on the cpu backend and, when it compiles there, rendered to CUDA C++ and WGSL.
"""

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qnb
from tests.helpers import define

LEAVES = ["t", "v", "m", "s", "i", "(2)", "(0.5)", "(True)", "(t > 0.0)", "x[0, 1]", "qnb.f16"]
BINARY = ["+", "-", "*", "/", "//", "%", "**", "@", "<", "==", "&", "|"]
METHODS = [
    ".T",
    ".sum()",
    ".sum(axis=0)",
    ".sum(axis=1)",
    ".sum(axis=2)",
    ".max()",
    ".min(axis=1)",
    ".row(3)",
    ".col(i)",
    ".row(t)",
    ".astype(qnb.f64)",
    ".astype(qnb.i32)",
    ".astype(7)",
    "[1, 2]",
    "[i]",
    "[0]",
    ".shape",
]
CALLS = [
    "qnb.where({a}, {b}, {c})",
    "qnb.maximum({a}, {b})",
    "qnb.exp({a})",
    "qnb.sqrt({a})",
    "qnb.abs({a})",
    "qnb.outer({a}, {b})",
    "qnb.mma({a}, {b}, {c})",
    "qnb.mma({a}, {b})",
    "Tile16.full({a}, qnb.f32)",
    "Vec16.full({a}, qnb.f32)",
    "Tile16.load({a}, 0, 0)",
    "Tile16.load(x, {a}, 0)",
    "Vec16.load(y, {a})",
    "({a} if {b} else {c})",
]


def expressions():
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINARY), inner).map(
                lambda p: f"({p[0]} {p[1]} {p[2]})"
            ),
            st.tuples(inner, st.sampled_from(METHODS)).map(lambda p: f"{p[0]}{p[1]}"),
            st.tuples(st.sampled_from(CALLS), inner, inner, inner).map(
                lambda p: p[0].format(a=p[1], b=p[2], c=p[3])
            ),
            inner.map(lambda e: f"(-{e})"),
        )

    return st.recursive(st.sampled_from(LEAVES), extend, max_leaves=5)


STATEMENTS = [
    "r = {e}",
    "r.store(out, 0, 0)",
    "out[0:16, 0:16] = {e}",
    "out[i, 0] = {e}",
    "t += {e}",
    "t[1, i] = {e}",
    "t.cholesky_({e})",
    "m.solve_triangular_({e})",
    "if {e}:\n        t = t * 2.0",
    "for k in range({e}):\n        s = s + 1.0",
    "while {e}:\n        break",
    "v.store(y, {e})",
]


def bodies():
    statement = st.tuples(st.sampled_from(STATEMENTS), expressions()).map(
        lambda p: p[0].format(e=p[1])
    )
    return st.lists(statement, min_size=1, max_size=3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_random_kernels_raise_only_qnb_errors(statements):
    prologue = [
        "t = Tile16.load(x, 0, 0)",
        "m = Tile16.load(x, 0, 0)",
        "v = Vec16.load(y, 0)",
        "r = t",
    ]
    body = "\n".join("    " + line for line in prologue + statements) + "\n"
    source = f"@qnb.kernel\ndef k(x, y, out, s: qnb.f32, i: qnb.i32):\n{body}"
    try:
        with warnings.catch_warnings():  # "(2)[1, 2]": Python's own hint, not ours
            warnings.simplefilter("ignore", SyntaxWarning)
            scope, _ = define(source)
    except qnb.QnbError:
        return
    x = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    y, out = np.ones(16, np.float32), np.zeros((16, 16), np.float32)
    try:
        with qnb.backend("cpu"), np.errstate(all="ignore"):
            scope["k"](x, y, out, 1.5, 2)
    except qnb.QnbError as err:
        assert err.filename and err.lineno, (type(err).__name__, str(err))
        return
    for lang in ("cuda", "wgsl"):
        try:
            scope["k"].source(lang, x, y, out, 1.5, 2)
        except qnb.BackendError as err:  # f64 has no WGSL spelling: a stated limit
            assert err.filename and err.lineno, str(err)

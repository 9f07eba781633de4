"""Property: random small kernels from the op set give the same answer on the cpu
backend as the same source run directly as Python + NumPy.

The generated body is written in the subset where qnb and NumPy agree on meaning
(``A[0:16, 0:16]`` window loads of 16×16 arrays, ``out[0:16, 0:16] = r``, ``@``, ``.T``,
``.sum()``, ``qnb.maximum`` …), so the oracle is the body itself executed with NumPy
arrays and a ``qnb`` shim that maps each math function to NumPy's.
"""

import types

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qnb
from tests.helpers import define

NUMPY_QNB = types.SimpleNamespace(
    maximum=np.maximum,
    minimum=np.minimum,
    abs=np.abs,
    sqrt=np.sqrt,
    exp=np.exp,
    where=np.where,
    f64=np.float64,
)

TILE_LEAVES = st.sampled_from(["a", "b", "(a * 0.5)", "b.T"])
SCALAR_LEAVES = st.sampled_from(["s", "1.5", "2", "a.sum()", "b.max()", "a.min()"])


def tile_exprs():
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, SCALAR_LEAVES).map(lambda t: f"({t[0]} * {t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"({t[0]} / (qnb.abs({t[1]}) + 1.0))"),
            st.tuples(st.sampled_from(["maximum", "minimum"]), inner, inner).map(
                lambda t: f"qnb.{t[0]}({t[1]}, {t[2]})"
            ),
            st.tuples(inner, inner).map(lambda t: f"qnb.where({t[0]} > {t[1]}, {t[0]}, -{t[1]})"),
            inner.map(lambda e: f"qnb.sqrt(qnb.abs({e}))"),
            inner.map(lambda e: f"qnb.exp(qnb.minimum({e}, 3.0))"),
            inner.map(lambda e: f"{e}.T"),
            st.tuples(inner, inner).map(lambda t: f"(({t[0]}) @ ({t[1]}) * 0.0625)"),
            inner.map(lambda e: f"(-{e})"),
        )

    return st.recursive(TILE_LEAVES, extend, max_leaves=6)


def statements():
    expr = tile_exprs()
    return st.one_of(
        expr.map(lambda e: f"r = r + {e}"),
        st.tuples(expr, st.integers(1, 3)).map(
            lambda t: f"for i in range({t[1]}):\n        r = r * 0.5 + {t[0]} * i"
        ),
        st.tuples(SCALAR_LEAVES, expr, expr).map(
            lambda t: (
                f"if {t[0]} > 0.25:\n        r = r - {t[1]}\n    else:\n        r = r + {t[2]}"
            )
        ),
        st.tuples(expr).map(lambda t: "while r.max() > 50.0:\n        r = r * 0.25"),
    )


def body_source(stmts):
    lines = ["a = A[0:16, 0:16]", "b = B[0:16, 0:16]", "r = a * 0.0", *stmts, "out[0:16, 0:16] = r"]
    return "\n".join("    " + line for line in lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_random_kernels_match_numpy(stmts, seed):
    body = body_source(stmts)
    scope, _ = define(f"@qnb.kernel\ndef k(A, B, out, s: qnb.f64):\n{body}")
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-2, 2, (16, 16)), rng.uniform(-2, 2, (16, 16))
    s = float(rng.uniform(-1, 1))
    got = np.full((16, 16), np.nan)
    with qnb.backend("cpu"):
        scope["k"](a, b, got, s)

    reference_scope = {"qnb": NUMPY_QNB, "np": np}
    exec(f"def k(A, B, out, s):\n{body}", reference_scope)  # noqa: S102 - generated test source
    want = np.full((16, 16), np.nan)
    with np.errstate(all="ignore"):
        reference_scope["k"](a.copy(), b.copy(), want, s)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)

"""Property: random small kernels from the op set give the same answer on the cpu
backend (and on cuda-host, the generated CUDA C++ run on the host, and in f32 on wgpu)
as the same source run directly as Python + NumPy.

The generated body is written in the subset where qnb and NumPy agree on meaning
(``A[0:16, 0:16]`` window loads of 16×16 arrays, ``out[0:16, 0:16] = r``, ``@``, ``.T``,
``.sum()``, ``qnb.maximum`` …), so the oracle is the body itself executed with NumPy
arrays and a ``qnb`` shim that maps each math function to NumPy's. Kernels run as three
programs; statements may branch on the program id, and each program stores its tile and
a scalar (one more scalar store is made by one program only), so masked and uniform
stores under per-program branches are exercised.
"""

import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qnb
from tests.conftest import require_backend
from tests.helpers import define

PROGRAMS = 3

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
            st.tuples(SCALAR_LEAVES, inner, inner).map(
                lambda t: f"({t[1]} if {t[0]} > 0.25 else {t[2]})"
            ),
            st.tuples(inner, inner).map(lambda t: f"({t[0]} if p == 1 else {t[1]})"),
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
        st.tuples(st.integers(0, PROGRAMS - 1), expr).map(
            lambda t: f"if p == {t[0]}:\n        r = r + {t[1]}"
        ),
        st.tuples(SCALAR_LEAVES, expr).map(lambda t: f"r = r + ({t[1]}) * (p * {t[0]})"),
    )


def body_source(stmts):
    lines = [
        "p = qnb.program_id(0)",
        "a = A[0:16, 0:16]",
        "b = B[0:16, 0:16]",
        "r = a * 0.0",
        *stmts,
        "out[p * 16:p * 16 + 16, 0:16] = r",
        "sums[p] = r.sum()",
        "if p == 1:\n        sums[3] = 7.0",
    ]
    return "\n".join("    " + line for line in lines) + "\n"


def numpy_reference(body: str, a, b, s):
    """Run ``body`` as Python + NumPy, once per program id, as the oracle."""
    out, sums = np.full((16 * PROGRAMS, 16), np.nan), np.full(PROGRAMS + 1, np.nan)
    for p in range(PROGRAMS):
        shim = types.SimpleNamespace(**vars(NUMPY_QNB), program_id=lambda axis, p=p: p)
        scope = {"qnb": shim, "np": np}
        exec(f"def k(A, B, out, sums, s):\n{body}", scope)  # noqa: S102 - generated test source
        with np.errstate(all="ignore"):
            scope["k"](a.copy(), b.copy(), out, sums, s)
    return out, sums


def check_random_kernel(backend: str, stmts, seed, rtol, dtype=np.float64):
    body = body_source(stmts)
    scalar = "qnb.f64" if dtype == np.float64 else "qnb.f32"
    scope, _ = define(f"@qnb.kernel\ndef k(A, B, out, sums, s: {scalar}):\n{body}")
    rng = np.random.default_rng(seed)
    a, b = (rng.uniform(-2, 2, (16, 16)).astype(dtype) for _ in range(2))
    s = float(dtype(rng.uniform(-1, 1)))
    out = np.full((16 * PROGRAMS, 16), np.nan, dtype)
    sums = np.full(PROGRAMS + 1, np.nan, dtype)
    with qnb.backend(backend):
        scope["k"][PROGRAMS](a, b, out, sums, s)
    # The oracle computes in f64 from the same inputs; f32 backends round on the way.
    want_out, want_sums = numpy_reference(body, a.astype(np.float64), b.astype(np.float64), s)
    for got, want in ((out, want_out), (sums, want_sums)):
        scale = np.nanmax(np.abs(want), initial=1.0) if np.isfinite(want).any() else 1.0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_random_kernels_match_numpy(stmts, seed):
    check_random_kernel("cpu", stmts, seed, rtol=1e-9)


# Each example compiles (g++ ~0.3 s; WGSL + a pipeline on lavapipe); sums and exp run in
# another order and library. WGSL has no f64: wgpu runs the kernels in f32.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "rtol", "dtype"), [("cuda-host", 1e-7, np.float64), ("wgpu", 2e-4, np.float32)]
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(statements(), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_random_kernels_match_numpy_on_the_gpu_code(backend, rtol, dtype, stmts, seed):
    require_backend(backend)
    check_random_kernel(backend, stmts, seed, rtol=rtol, dtype=dtype)

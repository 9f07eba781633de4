"""Every op of the op registry (``qnb/ops.py``) on every backend, read from the registry
itself: a math function or reduction added there is tested here with no test edit.

The reference is NumPy's own ufunc applied to the input at the input's dtype (f16
computes in f32 and rounds once in NumPy as on every backend), written independently of
the backends' code; tolerances are in ulps of the dtype (the measured errors of the GPU
backends, see test_bitwise_math.py), exact for the rounding functions and for integers.
Outputs are poisoned, so an element a backend does not write shows.
"""

from __future__ import annotations

import runpy

import numpy as np
import pytest

import qnb
from qnb import ops
from qnb.backends.cpu import semantics as cpu_semantics
from qnb.backends.cuda_render import CudaRenderer
from qnb.backends.wgsl import WgslRenderer
from tests.helpers import skip_unless_dtype_runs

ULPS = {np.float16: (1, 0.0), np.float32: (4, 2.0**-21), np.float64: (4, 0.0)}
EXACT = {"abs", "floor", "ceil", "trunc"}  # correctly rounded wherever they run
SHAPES = [(16, 16), (8, 32), (4, 64)]
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 1e-3, 20.0]
POISON = 7.25


def _kernel(tmp_path, name, body):
    path = tmp_path / f"registry_{name}.py"
    path.write_text(f"import numpy as np\nimport qnb\n\n@qnb.kernel\n{body}")
    return runpy.run_path(str(path))["k"]


def _math_kernel(tmp_path, op, shape):
    m, n = shape
    return _kernel(
        tmp_path,
        f"{op}_{m}x{n}",
        "def k(x, out, vout, sout):\n"
        f"    t = qnb.Tile[{m}, {n}].load(x, 0, 0)\n"
        f"    qnb.{op}(t).store(out, 0, 0)\n"
        f"    qnb.{op}(t.row(1)).store(vout, 0)\n"
        f"    sout[0] = qnb.{op}(t[0, 1])\n",
    )


def _close(got, want, dtype, what, exact):
    ulps, absolute = (0, 0.0) if exact else ULPS[dtype]
    got, want = got.astype(np.float64), want.astype(np.float64)
    assert (np.isnan(got) == np.isnan(want)).all(), f"{what}: NaN where NumPy has none"
    finite = np.isfinite(want)
    assert (got[~finite & ~np.isnan(want)] == want[~finite & ~np.isnan(want)]).all(), what
    spacing = np.spacing(np.abs(want[finite]).astype(dtype)).astype(np.float64)
    error = np.abs(got[finite] - want[finite])
    bad = error > ulps * spacing + absolute
    assert not bad.any(), f"{what}: {got[finite][bad][:5]} vs NumPy {want[finite][bad][:5]}"
    if exact:  # the sign of a zero too (trunc(-0.5) is -0.0)
        assert (np.signbit(got[finite]) == np.signbit(want[finite])).all(), what


def _input(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-6, 6, shape).astype(dtype)
    x[x == 0] = 0.25
    x[0, : min(len(SPECIALS), shape[1])] = SPECIALS[: shape[1]]
    x[1, : min(len(SPECIALS), shape[1])] = SPECIALS[: shape[1]]
    return x


def _outputs(shape, dtype):
    return (
        np.full(shape, POISON, dtype),
        np.full(shape[1], POISON, dtype),
        np.full(1, POISON, dtype),
    )


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("op", sorted(ops.MATH))
def test_each_math_function_matches_numpy(backend_name, tmp_path, op, dtype, shape):
    skip_unless_dtype_runs(backend_name, np.dtype(dtype))
    if backend_name == "wgpu" and dtype is np.float64:
        pytest.skip("WGSL has no f64 (test_bitwise_math checks the refusal)")
    kernel = _math_kernel(tmp_path, op, shape)
    x = _input(shape, dtype, seed=len(op))
    out, vout, sout = _outputs(shape, dtype)
    with qnb.backend(backend_name):
        kernel[1](x, out, vout, sout)
    with np.errstate(all="ignore"):
        want = ops.MATH[op].numpy(x)
    exact = op in EXACT
    _close(out, want, dtype, f"{op} tile on {backend_name}", exact)
    _close(vout, want[1], dtype, f"{op} vec on {backend_name}", exact)
    _close(sout, want[0, 1:2], dtype, f"{op} scalar on {backend_name}", exact)


@pytest.mark.parametrize("op", sorted(ops.MATH))
def test_each_math_function_on_integers(backend_name, tmp_path, op):
    """A float function of an i32 tile computes in f32; one typed "same" keeps i32."""
    kernel = _math_kernel(tmp_path, op, (16, 16))
    # (within ±6, as the float inputs: WGSL bounds exp's error by 3 + 2|x| ulps only)
    x = np.random.default_rng(3).integers(-6, 7, (16, 16)).astype(np.int32)
    x[x == 0] = 5
    keeps = ops.MATH[op].typing == "same"
    dtype = np.int32 if keeps else np.float32
    out, vout, sout = _outputs((16, 16), dtype)
    with qnb.backend(backend_name):
        kernel[1](x, out, vout, sout)
    with np.errstate(all="ignore"):
        want = ops.MATH[op].numpy(x if keeps else x.astype(np.float32))
    if keeps:
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(vout, want[1])
    else:
        _close(out, want, np.float32, f"{op} of i32 on {backend_name}", op in EXACT)
        _close(sout, want[0, 1:2], np.float32, f"{op} of i32 scalar", op in EXACT)


@pytest.mark.parametrize("op", sorted(ops.REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_each_reduction_matches_numpy(backend_name, tmp_path, op, axis):
    kernel = _kernel(
        tmp_path,
        f"reduce_{op}_{axis}",
        "def k(x, out):\n"
        "    t = qnb.Tile[8, 32].load(x, 0, 0)\n"
        f"    r = t.{op}(axis={axis}, keepdims=True)\n"
        "    (t * 0.0 + r).store(out, 0, 0)\n",
    )
    rng = np.random.default_rng(11)
    x = rng.uniform(0.5, 1.5, (8, 32)).astype(np.float32)  # (products stay in range)
    out = np.full((8, 32), POISON, np.float32)
    with qnb.backend(backend_name):
        kernel[1](x, out)
    reduction = ops.REDUCTIONS[op]
    want = reduction.ufunc.reduce(x.astype(np.float64), axis=axis, keepdims=True)
    want = np.broadcast_to(want, x.shape)
    np.testing.assert_allclose(out, want, rtol=2e-6 * 32, atol=0)


@pytest.mark.parametrize("name", sorted(ops.SCANS))
def test_each_scan_matches_numpy(backend_name, tmp_path, name):
    kernel = _kernel(
        tmp_path,
        f"scan_{name}",
        "def k(x, out):\n"
        "    t = qnb.Tile[4, 16].load(x, 0, 0)\n"
        f"    t.{name}(axis=1).store(out, 0, 0)\n",
    )
    x = np.random.default_rng(5).uniform(0.5, 1.5, (4, 16)).astype(np.float32)
    out = np.full((4, 16), POISON, np.float32)
    with qnb.backend(backend_name):
        kernel[1](x, out)
    ufunc = ops.REDUCTIONS[ops.SCANS[name]].ufunc
    np.testing.assert_allclose(out, ufunc.accumulate(x.astype(np.float64), axis=1), rtol=3e-5)


def test_every_stage_reads_the_registry():
    """Each math op is spelled on every target and run by the cpu, from the registry."""
    for name, op in ops.MATH.items():
        assert cpu_semantics._UNARY[name] is op.numpy
        assert WgslRenderer.math_functions[name] == op.wgsl
        assert CudaRenderer.math_functions[name] == op.cuda_name
        assert name in qnb.ir.UNARY_OPS
        assert getattr(qnb, name) is getattr(qnb.language, name)
    for name in ops.REDUCTIONS:
        assert name in cpu_semantics._REDUCE


def test_a_numpy_twin_is_the_registry_op(tmp_path):
    """``np.trunc(t)`` in a kernel is ``qnb.trunc(t)``; a compile-time number folds."""
    kernel = _kernel(
        tmp_path,
        "twin",
        "def k(x, out):\n"
        "    t = qnb.Tile16.load(x, 0, 0)\n"
        "    (np.trunc(t) + qnb.trunc(-2.5)).store(out, 0, 0)\n",
    )
    x = _input((16, 16), np.float32, seed=2)
    out = np.full((16, 16), POISON, np.float32)
    kernel[1](x, out)
    np.testing.assert_array_equal(out, np.trunc(x) - 2.0)


def test_a_registry_entry_without_a_stub_or_spelling_is_refused():
    with pytest.raises(ops.RegistryError, match=r"no stub in qnb\.language"):
        ops.check([ops.MathOp("exp10", np.exp, wgsl="exp10", cuda=ops.CudaMath("a", "b"))])
    with pytest.raises(ops.RegistryError, match="no wgsl spelling"):
        ops.check([ops.MathOp("exp", np.exp, wgsl="", cuda=ops.CudaMath("expf", "exp"))])
    with pytest.raises(ops.RegistryError, match="with no message"):
        ops.check([ops.MathOp("exp", np.exp, wgsl="exp", cuda=ops.NotOn(""))])
    with pytest.raises(ops.RegistryError, match="combine"):
        ops.check([ops.Reduction("sum", np.add, combine="xor")])
    ops.check([ops.MathOp("exp", np.exp, wgsl="exp", cuda=ops.NotOn("not yet"))])  # accepted


def test_a_reduction_axis_must_be_an_int(tmp_path):
    """``t.sum(axis=1.0)`` is refused at the user's line (1.0 == 1, but NumPy refuses a
    float axis too), and so is ``axis=True``."""
    for axis in ("1.0", "True"):
        kernel = _kernel(
            tmp_path,
            f"axis_{axis}",
            f"def k(x, out):\n    t = qnb.Tile16.load(x, 0, 0)\n    out[0] = t.sum(axis={axis})\n",
        )
        x = np.ones((16, 16), np.float32)
        with pytest.raises(qnb.QnbTypeError, match="axis must be None, 0 or 1") as error:
            kernel[1](x, np.zeros(1, np.float32))
        assert error.value.lineno == 7  # (the line of t.sum)

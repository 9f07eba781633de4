"""bf16: values compute in f32 and round to nearest even where made or stored, after every
op; ``@`` accumulates in f32 and returns f32; cpu and cuda run it, wgpu refuses it.

- cpu against NumPy/ml_dtypes written out op by op (the rounding after each op, the weak
  Python number, ties to even).
- cuda-host (the CUDA code run on the host) against cpu **bit for bit** on every op but
  the transcendental functions, whose float results come from two libms (glibc's and
  NumPy's) and may differ by one float ulp, so by one bf16 ulp after rounding: those are
  checked within one bf16 ulp. (On a GPU the float functions are CUDA's precise ones.)
- wgpu raises BackendError ("WGSL has no bf16") when the kernel is compiled.
"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16
from tests.conftest import require_backend

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32


def test_qnb_bf16_is_ml_dtypes_bfloat16_on_the_host():
    assert qnb.bf16.numpy == BF16 and qnb.bf16.itemsize == 2
    from qnb.dtypes import as_dtype, promote

    assert as_dtype(ml_dtypes.bfloat16) is qnb.bf16 and as_dtype("bfloat16") is qnb.bf16
    assert promote(qnb.bf16, qnb.i32) is qnb.bf16 and promote(qnb.bf16, qnb.f16) is qnb.f32
    assert promote(qnb.bf16, qnb.f32) is qnb.f32


def _bf(values) -> np.ndarray:
    return np.asarray(values, F32).astype(BF16)


def _r(x) -> np.ndarray:
    """Round a float32 result to bf16 (nearest even), as every bf16 op does."""
    return np.asarray(x, F32).astype(BF16)


BINARY = ["add", "sub", "mul", "div", "floordiv", "mod", "pow", "maximum", "minimum"]
UNARY = ["neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "tanh", "floor", "ceil"]
TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "sin", "cos", "tanh", "pow"}


@qnb.kernel
def every_op(x, y, out, flags, sums, product, ints):
    t = Tile16.load(x, 0, 0)
    u = Tile16.load(y, 0, 0)
    (t + u).store(out[0], 0, 0)
    (t - u).store(out[1], 0, 0)
    (t * u).store(out[2], 0, 0)
    (t / u).store(out[3], 0, 0)
    (t // u).store(out[4], 0, 0)
    (t % u).store(out[5], 0, 0)
    (abs(t) ** u).store(out[6], 0, 0)
    qnb.maximum(t, u).store(out[7], 0, 0)
    qnb.minimum(t, u).store(out[8], 0, 0)
    (-t).store(out[9], 0, 0)
    abs(t).store(out[10], 0, 0)
    qnb.exp(t).store(out[11], 0, 0)
    qnb.exp2(t).store(out[12], 0, 0)
    qnb.log(abs(t)).store(out[13], 0, 0)
    qnb.log2(abs(t)).store(out[14], 0, 0)
    qnb.sqrt(abs(t)).store(out[15], 0, 0)
    qnb.sin(t).store(out[16], 0, 0)
    qnb.cos(t).store(out[17], 0, 0)
    qnb.tanh(t).store(out[18], 0, 0)
    qnb.floor(t).store(out[19], 0, 0)
    qnb.ceil(t).store(out[20], 0, 0)
    (t * 3.0 + 1.0).store(out[21], 0, 0)  # weak numbers: rounds after * and after +
    qnb.where(t > u, t, u * 0.5).store(out[22], 0, 0)
    t.astype(qnb.f32).astype(qnb.bf16).store(out[23], 0, 0)
    (t < u).store(flags[0], 0, 0)
    (t == u).store(flags[1], 0, 0)
    sums[0] = t.sum()  # accumulates in f32, rounds once
    t.sum(axis=1).store(sums, 1)
    (t @ u).store(product, 0, 0)  # f32
    (t * 100.0).astype(qnb.i32).store(ints, 0, 0)


def _inputs(seed=11):
    rng = np.random.default_rng(seed)
    x = _bf(rng.uniform(-4, 4, (16, 16)))
    y = _bf(rng.uniform(0.25, 3, (16, 16)) * rng.choice([-1, 1], (16, 16)))
    x[0, :4] = _bf([1.0, -1.0, 2.0, 0.5])
    y[0, :4] = _bf([2**-8, -(2**-8), 3 * 2**-7, 2**-9])  # x + y lands on bf16 ties
    out = np.full((24, 16, 16), np.nan, BF16)
    flags = np.zeros((2, 16, 16), bool)
    sums = np.full(17, np.nan, BF16)
    product = np.full((16, 16), np.nan, F32)
    ints = np.full((16, 16), -12345, np.int32)
    return [x, y, out, flags, sums, product, ints]


def _run(backend, args):
    args = [a.copy() for a in args]
    with qnb.backend(backend):
        every_op(*args)
    return args


def test_cpu_rounds_after_every_op_as_ml_dtypes_does():
    x, y, out, flags, sums, product, ints = _run("cpu", _inputs())
    f, g = x.astype(F32), y.astype(F32)
    with np.errstate(all="ignore"):
        want = [
            _r(f + g),
            _r(f - g),
            _r(f * g),
            _r(f / g),
            _r(np.floor_divide(f, g)),
            _r(np.mod(f, g)),
            _r(np.abs(f) ** g),
            _r(np.maximum(f, g)),
            _r(np.minimum(f, g)),
            _r(-f),
            _r(np.abs(f)),
            _r(np.exp(f)),
            _r(np.exp2(f)),
            _r(np.log(np.abs(f))),
            _r(np.log2(np.abs(f))),
            _r(np.sqrt(np.abs(f))),
            _r(np.sin(f)),
            _r(np.cos(f)),
            _r(np.tanh(f)),
            _r(np.floor(f)),
            _r(np.ceil(f)),
            _r(_r(f * 3).astype(F32) + 1),
            np.where(f > g, x, _r(g * 0.5)),
            x,
        ]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(out[k].view(np.uint16), w.view(np.uint16), err_msg=str(k))
    # the ties: 1 + 2**-8 rounds to 1 (even), 2 + 3 * 2**-7 to 2.03125 (even), etc.
    assert out[0, 0, :4].astype(F32).tolist() == [1.0, -1.0, 2.03125, 0.5]
    np.testing.assert_array_equal(flags[0], f < g)
    assert sums[0] == _r(f.sum(dtype=F32)) or abs(float(sums[0]) - f.sum()) <= 2**-6 * abs(f.sum())
    np.testing.assert_allclose(sums[1:].astype(F32), _r(f.sum(1, dtype=F32)).astype(F32), rtol=8e-3)
    assert product.dtype == F32
    np.testing.assert_allclose(product, f @ g, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ints, np.trunc(_r(f * 100).astype(F32)).astype(np.int32))


def test_weak_numbers_keep_bf16_and_round_after_each_op():
    x = _bf([[-5.6484375] * 16] * 16)
    out = _run("cpu", [x, *_inputs()[1:]])[2]
    # x * 3 = -16.9453125 rounds to -17.0 (bf16's spacing is 0.125 there); + 1 is -16.0
    assert out[21, 0, 0].astype(F32) == -16.0 and out.dtype == BF16
    # computing in f32 and rounding once gives -15.9453125 -> -15.9375
    assert _r(np.float32(-5.6484375) * 3 + 1).astype(F32) == -15.9375


@pytest.mark.parametrize("backend", ["cuda-host", "cuda"])
def test_the_cuda_code_is_bit_exact_against_cpu(backend):
    """The generated CUDA C++ on the host (g++) and, on a GPU, on the device (NVRTC)."""
    require_backend(backend)
    inputs = _inputs()
    want = _run("cpu", inputs)
    got = _run(backend, inputs)
    names = [*BINARY, *UNARY, "weak", "where", "astype"]
    for k, name in enumerate(names):
        g, w = got[2][k].view(np.uint16), want[2][k].view(np.uint16)
        if name in TRANSCENDENTAL:  # two libms: within one bf16 ulp (module docstring)
            distance = np.abs(g.astype(np.int32) - w.astype(np.int32))
            assert (distance <= 1).all(), name
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_array_equal(got[4].view(np.uint16), want[4].view(np.uint16))
    np.testing.assert_allclose(got[5], want[5], rtol=1e-6, atol=1e-6)  # f32 sums, any order
    np.testing.assert_array_equal(got[6], want[6])


@qnb.kernel
def round_from(x32, x64, out):
    Tile16.load(x32, 0, 0).astype(qnb.bf16).store(out[0], 0, 0)
    Tile16.load(x64, 0, 0).astype(qnb.bf16).store(out[1], 0, 0)


def test_conversions_round_ties_to_even_on_cpu_and_cuda_host():
    rng = np.random.default_rng(2)
    base = _bf(rng.uniform(-8, 8, 256)).astype(F32)
    bits = base.view(np.uint32)
    ties = (bits | np.uint32(0x8000)).view(F32)  # exactly halfway to the next bf16
    x32 = ties.reshape(16, 16).copy()
    x32.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 3.4e38, 1e-40]
    # doubles just above a tie round up; via float they would land on the tie and go even
    x64 = ties.astype(np.float64).reshape(16, 16) + 2.0**-40
    want = np.stack([x32.astype(BF16), x64.astype(BF16)])
    for backend in ("cpu", "cuda-host"):
        require_backend(backend)
        out = np.zeros((2, 16, 16), BF16)
        with qnb.backend(backend):
            round_from(x32, x64, out)
        np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16), err_msg=backend)
    assert (want[0].flat[6:].view(np.uint16) & 1 == 0).all()  # ties went to even


def test_wgpu_refuses_bf16_at_compile_time():
    require_backend("wgpu")
    with pytest.raises(qnb.BackendError, match="WGSL has no bf16"):
        _run("wgpu", _inputs())
    args = _inputs()
    with pytest.raises(qnb.BackendError, match="WGSL has no bf16"):
        every_op.source("wgsl", *args)


def test_the_cuda_code_computes_in_float_and_rounds_once():
    source = every_op.source("cuda", *_inputs())
    assert "#include <cuda_bf16.h>" in source
    assert "__float2bfloat16((__bfloat162float(" in source


def test_bf16_products_run_on_tensor_cores_and_return_f32():
    x, y = _inputs()[:2]
    source = every_op.source("cuda", *_inputs())
    assert "qnb::matmul_bf16(" in source and "__nv_bfloat16, wmma::row_major" in source
    require_backend("cuda-host")
    for backend in ("cpu", "cuda-host"):
        product = _run(backend, _inputs())[5]
        np.testing.assert_allclose(product, x.astype(F32) @ y.astype(F32), rtol=1e-5, atol=1e-5)

"""``qnb.compare`` against the exact result (contract: "Cross-backend comparison"): the
f64 run on cpu (``qnb.exact``), each record's ``max_error`` and ``closer``, the verdict,
the tolerances it accepts, and the step budget bounding what finding a divergence costs.

Every expected error is computed here in NumPy's float64 from the inputs, never read back
from the comparison; the wgpu cases run on lavapipe for real.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import qnb
from qnb import Tile, Tile16, Vec, exact, ir
from qnb.backends import probe
from qnb.backends.cpu import trace as cpu_trace
from qnb.compare import ToleranceError
from tests.conftest import require_backend


@pytest.fixture
def wgpu():
    require_backend("wgpu")


def _exact_error(value, expected) -> float:
    return float(np.abs(np.asarray(value, np.float64) - expected).max())


# --------------------------------------------------------------------------- real kernels


@qnb.kernel
def matmul_f16(a, b, out):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(qnb.f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(out, i, j)


def test_f16_matmul_512x384x256_is_judged_against_the_f64_product(wgpu):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 384)).astype(np.float16)
    b = rng.standard_normal((384, 256)).astype(np.float16)
    out = np.full((512, 256), np.nan, np.float32)
    result = qnb.compare(matmul_f16[32, 16], a, b, out, backends=["wgpu"])
    assert result.verdict in ("equal", "rounding"), result.summary()
    product = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(result.exact["out"], product, rtol=1e-12, atol=1e-12)
    for name in ("cpu", "wgpu"):
        record = result.arrays["out"][name]
        assert record.max_error == pytest.approx(_exact_error(result.results[name]["out"], product))
        assert record.closer
    # a plain launch on each backend gives the arrays the comparison judged
    for name in ("cpu", "wgpu"):
        plain = np.full_like(out, np.nan)
        with qnb.backend(name):
            matmul_f16[32, 16](a, b, plain)
        np.testing.assert_array_equal(plain, result.results[name]["out"])
    if result.verdict == "rounding":  # (f32 sums of 384 products in two orders)
        assert "closer to exact than cpu" in repr(result)
        assert result.first_divergence is not None


@qnb.kernel
def masked_row_softmax(x, out, n: qnb.i32):
    r = qnb.program_id(0) * 16
    t = Tile[16, 64].load(x, r, 0)
    cols = qnb.arange(64)[None, :] < n
    t = qnb.where(cols, t, -float("inf"))
    p = qnb.exp(t - t.max(axis=1, keepdims=True))
    (p / p.sum(axis=1, keepdims=True)).store(out, r, 0)


def test_row_softmax_records_each_sides_error(wgpu):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 64)) * 4).astype(np.float32)
    result = qnb.compare(masked_row_softmax[4], x, np.zeros_like(x), 50, backends=["wgpu"])
    assert result.verdict in ("equal", "rounding")
    wide = x.astype(np.float64)[:, :50]
    e = np.exp(wide - wide.max(axis=1, keepdims=True))
    expected = np.zeros((64, 64))
    expected[:, :50] = e / e.sum(axis=1, keepdims=True)
    for name in ("cpu", "wgpu"):
        record = result.arrays["out"][name]
        got = result.results[name]["out"]
        assert record.max_error == pytest.approx(_exact_error(got, expected), rel=1e-6, abs=1e-12)
        assert 0 < record.max_error < 1e-5  # f32 rounding, not 0: the f64 run is another run


@qnb.kernel
def total_4096(x, out):
    acc = Vec[1024].zeros(qnb.f32)
    for k in range(0, x.shape[0], 1024):
        acc = acc + Vec[1024].load(x, k)
    out[0] = acc.sum()


def test_a_reduction_of_4096_values(wgpu):
    x = np.random.default_rng(2).uniform(0, 1, 4096).astype(np.float32)
    result = qnb.compare(total_4096, x, np.zeros(1, np.float32), backends=["wgpu"])
    assert result.verdict in ("equal", "rounding")
    expected = float(np.sum(x.astype(np.float64)))
    assert result.exact["out"][0] == pytest.approx(expected, rel=1e-13)
    for name in ("cpu", "wgpu"):
        got = float(result.results[name]["out"][0])
        assert result.arrays["out"][name].max_error == pytest.approx(abs(got - expected))


@qnb.kernel
def shift(x, out):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    ((t + 1e8) - 1e8).store(out, i * 16, 0)


def test_lavapipes_reassociation_is_rounding_and_closer_to_exact(wgpu):
    """In f32 on cpu, ``(t + 1e8) - 1e8`` is 0 for |t| < 4; lavapipe's fast math keeps
    ``t``, which is the exact answer: the IEEE order on cpu is the side far from exact."""
    x = np.random.default_rng(7).uniform(0.25, 1.0, (64, 16)).astype(np.float32)
    x[:16] = 0.0
    result = qnb.compare(shift[4], x, np.full_like(x, np.nan), backends=["wgpu"])
    assert result.verdict == "rounding" and not result.equal
    assert result.arrays["out"]["cpu"].max_error == pytest.approx(float(np.abs(x).max()))
    assert result.arrays["out"]["wgpu"].max_error == 0.0
    assert result.arrays["out"]["wgpu"].closer and result.arrays["out"]["wgpu"].farther == 0
    assert repr(result).endswith("rounding (wgpu is closer to exact than cpu)>")
    assert "wgpu: rounding, closer to exact than cpu" in "\n".join(result.summary())
    found = result.first_divergence  # named for "rounding" too
    assert found.op == "store" and found.element == (0, 0) and found.program == (1, 0, 0)


@qnb.kernel
def divide_then_min(a, out):
    i = qnb.program_id(0) * 16
    qnb.minimum(Tile16.load(a, i, 0) / 0.0, 5.0).store(out, i, 0)


def test_a_real_difference_is_different(wgpu):
    """``min(a / 0.0, 5)`` is 5 for a > 0 (``a / 0.0`` is inf); lavapipe's fast math
    gives another answer, farther from exact."""
    a = np.random.default_rng(3).uniform(0.5, 2.0, (32, 16)).astype(np.float32)
    result = qnb.compare(divide_then_min[2], a, np.zeros_like(a), backends=["wgpu"])
    on_wgpu = result.results["wgpu"]["out"]
    assert not np.all(on_wgpu == 5.0)  # (what this test needs of lavapipe)
    assert result.verdict == "different"
    record = result.arrays["out"]["wgpu"]
    assert not record.closer and record.farther == record.mismatches == int((on_wgpu != 5).sum())
    assert result.arrays["out"]["cpu"].max_error == 0.0
    assert record.max_error == pytest.approx(_exact_error(on_wgpu, np.full(a.shape, 5.0)))
    assert "wgpu is farther from exact than cpu" in repr(result)
    assert "wgpu: differs, farther from exact than cpu" in result.summary()[1]


# --------------------------------------------------------------------------- the f64 variant


@qnb.kernel
def mixed(x: qnb.Array[qnb.f16, 2], out: qnb.Array[qnb.f32, 2], ints: qnb.Array[qnb.i32, 2]):
    t = Tile16.load(x, 0, 0).astype(qnb.f32) * 0.1
    u = (t + 1e4).astype(qnb.f16).astype(qnb.f32) - 1e4  # f16 rounds 1e4 + t to 8s
    u.store(out, 0, 0)
    (t * 30.0).astype(qnb.i32).store(ints, 0, 0)


def _mixed_args():
    x = np.random.default_rng(4).uniform(-3, 3, (16, 16)).astype(np.float16)
    return x, np.zeros((16, 16), np.float32), np.zeros((16, 16), np.int32)


def test_widened_ir_holds_f64_floats_and_keeps_ints_and_casts_to_ints():
    kernel_ir, _ = _lowered(mixed, list(_mixed_args()))
    wide = exact.widened(kernel_ir)
    assert exact.holds_narrow_floats(kernel_ir) and not exact.holds_narrow_floats(wide)
    assert [p.type.dtype for p in wide.params] == [qnb.f64, qnb.f64, qnb.i32]
    dtypes = {n.type.dtype for n in ir.walk_body(wide.body) if isinstance(n, ir.Expr)}
    assert qnb.f64 in dtypes and not dtypes & {qnb.f16, qnb.bf16, qnb.f32}
    int_casts = [
        n for n in ir.walk_body(wide.body) if isinstance(n, ir.Cast) and n.type.dtype is qnb.i32
    ]
    assert len(int_casts) == 1 and int_casts[0].operand.type.dtype is qnb.f64
    consts = sorted(n.value for n in ir.walk_body(wide.body) if isinstance(n, ir.Const))
    assert 0.1 in consts and 1e4 in consts  # literals keep the value written
    assert kernel_ir.params[0].type.dtype is qnb.f16  # the lowered IR is not changed


def test_the_exact_run_rounds_no_float_and_truncates_ints():
    x, out, ints = _mixed_args()
    kernel_ir, runtime = _lowered(mixed, [x, out, ints])
    ran_x, ran_out, ran_ints = exact.run_exact(kernel_ir, (1, 1, 1), runtime)
    t = x.astype(np.float64) * 0.1
    np.testing.assert_allclose(ran_out, (t + 1e4) - 1e4, rtol=0, atol=1e-9)  # no f16 rounding
    np.testing.assert_array_equal(ran_ints, np.trunc(t * 30.0).astype(np.int32))
    assert ran_out.dtype == np.float64 and ran_ints.dtype == np.int32
    assert ran_x.dtype == np.float64 and np.array_equal(ran_x, x.astype(np.float64))
    assert not out.any()  # the f32 output passed is not the one written


def test_an_f64_kernel_is_its_own_exact_result():
    require_backend("cuda-host")
    x = np.random.default_rng(5).standard_normal((32, 16))
    result = qnb.compare(shift[2], x, np.zeros_like(x), backends=["cuda-host"])
    kernel_ir, _ = _lowered(shift, [x, np.zeros_like(x)])
    assert not exact.holds_narrow_floats(kernel_ir)
    assert result.arrays["out"]["cpu"].max_error == 0.0
    np.testing.assert_array_equal(result.exact["out"], result.results["cpu"]["out"])


# --------------------------------------------------------------------------- tolerances


@pytest.mark.parametrize(
    ("keyword", "value", "words"),
    [
        ("rtol", -1.0, "at least 0, not -1.0"),
        ("atol", -1e-9, "at least 0"),
        ("rtol", float("nan"), "not NaN"),
        ("atol", np.float32("nan"), "not NaN"),
        ("rtol", "1e-3", "a number, not str"),
        ("atol", True, "a number, not bool"),
        ("rtol", [1e-3], "a number, not list"),
        ("atol", 1j, "a number, not complex"),
    ],
)
def test_bad_tolerances_are_refused_at_the_callers_line(keyword, value, words):
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(ToleranceError) as caught:
        qnb.compare(shift, x, x.copy(), backends=["cpu", "cpu"], **{keyword: value})
    err = caught.value
    assert isinstance(err, qnb.QnbTypeError) and isinstance(err, ValueError)
    assert f"qnb.compare: {keyword} must be" in err.message and words in err.message
    assert err.filename == __file__ and "qnb.compare(" in err.source_line


def test_good_tolerances_are_taken(wgpu):
    x = np.random.default_rng(7).uniform(0.25, 1.0, (16, 16)).astype(np.float32)
    for value in (0, 0.0, np.float32(0.5), 2):
        record = qnb.compare(shift, x, x.copy(), backends=["wgpu"], atol=value).arrays["out"]
        assert record["wgpu"].atol == float(value) and record["wgpu"].rtol == 1e-5


# --------------------------------------------------------------------------- the step budget


@qnb.kernel
def long_loop_then_shift(x, out, n: qnb.i32):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    s = 0.0
    for _k in range(n):
        s = s + 1.0
    v = (t + 1e8) - 1e8
    (v + s * 0.0).store(out, i * 16, 0)


def _count_recorded(monkeypatch) -> list[int]:
    """The steps the trace recorder records (the real recorder, counted)."""
    counted = [0]
    record = cpu_trace.Recorder.record

    def counting(self, *args):
        counted[0] += 1
        return record(self, *args)

    monkeypatch.setattr(cpu_trace.Recorder, "record", counting)
    return counted


@pytest.mark.parametrize("programs", [1, 3])
def test_the_step_budget_bounds_the_cost_of_a_long_loop(wgpu, monkeypatch, programs):
    """A 60,000-step loop (under lavapipe's 65,535-iteration cut): the cpu trace stops a
    step past the 10,000-step budget, whatever the loop's length; with several programs
    the one to probe is found without recording any step."""
    x = np.random.default_rng(8).uniform(0.25, 1.0, (16 * programs, 16)).astype(np.float32)
    counted = _count_recorded(monkeypatch)
    started = time.perf_counter()
    result = qnb.compare(
        long_loop_then_shift[programs], x, np.zeros_like(x), 60_000, backends=["wgpu"]
    )
    seconds = time.perf_counter() - started
    found = result.first_divergence
    assert found.step is None and "10,000" in found.reason and "budget" in found.reason
    assert found.steps_compared == probe.STEP_BUDGET and found.program == (0, 0, 0)
    assert counted[0] == probe.STEP_BUDGET + 1
    assert seconds < 60, seconds  # (before: one recorded step per iteration, ~4 minutes)


def _lowered(kernel, args):
    """The lowered IR of a one-program launch with ``args`` and its runtime arguments."""
    launch = kernel.specialize(*args, grid=(1, 1, 1), backend="cpu")
    return launch.ir, launch.arguments(args)

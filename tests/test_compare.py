"""``qnb.compare`` (contract: "Cross-backend comparison") and the probe builds behind it.

The divergence cases use lavapipe's own behaviour: it reassociates ``(x + 1e8) - 1e8``
to ``x`` (fast math in LLVM), where NumPy rounds ``x + 1e8`` to a multiple of 8 first,
so on wgpu the result is ``x`` and on cpu 0 (for |x| < 4). Every expected number is
computed here with NumPy or by running the kernel directly, not read from the result.
"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16
from qnb.backends import probe
from qnb.backends.base import Options
from qnb.compare import _copies, _difference, _run
from tests.conftest import require_backend

try:
    from tests import suite
except ImportError:  # pytest run without the repository root on sys.path
    import importlib.util
    import pathlib

    _spec = importlib.util.spec_from_file_location(
        "tests.suite", pathlib.Path(__file__).parent / "suite.py"
    )
    suite = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(suite)


@qnb.kernel
def shift(x, out):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    u = t + 1e8
    v = u - 1e8
    v.store(out, i * 16, 0)


SHIFT_SUB_LINE = shift.__wrapped__.__code__.co_firstlineno + 5  # ``v = u - 1e8``


@qnb.kernel
def long_then_shift(x, out, n: qnb.i32):
    t = Tile16.load(x, 0, 0)
    s = 0.0
    for _k in range(n):
        s = s + 1.0
    v = (t + 1e8) - 1e8
    (v + s * 0.0).store(out, 0, 0)


def _shift_inputs():
    """Program 0 agrees (zeros); program 1's first differing element is (0, 3)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.25, 1.0, (64, 16)).astype(np.float32)
    x[:16] = 0.0
    x[16, :3] = 0.0
    return x, np.full_like(x, np.nan)


@pytest.fixture
def wgpu():
    require_backend("wgpu")


@pytest.fixture
def cuda_host():
    require_backend("cuda-host")


def _snapshot(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _unchanged(before, after):
    for a, b in zip(before, after):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


# --------------------------------------------------------------------------- agreeing kernels


@pytest.mark.parametrize("name", ["tiled_matmul", "cholesky_offsets", "copy_tiles"])
@pytest.mark.parametrize("other", ["wgpu", "cuda-host"])
def test_agreeing_kernels_are_equal_and_leave_arguments_alone(name, other):
    require_backend(other)
    case = next(c for c in suite.CASES if c.name == name)
    grid, args = case.make(np.random.default_rng(1), np.float32)
    before = _snapshot(args)
    result = qnb.compare(case.kernel[grid], *args, backends=[other])
    assert result.backends == ["cpu", other]
    assert result.equal
    assert result.first_divergence is None
    for per_backend in result.arrays.values():
        assert per_backend[other].mismatches == 0
        assert per_backend[other].first_index is None
    _unchanged(before, args)  # the outputs keep their poison: each backend ran on copies


def test_default_backends_put_the_reference_first(wgpu):
    x, out = _shift_inputs()
    result = qnb.compare(shift[4], x, out)
    assert result.backends[0] == "cpu"
    assert "wgpu" in result.backends
    assert set(result.arrays) == {"out"}  # only the arrays the kernel stores to


def test_a_kernel_launched_without_a_grid_runs_one_program(wgpu):
    x, out = _shift_inputs()
    result = qnb.compare(shift, x, out, backends=["wgpu"])
    assert result.grid == (1, 1, 1)
    assert result.equal  # program 0's tile is zeros: it agrees


# --------------------------------------------------------------------------- a divergence


def test_divergence_on_wgpu_names_array_program_step_line_and_element(wgpu):
    x, out = _shift_inputs()
    before = _snapshot([x, out])
    result = qnb.compare(shift[4], x, out, backends=["wgpu"])
    _unchanged(before, [x, out])
    assert not result.equal

    # Independently: the reference in NumPy, the wgpu result from a plain launch.
    reference = (x + np.float32(1e8)) - np.float32(1e8)
    on_wgpu = np.full_like(x, np.nan)
    with qnb.backend("wgpu"):
        shift[4](x.copy(), on_wgpu)
    bad = ~np.isclose(on_wgpu, reference, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert bad.sum() > 0
    record = result.arrays["out"]["wgpu"]
    assert record.mismatches == int(bad.sum())
    assert record.first_index == tuple(int(i) for i in np.argwhere(bad)[0]) == (16, 3)
    assert record.max_abs == pytest.approx(float(np.abs(on_wgpu - reference).max()))
    assert result.arrays["out"]["cpu"].mismatches == 0

    found = result.first_divergence
    assert found.backend == "wgpu"
    assert found.program == (1, 0, 0)  # program 0 stored only agreeing elements
    trace = shift.trace[4](x.copy(), np.full_like(x, np.nan))
    steps = trace.steps(1)
    expected_step = next(s for s in steps if s.lineno == SHIFT_SUB_LINE)
    assert found.step.index == expected_step.index
    assert found.step.lineno == found.line == SHIFT_SUB_LINE
    assert found.op == "sub" == expected_step.op
    assert found.element == (0, 3)
    np.testing.assert_array_equal(found.expected, expected_step.output)
    assert found.expected[0, 3] == reference[16, 3]
    got = found.values["wgpu"]
    assert got[0, 3] == pytest.approx(float(x[16, 3]))  # lavapipe kept x
    np.testing.assert_array_equal(found.values["cpu"], found.expected)
    assert found.reason is None
    text = "\n".join(result.summary())
    assert "wgpu: rounding, closer to exact than cpu" in text and f"line {SHIFT_SUB_LINE}" in text
    assert result.verdict == "rounding"  # lavapipe keeps x: the exact answer (cpu rounds to 0)


def test_program_can_be_chosen(wgpu):
    x, out = _shift_inputs()
    result = qnb.compare(shift[4], x, out, backends=["wgpu"], program=2)
    assert result.first_divergence.program == (2, 0, 0)
    assert result.first_divergence.element == (0, 0)
    with pytest.raises(qnb.QnbTypeError, match="not in the grid"):
        qnb.compare(shift[4], x, out, backends=["wgpu"], program=9)


def test_step_budget(wgpu):
    x, out = _shift_inputs()
    x[:16] = x[16:32]  # program 0 differs now
    within = qnb.compare(long_then_shift, x, out, 50, backends=["wgpu"])
    assert within.first_divergence.op == "sub"
    assert within.first_divergence.step.index == 1 + 1 + 50  # t, s, the loop: then v

    past = qnb.compare(long_then_shift, x, out, probe.STEP_BUDGET, backends=["wgpu"])
    found = past.first_divergence
    assert not past.equal and found.step is None and found.element is None
    assert "10,000" in found.reason and "budget" in found.reason
    assert found.steps_compared == probe.STEP_BUDGET


# --------------------------------------------------------------------------- tolerances, NaN


def test_passing_one_tolerance_keeps_the_others_default(wgpu):
    x, out = _shift_inputs()
    default = qnb.compare(shift[4], x, out, backends=["wgpu"]).arrays["out"]["wgpu"]
    # atol stays 1e-5: |x - 0| > 1e-5 + rtol * 0 for any rtol
    only_rtol = qnb.compare(shift[4], x, out, backends=["wgpu"], rtol=10.0)
    assert only_rtol.arrays["out"]["wgpu"].mismatches == default.mismatches
    assert only_rtol.arrays["out"]["wgpu"].atol == 1e-5
    loose = qnb.compare(shift[4], x, out, backends=["wgpu"], atol=1.0)
    assert loose.equal and loose.first_divergence is None
    assert loose.arrays["out"]["wgpu"].rtol == 1e-5


def test_default_tolerances_by_dtype():
    cases = {np.float16: 1e-2, np.float32: 1e-5, np.float64: 1e-12}
    for dtype, tol in cases.items():
        ref = np.ones(4, dtype)
        inside = (ref + np.asarray(tol * 0.4, dtype)).astype(dtype)
        record = _difference(inside, ref, None, None)
        assert (record.rtol, record.atol, record.mismatches) == (tol, tol, 0)
        outside = np.array([1, 1, 1 + 10 * tol, 1], dtype)
        record = _difference(outside, ref, None, None)
        assert record.mismatches == 1 and record.first_index == (2,)
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    off = ints.copy()
    off[1, 1] += 1
    record = _difference(off, ints, 1.0, 1.0)  # integers are exact whatever is passed
    assert (record.mismatches, record.first_index, record.max_abs) == (1, (1, 1), 1.0)
    flags = np.array([True, False])
    assert _difference(~flags, flags, None, None).mismatches == 2


def test_nan_equals_nan_and_infinity_only_itself():
    ref = np.array([np.nan, np.inf, -np.inf, 1.0, np.inf, 2.0], np.float32)
    got = np.array([np.nan, np.inf, -np.inf, np.nan, 3.0e38, np.inf], np.float32)
    record = _difference(got, ref, None, None)
    assert record.mismatches == 3 and record.first_index == (3,)
    assert record.max_abs == np.inf and record.max_rel == np.inf
    same = _difference(ref.copy(), ref, None, None)
    assert same.mismatches == 0 and same.max_abs == 0.0


@qnb.kernel
def specials(x, out):
    t = Tile16.load(x, 0, 0)
    t.store(out, 0, 0)


def test_nan_and_inf_from_a_real_kernel_agree(wgpu):
    x = np.ones((16, 16), np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    result = qnb.compare(specials, x, np.zeros_like(x), backends=["wgpu"])
    assert np.isnan(result.results["cpu"]["out"][0, 0])
    assert np.isnan(result.results["wgpu"]["out"][0, 0])
    assert result.equal, result.summary()
    assert result.arrays["out"]["wgpu"].max_abs == 0.0


# --------------------------------------------------------------------------- probe builds


def _probe_run(kernel, backend, grid, args, flat=0):
    words = probe.new_buffer(1 << 20)
    copies = _copies(args)
    _run(kernel.variant(probe=True), backend, grid, copies, extra=(words, flat))
    values, count = probe.decode(words)
    return copies, values, count


@pytest.mark.parametrize("backend", ["wgpu", "cuda-host"])
@pytest.mark.parametrize("case", suite.CASES, ids=lambda c: c.name)
def test_probe_build_changes_no_result_and_records_every_step(backend, case):
    """On the suite: the probe build's outputs are bit-identical to the normal build's, and
    its recorded values are the cpu trace's steps, one for one."""
    require_backend(backend)
    dtype = np.float64 if backend == "cuda-host" and np.float64 in case.dtypes else case.dtypes[0]
    if backend == "wgpu" and dtype == np.float16:
        dtype = np.float32 if np.float32 in case.dtypes else case.dtypes[-1]
    grid, args = case.make(np.random.default_rng(3), dtype)
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    normal = _copies(args)
    _run(case.kernel, backend, grid, normal)
    last = grid[0] * grid[1] * grid[2] - 1
    probed, values, count = _probe_run(case.kernel, backend, grid, args, flat=last)
    for a, b in zip(normal, probed):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), case.name
    program = (last % grid[0], last // grid[0] % grid[1], last // (grid[0] * grid[1]))
    steps = case.kernel.trace[grid](*_copies(args)).steps(program)
    assert count == len(steps) == len(values)
    for step, value in zip(steps, values):
        expected = np.asarray(step.output)
        value = np.asarray(value)
        assert value.shape == expected.shape, (case.name, step)
        if expected.dtype.kind == "f":
            tol = 1e-3 if value.dtype == np.float16 else 1e-4
            np.testing.assert_allclose(value, expected, rtol=tol, atol=tol, err_msg=repr(step))
        else:
            np.testing.assert_array_equal(value, expected.astype(value.dtype), err_msg=repr(step))


def test_probe_build_is_its_own_cache_entry(wgpu):
    from qnb import cache

    x, out = _shift_inputs()
    qnb.compare(shift[4], x, out, backends=["wgpu"])
    events = [e for e in cache.events() if e.kernel == "shift" and e.backend == "wgpu"]
    options = {tuple(sorted(e.components["options"].items())) for e in events}
    assert (("debug", False), ("fast_math", False)) in options
    assert (("debug", False), ("fast_math", False), ("probe", True)) in options
    normal = shift.source("wgsl", x, out)
    assert probe.PROBE_PARAM not in normal  # the normal build never holds the probe


def test_probe_build_renders_for_cuda_and_records_f64(cuda_host):
    case = next(c for c in suite.CASES if c.name == "cholesky_offsets")
    grid, args = case.make(np.random.default_rng(5), np.float64)
    _, values, count = _probe_run(case.kernel, "cuda-host", grid, args, flat=2)
    steps = case.kernel.trace[grid](*_copies(args)).steps(2)
    assert count == len(steps)
    chol = next(k for k, s in enumerate(steps) if s.op == "cholesky_")
    np.testing.assert_allclose(values[chol], steps[chol].output, rtol=1e-12, atol=1e-12)
    assert values[chol].dtype == np.float64


def test_help_explains_the_result():
    text = qnb.compare.__doc__
    for word in ("first_divergence", "mismatches", "first_index", "equal_nan", "10,000"):
        assert word in text
    assert qnb.Comparison.__name__ == "Comparison"


@qnb.kernel
def solo_shift(x, out):
    i = qnb.program_id(0)
    out[i] = (x[i] + 1e8) - 1e8


def test_a_scalar_step_diverges_at_element_unit(wgpu):
    """A kernel that holds no tile runs a program per thread (solo): its probe records
    scalars, and the element of a scalar step is ()."""
    x = np.zeros(64, np.float32)
    x[5:] = 0.75
    result = qnb.compare(solo_shift[64], x, np.zeros_like(x), backends=["wgpu"])
    record = result.arrays["out"]["wgpu"]
    assert (record.mismatches, record.first_index) == (59, (5,))
    found = result.first_divergence
    assert found.program == (5, 0, 0) and found.element == ()
    assert found.op == "store" and found.expected == 0.0
    assert found.values["wgpu"] == pytest.approx(0.75)


def _nvrtc_missing() -> str | None:
    from qnb.backends import cuda

    try:
        cuda.nvrtc_version()
        cuda.include_dirs()
    except qnb.BackendError as exc:
        return exc.message
    return None


@pytest.mark.skipif(_nvrtc_missing() is not None, reason=f"NVRTC missing: {_nvrtc_missing()}")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("tiled_matmul", np.float16),
        ("tiled_matmul", np.float64),
        ("cholesky_offsets", np.float32),
        ("bool_masks", np.float64),
        ("element_access", np.int32),
        ("vector_loads", np.float32),
    ],
)
def test_probe_builds_compile_with_nvrtc(name, dtype, arch):
    from qnb.backends.cuda import CudaBackend

    case = next(c for c in suite.CASES if c.name == name)
    _, args = case.make(np.random.default_rng(0), dtype)
    kernel_ir = probe.add_probe(case.kernel._lower_for(args)[0])
    artifact = CudaBackend().compile_for_arch(kernel_ir, Options(probe=True), arch)
    assert artifact.binary[:4] == b"\x7fELF"
    assert probe.PROBE_PARAM in artifact.text["source"]
    (entry,) = [a for a in artifact.text["abi"] if a["name"] == probe.PROBE_PARAM]
    assert entry["stored"]  # the launcher copies the probe buffer back


def test_a_debug_kernel_compares_through_its_probe_build(wgpu):
    """Debug mode adds an error word that its launcher passes last; the probe's buffers
    come before it."""
    checked = qnb.kernel(shift.__wrapped__, debug=True)
    x, out = _shift_inputs()
    result = qnb.compare(checked[4], x, out, backends=["wgpu"])
    found = result.first_divergence
    assert found.program == (1, 0, 0) and found.op == "sub" and found.element == (0, 3)


@pytest.mark.parametrize("backend", ["wgpu", "cuda-host"])
@pytest.mark.parametrize(
    "name, shape",
    [("row_softmax", (8, 32)), ("transpose_and_reduce", (1, 16)), ("vec_lines", (64, 64))],
)
def test_probe_records_tiles_and_vecs_of_any_shape(backend, name, shape):
    """A probe entry carries its value's shape: a Tile[8, 32] step decodes as 8×32 (not
    as 256 words of a Tile16), equal to the cpu trace's step."""
    from tests import shape_cases

    require_backend(backend)
    case = next(c for c in shape_cases.SHAPE_CASES if c.name == name)
    grid, args = case.make(np.random.default_rng(5), np.float32, shape)
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    _, values, count = _probe_run(case.kernel, backend, grid, args)
    steps = case.kernel.trace[grid](*_copies(args)).steps((0, 0, 0))
    assert count == len(steps) == len(values)
    assert any(np.asarray(v).shape not in ((), (16,), (16, 16)) for v in values)
    for step, value in zip(steps, values):
        expected = np.asarray(step.output)
        assert np.asarray(value).shape == expected.shape, step
        np.testing.assert_allclose(
            np.asarray(value, np.float64), expected.astype(np.float64), rtol=1e-5, atol=1e-5
        )


@qnb.kernel
def bf16_steps(x: qnb.Array[qnb.bf16, 2], out: qnb.Array[qnb.bf16, 2]):
    t = Tile16.load(x, 0, 0)
    u = t * 3.0 + 1.0
    (u - t).store(out, 0, 0)


def _bf16_inputs():
    x = np.random.default_rng(9).standard_normal((16, 16)).astype(qnb.bf16)
    return x, np.zeros_like(x)


def test_probe_build_records_bf16_steps_on_cuda(cuda_host):
    """The CUDA probe carries bf16 (widened to f32, exactly): each step's value is the cpu
    trace's bit for bit, and qnb.compare runs a bf16 kernel on the CUDA code."""
    x, out = _bf16_inputs()
    _, values, count = _probe_run(bf16_steps, "cuda-host", (1, 1, 1), [x, out])
    steps = bf16_steps.trace[1](x, out.copy()).steps(0)
    assert count == len(steps) == len(values)
    for step, value in zip(steps, values):
        expected = np.asarray(step.output)
        assert np.asarray(value).dtype == expected.dtype == np.dtype(qnb.bf16), step
        np.testing.assert_array_equal(np.asarray(value).view(np.uint16), expected.view(np.uint16))
    assert qnb.compare(bf16_steps[1], x, out, backends=["cuda-host"]).equal


@pytest.mark.skipif(_nvrtc_missing() is not None, reason=f"NVRTC missing: {_nvrtc_missing()}")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_bf16_probe_build_compiles_with_nvrtc(arch):
    from qnb.backends.cuda import CudaBackend

    x, out = _bf16_inputs()
    kernel_ir = probe.add_probe(bf16_steps.specialize(x, out).ir)
    artifact = CudaBackend().compile_for_arch(kernel_ir, Options(probe=True), arch)
    assert artifact.binary[:4] == b"\x7fELF"
    assert "__bfloat162float" in artifact.text["source"]

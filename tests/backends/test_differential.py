"""Every GPU backend (and cuda-host, the CUDA code run on the host) against the cpu backend,
on every kernel of the shared suite.

One test, parametrised over the backend (the ``gpu_backend_name`` fixture), the suite's
kernels × their dtypes, and three grids: the case's own grid, a single program, and one
extra program along each used axis (those programs read and write outside the arrays,
which both backends must skip; where cpu raises QnbIndexError, the backend in debug mode must
raise it too). Inputs are random (never all-zero) and every output is
poisoned (NaN / a sentinel) before the run, so an element one backend writes and the
other does not shows up. f16 runs where the adapter has it; f64 and bf16 on wgpu must
raise ``BackendError`` at compile time.
"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb.dtypes import as_dtype
from tests.helpers import skip_unless_dtype_runs

try:
    from tests import suite
except ImportError:  # pytest run without the repository root on sys.path
    import importlib.util
    import pathlib

    _spec = importlib.util.spec_from_file_location(
        "tests.suite", pathlib.Path(__file__).parents[1] / "suite.py"
    )
    suite = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(suite)

GRIDS = ("case", "one", "extra")
PARAMS = [
    pytest.param(case, np.dtype(dtype), grid, id=f"{case.name}-{np.dtype(dtype).name}-{grid}")
    for case in suite.CASES
    for dtype in case.dtypes
    for grid in GRIDS
]


def _grid(kind: str, grid) -> tuple:
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    if kind == "one":
        return (1,) * len(grid)
    if kind == "extra":
        return tuple(g + 1 for g in grid)
    return grid


def _run(backend: str, kernel, grid, args):
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with qnb.backend(backend):
        kernel[grid](*args)
    return args


@pytest.fixture(scope="module")
def cuda_host_prebuilt():
    """``prebuild((case name, dtype name))``: this file's cuda-host kernels (one per case
    and dtype, whatever the grid), built ``BATCH`` at a time (``prebuild_in_batches``)."""
    from qnb.backends import get
    from tests.cuda_host import backend as host

    kernels = {(p.values[0].name, p.values[1].name): p.values[:2] for p in PARAMS}

    def lowered(key):
        case, dtype = kernels[key]
        _grid, args = case.make(np.random.default_rng(1234), dtype.type)
        return case.kernel._lower_for(args)[0], case.kernel._options

    return host.prebuild_in_batches(get("cuda-host"), kernels, lowered)


@pytest.fixture(scope="module")
def cuda_host_debug_prebuilt():
    """``prebuild(case)``: ``case``'s debug-mode cuda-host kernels at each of its dtypes as
    one g++ and one NVRTC program, the first time one is needed (where cpu raises on the
    extra grid, which a case mostly does at each of its dtypes)."""
    from qnb.backends import get
    from qnb.frontend.checks import add_bounds_checks

    built = set()

    def prebuild(case) -> None:
        if case.name not in built:
            built.add(case.name)
            checked = qnb.kernel(case.kernel.__wrapped__, debug=True)
            kernels = []
            for dtype in case.dtypes:
                _grid, args = case.make(np.random.default_rng(1234), dtype)
                kernel_ir = add_bounds_checks(checked._lower_for(args)[0])[0]  # as compiled
                kernels.append((kernel_ir, checked._options))
            get("cuda-host").prebuild(kernels)

    return prebuild


@pytest.mark.parametrize(("case", "dtype", "grid_kind"), PARAMS)
def test_backend_matches_cpu(request, gpu_backend_name, case, dtype, grid_kind):
    if gpu_backend_name == "cuda-host":
        request.getfixturevalue("cuda_host_prebuilt")((case.name, dtype.name))
    rng = np.random.default_rng(1234)
    grid, args = case.make(rng, dtype.type)
    grid = _grid(grid_kind, grid)
    if gpu_backend_name == "wgpu" and dtype in (np.float64, qnb.bf16.numpy):
        with pytest.raises(qnb.BackendError, match=f"WGSL has no {as_dtype(dtype)}"):
            _run("wgpu", case.kernel, grid, args)
        return
    skip_unless_dtype_runs(gpu_backend_name, dtype)
    try:
        want = _run("cpu", case.kernel, grid, args)
    except qnb.QnbIndexError as cpu_error:
        # Extra programs index a scalar outside an array: cpu raises (it always checks).
        # A GPU backend reads 0 / skips the write, and in debug mode raises the same way.
        assert grid_kind == "extra"
        _run(gpu_backend_name, case.kernel, grid, args)  # runs, touching nothing outside
        if gpu_backend_name == "cuda-host":
            request.getfixturevalue("cuda_host_debug_prebuilt")(case)
        checked = qnb.kernel(case.kernel.__wrapped__, debug=True)
        with pytest.raises(qnb.QnbIndexError) as gpu_error:
            _run(gpu_backend_name, checked, grid, args)
        assert gpu_error.value.filename == cpu_error.filename
        assert "out of range" in gpu_error.value.message
        return
    got = _run(gpu_backend_name, case.kernel, grid, args)
    rtol, atol = suite.tolerance(dtype, case.name)
    for index, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, np.ndarray):
            continue
        message = f"{case.name} argument {index} ({w.dtype}) on {gpu_backend_name}, grid {grid}"
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=message)
        else:
            np.testing.assert_allclose(
                g.astype(np.float64),
                w.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=message,
            )

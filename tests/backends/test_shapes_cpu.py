"""Tiles of every shape on the cpu backend (the oracle) against NumPy written directly in
``tests/shape_cases.py``: every case at each of its shapes and dtypes, random non-zero
inputs, poisoned outputs. The same cases run on the GPU backends (wgpu, cuda-host, and
cuda where a GPU is lent) at the shapes ``GPU_SHAPES`` (a row, a column, the largest
square, the tall one; each compile costs seconds there), f64 on wgpu refused with
BackendError."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from tests import shape_cases
from tests.conftest import require_backend
from tests.helpers import skip_unless_dtype_runs

BACKENDS = ("cpu", "wgpu", "cuda-host", "cuda")
GPU_SHAPES = ((1, 16), (16, 1), (64, 64), (128, 32))
HOST_SHAPES = ((16, 1), (64, 64), (128, 32))  # cuda-host: a g++ build with TSan per kernel
USES_F64 = ("mixed_dtype_roundtrip",)  # kernels that widen to f64 whatever their dtype


def _runs(backend, dtype, shape) -> bool:
    if backend == "cpu":
        return True
    if backend == "cuda-host":
        return shape in HOST_SHAPES and np.dtype(dtype) != np.float64
    return shape in GPU_SHAPES


PARAMS = [
    pytest.param(
        backend,
        case,
        np.dtype(dtype),
        shape,
        id=f"{backend}-{case.name}-{np.dtype(dtype).name}-{shape_cases.param_id(shape)}",
    )
    for backend in BACKENDS
    for case, dtype, shape in shape_cases.params()
    if _runs(backend, dtype, shape)
]


def run_case(backend, case, dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    grid, args = case.make(rng, dtype, shape)
    inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with qnb.backend(backend):
        case.kernel[grid](*args)
    return inputs, args


def assert_outputs(case, shape, inputs, args):
    for index, want in case.expect(inputs, shape).items():
        got = args[index]
        assert got.dtype == want.dtype, (index, got.dtype, want.dtype)
        if case.tolerance and got.dtype.kind == "f":
            scale = max(1.0, float(np.nanmax(np.abs(want.astype(np.float64)), initial=0)))
            tol = case.tolerance * (50 if got.dtype == np.float16 else 1)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale * 16, equal_nan=True)
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")


@pytest.fixture(scope="module")
def cuda_host_prebuilt():
    """``prebuild(id)``: the cuda-host cases of this file, built ``BATCH`` at a time
    (``prebuild_in_batches``)."""
    from qnb.backends import get
    from tests.cuda_host import backend as host

    host_params = {p.id: p.values[1:] for p in PARAMS if p.values[0] == "cuda-host"}

    def lowered(param_id):
        case, dtype, shape = host_params[param_id]
        _grid, args = case.make(np.random.default_rng(0), dtype, shape)
        return case.kernel._lower_for(args)[0], case.kernel._options

    return host.prebuild_in_batches(get("cuda-host"), host_params, lowered)


@pytest.mark.parametrize(("backend", "case", "dtype", "shape"), PARAMS)
def test_shape_case_matches_numpy(request, backend, case, dtype, shape):
    if backend != "cpu":
        require_backend(backend)
        skip_unless_dtype_runs(backend, dtype)
    if backend == "cuda-host":
        request.getfixturevalue("cuda_host_prebuilt")(request.node.callspec.id)
    if backend == "wgpu" and (np.dtype(dtype) == np.float64 or case.name in USES_F64):
        with pytest.raises(qnb.BackendError, match="no f64"):
            run_case(backend, case, dtype, shape)
        return
    inputs, args = run_case(backend, case, dtype, shape)
    assert_outputs(case, shape, inputs, args)


def test_every_shape_and_dtype_is_covered():
    shapes = {s for c in shape_cases.SHAPE_CASES for s in c.shapes}
    for wanted in ((1, 16), (16, 1), (8, 32), (32, 32), (64, 64), (128, 32)):
        assert wanted in shapes
    assert len(shape_cases.params()) > 150


def test_large_tiles_run_fewer_programs_at_once(monkeypatch):
    from qnb.backends.cpu import interpreter, lanes

    case = next(c for c in shape_cases.SHAPE_CASES if c.name == "row_softmax")
    kernel_ir, _ = case.kernel._lower_for([np.ones((256, 127), np.float32)] * 2 + [128, 128])
    assert lanes.chunk_programs(kernel_ir) == lanes.CHUNK * 256 // (128 * 128)
    # chunks of 3 programs: the results do not depend on where a chunk ends
    monkeypatch.setattr(lanes, "CHUNK_ELEMENTS", 3 * 8 * 32)
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (80, 31)).astype(np.float32)
    out = np.full(x.shape, np.nan, np.float32)
    small_ir, _ = case.kernel._lower_for([x, out, 8, 32])
    assert lanes.chunk_programs(small_ir) == 3
    interpreter.run(small_ir, (10, 1, 1), [x, out])
    want = case.expect([x, out, 8, 32], (8, 32))[1]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)

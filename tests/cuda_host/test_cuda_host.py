"""The cuda backend's generated code, run on the host (``cuda-host``, see ``backend.py``).

- Every hand-built IR case (every op at every dtype it accepts, ``cuda_ir_cases.py``)
  against the cpu oracle: the same cases ``test_cuda.py`` runs on a GPU.
- The emulation is not vacuous: its barrier really separates the phases of a block, a
  renderer without barriers fails against cpu, and a write outside an array is caught.

(The suite kernels run on ``cuda-host`` in ``tests/backends/test_differential.py``.)
"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb.backends import cuda_render
from qnb.backends.base import Artifact, Options
from tests import suite
from tests.backends import cuda_ir_cases
from tests.conftest import require_backend
from tests.cuda_host import backend as host

CASES = {case.name: case for case in cuda_ir_cases.all_cases()}


@pytest.fixture(scope="module")
def cuda_host():
    require_backend("cuda-host")
    return host.CudaHostBackend()


@pytest.fixture(scope="module")
def artifacts(cuda_host):
    """Each IR case compiled once, by the first test that needs it: one g++ run per test
    keeps each within its timeout on a loaded machine (pytest-xdist spreads the files over
    the cores), where compiling every case up front in one fixture did not."""

    class Compiled(dict):
        def __missing__(self, name):
            self[name] = cuda_host.compile(CASES[name].kernel, Options())
            return self[name]

    return Compiled()


@pytest.mark.parametrize("name", list(CASES))
def test_ir_case_matches_cpu(cuda_host, artifacts, name):
    from qnb.backends import get

    case = CASES[name]
    cpu = get("cpu")
    copy = cuda_ir_cases.copy_inputs
    want = cuda_ir_cases.launch(
        cpu.load(cpu.compile(case.kernel, Options())), case, copy(case.inputs)
    )
    got = cuda_ir_cases.launch(cuda_host.load(artifacts[name]), case, copy(case.inputs))
    for param in case.kernel.arrays:
        message = f"{name}: {param.name}"
        cuda_ir_cases.assert_close(got[param.name], want[param.name], case.rtol, message)


def _handwritten(body: str, barrier: bool = True) -> Artifact:
    source = (
        'extern "C" __global__ void qnb_probe(float* a_out, int n_out_0, int, int, int) {\n'
        + body.replace("BARRIER", "__syncthreads();" if barrier else "")
        + "\n}\n"
    )
    abi = [{"name": "out", "kind": "array", "dtype": "f32", "ndim": 1, "stored": True}]
    return Artifact(text={"source": source, "entry": "qnb_probe", "abi": abi, **host.ONE_PROGRAM})


REVERSE = """
  __shared__ float buffer[256];
  buffer[threadIdx.x] = (float)(threadIdx.x + 1000 * blockIdx.x);
  BARRIER
  a_out[blockIdx.x * 256 + threadIdx.x] = buffer[255 - threadIdx.x];
"""


def test_barrier_separates_the_phases_of_a_block(cuda_host):
    out = np.full(512, np.nan, np.float32)
    cuda_host.load(_handwritten(REVERSE))((2, 1, 1), [out])
    want = np.concatenate([np.arange(255, -1, -1), 1000 + np.arange(255, -1, -1)])
    np.testing.assert_array_equal(out, want)

    # Without the barrier, thread 0 reads buffer[255] before thread 255 has written it.
    unordered = np.full(512, np.nan, np.float32)
    cuda_host.load(_handwritten(REVERSE, barrier=False))((2, 1, 1), [unordered])
    assert not np.array_equal(unordered, want)


def test_a_write_outside_an_array_is_caught(cuda_host):
    outside = _handwritten("  a_out[threadIdx.x + 8] = 1.0f;")
    with pytest.raises(AssertionError, match="wrote outside array parameter 'out'"):
        cuda_host.load(outside)((1, 1, 1), [np.zeros(256, np.float32)])


def test_a_renderer_without_barriers_fails_against_cpu(cuda_host, monkeypatch):
    case = next(c for c in suite.CASES if c.name == "transpose_and_reduce")
    kernel_ir, grid, args = suite.lowered(case, np.float32, seed=7)
    from qnb.backends import get

    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    get("cpu").load(get("cpu").compile(kernel_ir, Options()))(grid, want)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    monkeypatch.setattr(cuda_render.CudaRenderer, "barrier", "")
    cuda_host.load(cuda_host.compile(kernel_ir, Options()))(grid, got)
    assert any(
        isinstance(w, np.ndarray) and not np.allclose(g, w, equal_nan=True)
        for g, w in zip(got, want)
    )


def test_device_arrays_and_scalars_through_the_kernel_api(cuda_host):
    @qnb.kernel
    def scale(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], s: qnb.f32):
        t = qnb.Tile16.load(x, 0, 0)
        (t * s).store(out, 0, 0)

    x = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    with qnb.backend("cuda-host"):
        scale[1](qnb.to_device(x), out, 2.5)
    np.testing.assert_allclose(out, x * np.float32(2.5), rtol=1e-6)

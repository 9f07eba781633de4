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
from qnb.errors import BackendError, CompileError
from tests import suite
from tests.backends import cuda_ir_cases
from tests.conftest import require_backend
from tests.cuda_host import backend as host

CASES = {case.name: case for case in cuda_ir_cases.all_cases()}


@pytest.fixture(scope="module")
def cuda_host():
    require_backend("cuda-host")
    return host.CheckedCudaHostBackend()


@pytest.fixture(scope="module")
def artifacts(cuda_host):
    """Each IR case compiled once. The first test of each run of ``host.BATCH`` cases
    builds them together (``prebuild``: one g++ and one NVRTC program for them all, a
    fraction of one run each), then each test compiles its own case from what was built;
    a case whose batch fails is compiled alone, by its test, which then fails naming it."""
    prebuild = host.prebuild_in_batches(cuda_host, CASES, lambda n: (CASES[n].kernel, Options()))

    class Compiled(dict):
        def __missing__(self, name):
            prebuild(name)
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
    with pytest.raises(BackendError, match="wrote outside array parameter 'out'"):
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


def test_kernels_built_together_each_run_as_alone(cuda_host, monkeypatch, tmp_path):
    """``build_many`` puts kernels of one entry name in one library, each its own: the
    probe with its barrier and the one without give their own results from it."""
    monkeypatch.setattr(host, "BUILD", tmp_path)
    monkeypatch.setattr(host, "_BUILT_MANY", {})
    with_barrier, without = _handwritten(REVERSE).text, _handwritten(REVERSE, False).text
    host.build_many(
        [(t["source"], t["entry"], t["abi"], t["threads"]) for t in (with_barrier, without)]
    )
    built = list(host._BUILT_MANY.values())
    assert len(built) == 2 and built[0].name == built[1].name and built[0].symbol != built[1].symbol
    want = np.concatenate([np.arange(255, -1, -1), 1000 + np.arange(255, -1, -1)])
    out, unordered = np.full(512, np.nan, np.float32), np.full(512, np.nan, np.float32)
    cuda_host.load(Artifact(text=with_barrier))((2, 1, 1), [out])
    cuda_host.load(Artifact(text=without))((2, 1, 1), [unordered])
    np.testing.assert_array_equal(out, want)
    assert not np.array_equal(unordered, want)
    assert [p.name.split("-")[0] for p in tmp_path.iterdir() if p.is_file()] == ["batch"]


def test_a_batch_with_a_bad_kernel_leaves_each_to_build_alone(cuda_host, monkeypatch, tmp_path):
    """A batch g++ rejects builds nothing: the good kernel then builds and runs alone, and
    the bad one fails at its own load, with g++'s log naming it."""
    monkeypatch.setattr(host, "BUILD", tmp_path)
    monkeypatch.setattr(host, "_BUILT_MANY", {})
    good = _handwritten(REVERSE).text
    bad = dict(good, source=good["source"].replace("__syncthreads();", "__syncthreads()"))
    host.build_many([(t["source"], t["entry"], t["abi"], t["threads"]) for t in (good, bad)])
    assert host._BUILT_MANY == {}
    out = np.full(512, np.nan, np.float32)
    cuda_host.load(Artifact(text=good))((2, 1, 1), [out])
    assert out[0] == 255
    with pytest.raises(BackendError, match="g\\+\\+ rejected") as raised:
        cuda_host.load(Artifact(text=bad))
    assert "qnb_probe.cpp" in raised.value.message


def test_a_kernel_nvrtc_rejects_in_a_batch_fails_its_own_check(monkeypatch, tmp_path):
    """``nvrtc_check_many`` stores only what NVRTC compiled: the rejected kernel is left to
    its own ``nvrtc_check``, which compiles it alone and raises, naming its line."""
    from tests.backends import nvrtc_batch

    if nvrtc_batch.toolchain_reason() is not None:
        pytest.skip(f"NVRTC toolchain missing: {nvrtc_batch.toolchain_reason()}")
    monkeypatch.setattr(nvrtc_batch, "STORE", tmp_path)
    good = _handwritten(REVERSE).text["source"]
    bad = good.replace("__syncthreads();", "__syncthreads(); undefined_name = 1;")
    host.nvrtc_check_many([(good, Options()), (bad, Options())])
    assert ".entry qnb_probe(" in nvrtc_batch.stored(good, "sm_90").ptx  # compiled alone
    assert nvrtc_batch.stored(bad, "sm_90") is None
    assert nvrtc_batch.stored(good, "sm_80") is None  # kept per arch
    host.nvrtc_check(good, "qnb_probe", Options())  # stored: no compile
    with pytest.raises(CompileError, match="undefined_name"):
        host.nvrtc_check(bad, "qnb_probe", Options())

"""Every warp busy in an f16/bf16 ``@`` on the tensor cores (``cuda_render``'s
``matmul_f16``/``matmul_bf16`` and ``tensor_core_plan``).

A product whose C has fewer 16x16 blocks than the program has warps gives the idle warps
slices of K (partial C's in shared memory, added in slice order); a larger C gives each
warp 2x2, 1x2 or 2x1 groups of blocks. Checked three ways, on hand-built IR
(``gpu_shape_cases.matmul``):

- on cuda-host against the cpu backend and a float64 NumPy product (random inputs,
  poisoned outputs), f16 and bf16;
- by the host model's count of ``wmma::mma_sync`` calls per thread: every lane of a warp
  makes the same calls, the warps' calls add up to the product's (M/16)(N/16)(K/16), and
  the busiest warp makes no more than an even share, ceil(calls / warps) (before this
  change a 16x16x256 product made 16 calls on warp 0 and none on the other seven);
- by NVRTC's PTX for compute_90: a unit of work is straight-line code whose
  ``wmma.mma.sync`` count is its rows x cols x (K/16 / splits) products, and the units per
  warp times that is the even share (the same 16x16x256 product's PTX held 32).
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import pathlib
import re
import sys

import numpy as np
import pytest

from qnb import dtypes as D
from qnb.backends import registry
from qnb.backends.base import Options
from qnb.backends.cuda_render import CudaRenderer, render_cuda, tensor_core_plan
from qnb.errors import BackendError
from tests.backends.nvrtc_batch import toolchain_reason
from tests.conftest import require_backend


def _load(name):
    path = pathlib.Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"qnb_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


SHAPES = _load("gpu_shape_cases")

# (M, N, K): one block and long K, a few blocks, more blocks than warps (1x2 groups), a C
# with blocks not a multiple of the warps, and 64x64x64 (its A, B and C past the product's
# shared-memory budget: the scalar path, every thread busy)
PRODUCTS = [
    (16, 16, 16),
    (16, 16, 256),
    (32, 32, 64),
    (16, 32, 128),
    (32, 16, 128),
    (128, 32, 16),
    (48, 16, 64),
    (64, 64, 64),
]
HALVES = {"f16": D.f16, "bf16": D.bf16}
CASES = [
    pytest.param(shape, dtype, threads, id=f"{'x'.join(map(str, shape))}-{dtype}-t{threads}")
    for shape in PRODUCTS
    for dtype in HALVES
    for threads in (256, 64)
    if threads == 256 or shape == (16, 16, 256)
]


def _kernel(shape, dtype):
    m, n, k = shape
    return SHAPES.matmul(m, k, n, HALVES[dtype])


def _plan(shape, threads):
    """The plan the renderer makes for ``shape`` at ``threads``, None off the tensor cores."""
    m, n, k = shape
    room = CudaRenderer.shared_limit // 2 - (m * k + k * n) * 2
    if room < m * n * 4:
        return None
    from qnb.backends.cuda_render import SLICE_BYTES

    return tensor_core_plan(m, n, k, threads // 32, room + SLICE_BYTES)


def _units_per_warp(shape, plan, warps):
    m, n, _k = shape
    groups = (m // (16 * plan.rows)) * (n // (16 * plan.cols))
    return -(-groups * plan.splits // warps)


@pytest.fixture(scope="module")
def cuda_host_prebuilt():
    require_backend("cuda-host")
    from tests.cuda_host import backend as host

    kernels = {p.id: (_kernel(*p.values[:2])[0], Options(threads=p.values[2])) for p in CASES}
    return host.prebuild_in_batches(registry.get("cuda-host"), kernels, kernels.__getitem__)


def _run_on_cuda_host(kernel, inputs, threads):
    """(the outputs, the mma_sync calls of each thread of the block)."""
    from qnb.backends.cuda_host import build, host_text

    backend = registry.get("cuda-host")
    artifact = backend.compile(kernel, Options(threads=threads))
    got = {name: value.copy() for name, value in inputs.items()}
    backend.load(artifact)((1, 1, 1), [got[p.name] for p in kernel.params])
    library = build.Library(**artifact.text["library"])
    text = host_text(artifact.text)
    calls = build.symbol(library, text, artifact.text["entry"], "qnb_host_mma_calls")
    calls.restype, calls.argtypes = ctypes.c_long, [ctypes.c_uint]
    assert artifact.text["threads"] == threads
    assert calls(threads) == -1  # (past the block)
    return got, np.array([calls(t) for t in range(threads)])


@pytest.mark.parametrize(("shape", "dtype", "threads"), CASES)
def test_products_match_cpu_and_every_warp_gets_its_share(
    request, cuda_host_prebuilt, shape, dtype, threads
):
    cuda_host_prebuilt(request.node.callspec.id)
    m, n, k = shape
    kernel, inputs, expect = _kernel(shape, dtype)
    assert np.isnan(inputs["out"]).all()  # poisoned: an unwritten element shows
    got, calls = _run_on_cuda_host(kernel, inputs, threads)
    cpu = {name: value.copy() for name, value in inputs.items()}
    registry.get("cpu").load(registry.get("cpu").compile(kernel, Options()))(
        (1, 1, 1), [cpu[p.name] for p in kernel.params]
    )
    # f32 sums of exact f16/bf16 products in another order: the tensor-core tolerance of
    # test_cuda.py (rtol 1e-5, atol 1e-4) against cpu (NumPy's f32 matmul) and float64
    np.testing.assert_allclose(got["out"], cpu["out"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["out"], expect(inputs)["out"], rtol=1e-5, atol=1e-4)

    warps = threads // 32
    per_warp = calls.reshape(warps, 32)
    assert (per_warp == per_warp[:, :1]).all(), "a warp's lanes made different mma_sync calls"
    per_warp = per_warp[:, 0]
    plan = _plan(shape, threads)
    if plan is None:  # off the tensor cores
        assert "qnb::matmul_" not in render_cuda(kernel, Options(threads=threads)).text
        assert not per_warp.any()
        return
    total = (m // 16) * (n // 16) * (k // 16)
    assert per_warp.sum() == total, per_warp  # every product once
    assert per_warp.max() == math.ceil(total / warps) == plan.busiest, per_warp
    if total % warps == 0:
        assert (per_warp == total // warps).all(), per_warp  # every warp busy, evenly


@pytest.mark.skipif(toolchain_reason() is not None, reason=f"NVRTC missing: {toolchain_reason()}")
@pytest.mark.parametrize("dtype", sorted(HALVES))
def test_ptx_gives_each_warp_an_even_share(dtype):
    """compute_90 PTX: one unit of work is straight-line code (its K slice unrolled, the
    unit loop not), so its ``wmma.mma.sync`` count is rows x cols x slice steps, and each
    warp runs at most ``units per warp`` of them: the even share."""
    from qnb.backends import cuda

    types = "f32.f32" if dtype == "f16" else "f32.bf16.bf16.f32"
    for shape in PRODUCTS:
        plan = _plan(shape, 256)
        if plan is None:
            continue
        m, n, k = shape
        source = render_cuda(_kernel(shape, dtype)[0]).text
        _cubin, ptx, _log = cuda.nvrtc_compile(source, "compute_90")
        mmas = re.findall(r"^\s*(wmma\.mma\.sync\.\S+)", ptx, re.M)
        assert set(mmas) == {f"wmma.mma.sync.aligned.row.row.m16n16k16.{types}"}, shape
        per_unit = plan.rows * plan.cols * (k // 16 // plan.splits)
        assert len(mmas) == per_unit, (shape, plan, len(mmas))
        total = (m // 16) * (n // 16) * (k // 16)
        assert _units_per_warp(shape, plan, 8) * per_unit == math.ceil(total / 8), shape


def test_plans_spread_the_work_and_account_their_shared_memory():
    """The K slices are shared memory of the layout's, and the partial C's are added in
    slice order (slice 0 first: a fixed order, the same on every run)."""
    assert tensor_core_plan(16, 16, 256, 8, 1 << 20)[:3] == (8, 1, 1)  # 8 slices of 2 steps
    assert tensor_core_plan(16, 16, 256, 2, 1 << 20)[:3] == (2, 1, 1)
    assert tensor_core_plan(128, 32, 16, 8, 1 << 20)[:3] == (1, 1, 2)  # 1x2 groups
    assert tensor_core_plan(64, 64, 16, 4, 1 << 20)[:3] == (1, 2, 2)  # 2x2 groups
    assert tensor_core_plan(16, 16, 256, 8, 2048).splits == 2  # what the room holds
    for shape in [(16, 16, 256), (32, 32, 64)]:
        m, n, k = shape
        plan = _plan(shape, 256)
        kernel = _kernel(shape, "f16")[0]
        rendered = CudaRenderer(Options()).render(kernel)
        scratch = plan.splits * m * n
        assert f"float qs_f32_2[{scratch}];" in rendered.source
        assert rendered.layout.shared_bytes >= (m * k + k * n) * 2 + scratch * 4
        slices = re.search(r"\(qs_f32_2\[q_e\]( \+ qs_f32_2\[\d+ \+ q_e\])*\)", rendered.source)
        offsets = [int(x) for x in re.findall(r"qs_f32_2\[(\d+) \+ q_e\]", slices.group(0))]
        assert offsets == [s * m * n for s in range(1, plan.splits)]


@pytest.mark.parametrize("shape", [(16, 64, 128), (128, 128, 32)])
def test_products_with_a_tile_past_4096_elements_are_refused(shape):
    """Of the shapes the issue named, these hold a 64x128 / 128x128 tile: past what a
    program may hold, refused at compile time like any other such tile."""
    with pytest.raises(BackendError, match="at most 4096 elements"):
        render_cuda(_kernel(shape, "f16")[0])


@pytest.mark.parametrize(("shape", "dtype", "threads"), CASES)
def test_products_on_a_cuda_device_match_cpu(shape, dtype, threads):
    """The same products on a real GPU (``scripts/gpu_check.sh``; skips without one, fails
    under QNB_REQUIRE_CUDA=1): real mma.sync, every warp's share, against cpu and float64."""
    require_backend("cuda")
    kernel, inputs, expect = _kernel(shape, dtype)
    backend, cpu = registry.get("cuda"), registry.get("cpu")
    got = {name: value.copy() for name, value in inputs.items()}
    backend.load(backend.compile(kernel, Options(threads=threads)))(
        (1, 1, 1), [got[p.name] for p in kernel.params]
    )
    want = {name: value.copy() for name, value in inputs.items()}
    cpu.load(cpu.compile(kernel, Options()))((1, 1, 1), [want[p.name] for p in kernel.params])
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["out"], expect(inputs)["out"], rtol=1e-5, atol=1e-4)

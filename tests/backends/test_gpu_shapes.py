"""The GPU layouts for tiles and vecs of every shape (qnb.backends.gpu's fragments and
exchanges), on hand-built IR (``gpu_shape_cases.py``): every op at shapes from 1xN and
Nx1 to 64x64 and 128x32 (and vecs up to 4096), at the chosen thread count and at forced
ones, on wgpu and cuda-host against NumPy (poisoned outputs), NVRTC-compiled for sm_80
and sm_90, and the shapes a backend cannot hold refused at compile time."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

from qnb import dtypes as D
from qnb import ir
from qnb.backends import registry
from qnb.backends.base import Options
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
CASES = SHAPES.all_cases()
# cuda-host compiles each kernel with g++: it runs the shapes the issue names and a few more
HOST_TAGS = ("1x64", "64x1", "64x64", "128x32", "_8_4", "_32_64", "vec_ops_8", "vec_ops_4096")
HOST_TAGS += ("matmul_1x64x32", "matmul_64x64x64", "matmul_128x32x16", "_i32")


def _close(got, want, rtol, name):
    want = np.asarray(want)
    if got.dtype.kind in "ib":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)


def _run(backend_name, case, threads):
    backend = registry.get(backend_name)
    launcher = backend.load(backend.compile(case.kernel, Options(threads=threads)))
    inputs = {k: v.copy() for k, v in case.inputs.items()}
    launcher((1, 1, 1), [inputs[p.name] for p in case.kernel.params])
    return inputs


PARAMS = [
    pytest.param(case, threads, id=f"{case.name}-t{threads or 'auto'}")
    for case in CASES
    for threads in case.threads
]


# lavapipe compiles a kernel whose threads each hold 256 slots of a tile (16 threads on
# 4096 elements: four private arrays of 256) in 10-15 s of LLVM, 6-20x one of 64 slots; the
# slots are one loop whatever their count (the walker tells only 1 slot from more), so on
# the 4096-element tiles wgpu forces 64 threads (64 slots) where the others force 16, and
# 16 threads stay forced on every smaller tile.
def _wgpu_threads(case, threads):
    if threads == 16 and any(tag in case.name for tag in ("64x64", "128x32")):
        return 64
    return threads


WGPU_PARAMS = [
    pytest.param(
        case,
        _wgpu_threads(case, threads),
        id=f"{case.name}-t{_wgpu_threads(case, threads) or 'auto'}",
    )
    for case in CASES
    for threads in case.threads
]


@pytest.mark.parametrize(("case", "threads"), WGPU_PARAMS)
def test_wgpu_layout_matches_numpy(case, threads):
    require_backend("wgpu")
    got = _run("wgpu", case, threads)
    for name, want in case.expect(case.inputs).items():
        _close(got[name], want, case.rtol, f"{case.name} {name}")


@pytest.mark.parametrize(("case", "threads"), PARAMS)
def test_cuda_layout_matches_numpy(case, threads):
    require_backend("cuda")  # a real GPU (scripts/gpu_check.sh)
    got = _run("cuda", case, threads)
    for name, want in case.expect(case.inputs).items():
        _close(got[name], want, case.rtol, f"{case.name} {name}")


HOST_PARAMS = [p for p in PARAMS if any(tag in p.values[0].name for tag in HOST_TAGS)]


@pytest.fixture(scope="module")
def cuda_host_prebuilt():
    """``prebuild(name)``: this file's cuda-host kernels, built ``BATCH`` at a time
    (``prebuild_in_batches``)."""
    require_backend("cuda-host")
    from tests.cuda_host import backend as host

    kernels = {p.id: (p.values[0].kernel, Options(threads=p.values[1])) for p in HOST_PARAMS}
    for name, spec in sorted(SHAPES.HALF_CASES.items()):
        kernels[name] = (SHAPES.matmul(*spec)[0], Options())
    return host.prebuild_in_batches(registry.get("cuda-host"), kernels, kernels.__getitem__)


@pytest.mark.parametrize(("case", "threads"), HOST_PARAMS)
def test_cuda_host_layout_matches_numpy(request, cuda_host_prebuilt, case, threads):
    require_backend("cuda-host")
    cuda_host_prebuilt(request.node.callspec.id)
    got = _run("cuda-host", case, threads)
    for name, want in case.expect(case.inputs).items():
        _close(got[name], want, case.rtol, f"{case.name} {name}")


@pytest.mark.parametrize("name", sorted(SHAPES.HALF_CASES))
def test_cuda_host_half_products_match_numpy(cuda_host_prebuilt, name):
    """f16/bf16 products: on the tensor cores (WMMA, which the host model emulates) where
    M, N, K are multiples of 16, else the scalar path; f32 accumulation either way."""
    require_backend("cuda-host")
    cuda_host_prebuilt(name)
    m, k, n, dtype = SHAPES.HALF_CASES[name]
    kernel, inputs, expect = SHAPES.matmul(m, k, n, dtype)
    source = registry.get("cuda").render(kernel, Options())
    assert (f"qnb::matmul_{dtype.name}(" in source) == (m % 16 == n % 16 == k % 16 == 0)
    case = SHAPES.ShapeCase(name, kernel, inputs, expect)
    got = _run("cuda-host", case, None)
    _close(got["out"], expect(inputs)["out"], 1e-3, name)


@pytest.mark.slow
@pytest.mark.skipif(toolchain_reason() is not None, reason=f"NVRTC missing: {toolchain_reason()}")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_shape_case_compiles_with_nvrtc(arch):
    """Every case at each of its thread counts, and the f16/bf16 products, through NVRTC
    as a few programs (``nvrtc_batch``: each kernel alone in a namespace of its own)."""
    from tests.backends.nvrtc_batch import Unit, compile_units

    cuda = registry.get("cuda")
    kernels = [(f"{case.name}-t{t}", case.kernel, t) for case in CASES for t in case.threads]
    kernels += [
        (name, SHAPES.matmul(*spec)[0], None) for name, spec in sorted(SHAPES.HALF_CASES.items())
    ]
    units = [Unit(name, cuda.render(kernel, Options(threads=t))) for name, kernel, t in kernels]
    compiled, failures = compile_units(units, arch)
    assert not failures, "\n\n".join(failures[:5])
    assert [c.label for c in compiled] == [name for name, _kernel, _t in kernels]
    for unit in compiled:
        assert unit.ptx, unit.label
        if unit.label in SHAPES.HALF_CASES:
            tensor = "mma.sync" in unit.ptx
            m, k, n = SHAPES.HALF_CASES[unit.label][:3]
            assert tensor == (m % 16 == n % 16 == k % 16 == 0), unit.label


def test_thread_count_follows_the_shapes_and_the_option():
    from qnb.backends.gpu import choose_threads

    def threads_for(shape):
        return choose_threads(SHAPES.transpose(shape, D.f32)[0])

    assert threads_for((4, 8)) == 32  # at least a warp
    assert threads_for((16, 16)) == 256 and threads_for((8, 8)) == 64
    assert threads_for((64, 64)) == 256 and threads_for((128, 32)) == 256
    kernel = SHAPES.transpose((16, 16), D.f32)[0]
    wgsl = registry.get("wgpu").render(kernel, Options(threads=16))
    assert "@workgroup_size(16)" in wgsl
    assert "__launch_bounds__(128)" in registry.get("cuda").render(kernel, Options(threads=128))
    assert "q_s < 4;" in registry.get("cuda").render(kernel, Options(threads=64))  # 4 slots


@pytest.mark.parametrize("backend_name", ["wgpu", "cuda"])
def test_a_shape_past_the_limit_is_refused_at_compile_time(backend_name):
    kernel = SHAPES.transpose((64, 128), D.f32)[0]  # 8192 elements
    with pytest.raises(BackendError, match="at most 4096 elements"):
        registry.get(backend_name).render(kernel, Options())
    with pytest.raises(BackendError, match="power of two from 1 to 256"):
        registry.get(backend_name).render(SHAPES.transpose((8, 8), D.f32)[0], Options(threads=48))


def test_vec_of_4096_and_largest_tiles_fit_the_exchange_memory():
    from qnb.backends.wgsl import WgslRenderer

    for kernel in (
        SHAPES.matmul(64, 64, 64, D.f32)[0],
        SHAPES.cholesky_solve(64, 16, D.f32)[0],
        SHAPES.transpose((32, 128), D.f32)[0],
        SHAPES.vec_ops(4096, D.f32)[0],
    ):
        layout = WgslRenderer().render(kernel).layout
        assert 0 < layout.shared_bytes <= 32768, kernel.name
    assert ir.MAX_TILE_ELEMENTS >= 4096

"""Static shared memory near CUDA's 48 KiB: every ``__shared__`` declaration the renderer
makes is ``__align__(32)``, so ptxas lays them out with padding, and the renderer's
accounting must count it: a kernel whose sizes add up to less than 48 KiB but whose
aligned layout does not is refused as qnb's ``BackendError`` at render time, not by an
NVRTC error at compile time (issue #34, item 6), and a kernel just under the limit with
the padding counted still compiles. Both checked against NVRTC's real cubin compile."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import qnb
from qnb import bf16, f16, f32, f64, i32
from qnb.backends.base import Options
from qnb.backends.cuda_render import CudaRenderer
from qnb.errors import BackendError, CompileError
from tests.backends.nvrtc_batch import toolchain_reason
from tests.conftest import require_backend

LIMIT = 48 * 1024
ALIGN = 32
needs_nvrtc = pytest.mark.skipif(
    toolchain_reason() is not None, reason=f"NVRTC toolchain missing: {toolchain_reason()}"
)


def _exchanges(with_int_product: bool):
    """Thirteen __shared__ declarations (a transpose of each dtype, three small products
    and a scalar of each dtype broadcast to the block) whose sizes add up to 49,044 bytes,
    under 48 KiB, while laid out at multiples of 32 they take past it; without the i32
    product, 48,916 bytes that stay under the limit padded."""

    @qnb.kernel
    def exchanges(
        a: qnb.Array[f32, 2],
        b: qnb.Array[i32, 2],
        c: qnb.Array[f64, 2],
        d: qnb.Array[f16, 2],
        e: qnb.Array[bf16, 2],
        o: qnb.Array[f32, 1],
    ):
        ta = qnb.Tile[32, 64].load(a, 0, 0)
        ta.T.store(a, 0, 0)
        tb = qnb.Tile[32, 32].load(b, 0, 0)
        tb.T.store(b, 0, 0)
        tc = qnb.Tile[64, 64].load(c, 0, 0)
        tc.T.store(c, 0, 0)
        td = qnb.Tile[32, 32].load(d, 0, 0)
        td.T.store(d, 0, 0)
        te = qnb.Tile[16, 32].load(e, 0, 0)
        te.T.store(e, 0, 0)
        pc = qnb.Tile[8, 8].load(c, 0, 0) @ qnb.Tile[8, 8].load(c, 8, 8)
        pa = qnb.Tile[8, 8].load(a, 0, 0) @ qnb.Tile[8, 8].load(a, 8, 8)
        ints = tb.sum()
        if with_int_product:
            ints += (qnb.Tile[4, 8].load(b, 0, 0) @ qnb.Tile[8, 4].load(b, 8, 8)).sum()
        o[0] = ta.sum() + f32(ints) + f32(tc.sum() + pc.sum()) + pa.sum()
        o[1] = f32(td.sum()) + f32(te.sum())

    args = (
        np.zeros((64, 64), np.float32),
        np.zeros((64, 64), np.int32),
        np.zeros((64, 64), np.float64),
        np.zeros((64, 64), np.float16),
        np.zeros((64, 64), ml_dtypes.bfloat16),
        np.zeros(2, np.float32),
    )
    return exchanges, exchanges.specialize(*args, grid=(1,), backend="cpu").ir


class _Unbounded(CudaRenderer):
    """The CUDA renderer with no shared-memory check of its own, to ask NVRTC."""

    shared_limit = 1 << 30


_DECLARED = re.compile(r"__shared__ __align__\(32\) (\w+) (\w+)(?:\[(\d+)\])?;")
_BYTES = {"float": 4, "int": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2}


def _declared(source: str) -> list[int]:
    """The byte size of each __shared__ declaration in ``source``, in order."""
    found = _DECLARED.findall(source)
    assert found, "no __shared__ declaration in the kernel"
    return [_BYTES[type_] * int(count or 1) for type_, _, count in found]


def _nvrtc(source: str, arch: str):
    from qnb.backends.cuda import nvrtc_compile

    return nvrtc_compile(source, arch)


def test_sizes_under_the_limit_padded_over_it_are_refused_by_qnb():
    _, lowered = _exchanges(with_int_product=True)
    sizes = _declared(_Unbounded(Options()).render(lowered).source)
    assert len(sizes) == 13
    assert sum(sizes) <= LIMIT  # what counting the sizes alone let through
    assert sum(-(-s // ALIGN) * ALIGN for s in sizes) > LIMIT
    with pytest.raises(BackendError, match=r"'exchanges' needs 49184 bytes .* limit of 49152"):
        CudaRenderer(Options()).render(lowered)


def test_a_launch_of_it_on_cuda_host_is_the_same_backend_error():
    require_backend("cuda-host")
    kernel_, _ = _exchanges(with_int_product=True)
    args = [np.ones((64, 64), t) for t in (np.float32, np.int32, np.float64, np.float16)]
    args += [np.ones((64, 64), ml_dtypes.bfloat16), np.zeros(2, np.float32)]
    with qnb.backend("cuda-host"), pytest.raises(BackendError, match="shared memory") as err:
        kernel_[1](*args)
    assert "exchanges" in str(err.value)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_agrees_it_does_not_fit(arch):
    _, lowered = _exchanges(with_int_product=True)
    with pytest.raises(CompileError, match="too much shared data"):
        _nvrtc(_Unbounded(Options()).render(lowered).source, arch)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_just_under_the_limit_padded_still_compiles(arch):
    _, lowered = _exchanges(with_int_product=False)
    rendered = CudaRenderer(Options()).render(lowered)
    sizes = _declared(rendered.source)
    padded = sum(-(-s // ALIGN) * ALIGN for s in sizes)
    assert rendered.layout.shared_bytes == padded
    assert LIMIT - 256 < padded <= LIMIT  # near the limit, not far under it
    cubin, _, _ = _nvrtc(rendered.source, arch)
    assert cubin

"""Kernels past what a device binds are a BackendError at compile time, naming the limit.

- wgpu: each array is a storage buffer, and a device binds a number of them per shader
  stage (32 on lavapipe); the scalars and shapes share one uniform buffer of a bounded
  size. 33 arrays escaped as wgpu-py's own ``GPUValidationError`` at load, with its frames.
- cuda (and cuda-host, which runs what cuda would): a kernel's parameters (each array's
  pointer and shape, the scalars, the grid) must fit CUDA's parameter space: 4,096 bytes
  classically, 32,764 from CUDA 12.1 on sm_70 and newer. NVRTC 13 (sm_75 and newer)
  compiles 32,764 and rejects one byte past it with a message about something else.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import qnb
from qnb.backends import cuda
from qnb.backends.base import Options
from qnb.errors import BackendError
from tests.conftest import require_backend


def _kernel_of(tmp_path, arrays: int, loop: bool = False, ndim: int = 1):
    """A kernel of ``arrays`` array parameters that reads the first few and stores into
    the first (defined in a file: qnb reads its source)."""
    names = [f"a{i}" for i in range(arrays)]
    index = ", ".join(["0"] * ndim)
    terms = " + ".join(f"{name}[{index}]" for name in names[:4])
    body = f"    a0[{index}] = {terms}\n"
    if loop:
        body = f"    for i in range(3):\n        a0[{index}] += {terms}\n"
    source = f"import qnb\n\n\ndef k({', '.join(names)}):\n{body}"
    path = tmp_path / f"kernel_{arrays}_{int(loop)}_{ndim}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return qnb.kernel(module.k)


@pytest.fixture(scope="module")
def device():
    require_backend("wgpu")
    from qnb.backends import get

    return get("wgpu")._dev()


def test_wgpu_runs_as_many_arrays_as_the_device_binds(device, tmp_path):
    limit = int(device.device.limits["max-storage-buffers-per-shader-stage"])
    arrays = [np.full(4, k + 1, np.float32) for k in range(limit)]
    with qnb.backend("wgpu"):
        _kernel_of(tmp_path, limit)(*arrays)
    assert arrays[0][0] == 1 + 2 + 3 + 4


@pytest.mark.parametrize("extra", [1, 5])
def test_wgpu_refuses_more_arrays_than_the_device_binds(device, tmp_path, extra):
    limit = int(device.device.limits["max-storage-buffers-per-shader-stage"])
    arrays = [np.ones(4, np.float32) for _ in range(limit + extra)]
    with qnb.backend("wgpu"), pytest.raises(BackendError) as raised:
        _kernel_of(tmp_path, limit + extra)(*arrays)
    message = raised.value.message
    assert f"needs {limit + extra} storage buffers ({limit + extra} arrays)" in message
    assert f"allows {limit} (max-storage-buffers-per-shader-stage" in message
    assert raised.value.__cause__ is None and raised.value.__context__ is None


def test_wgpu_counts_the_loop_budget_words_among_the_buffers(device, tmp_path):
    if device.loop_budget is None:
        pytest.skip("this adapter's driver has no loop budget: no words to bind")
    limit = int(device.device.limits["max-storage-buffers-per-shader-stage"])
    arrays = [np.ones(4, np.float32) for _ in range(limit)]
    with qnb.backend("wgpu"), pytest.raises(BackendError, match="words that report a loop"):
        _kernel_of(tmp_path, limit, loop=True)(*arrays)
    with qnb.backend("wgpu"):  # one array fewer fits, loop and words
        _kernel_of(tmp_path, limit - 1, loop=True)(*arrays[:-1])
    assert arrays[0][0] == 29  # a0 = 2 * a0 + 3, three times, from 1


def test_wgpu_refuses_a_uniform_buffer_past_the_device_limit(device, tmp_path, monkeypatch):
    """Scalars and shapes travel in one uniform buffer: a device that binds fewer bytes
    than a kernel's (here this device with its limit lowered to 16 bytes) refuses it."""
    kernel = _kernel_of(tmp_path, 3, ndim=2)  # 6 shape words and the grid: 48 bytes
    monkeypatch.setitem(device.device.limits, "max-uniform-buffer-binding-size", 16)
    arrays = [np.ones((2, 2), np.float32) for _ in range(3)]
    with qnb.backend("wgpu"), pytest.raises(BackendError) as raised:
        kernel(*arrays)
    assert "needs 48 bytes of uniform buffer" in raised.value.message
    assert "allows 16 (max-uniform-buffer-binding-size" in raised.value.message


@pytest.mark.parametrize(
    ("abi", "size"),
    [
        ([], 12),  # the grid alone
        ([{"kind": "array", "ndim": 2}], 8 + 8 + 12),
        ([{"kind": "array", "ndim": 1}, {"kind": "scalar", "dtype": "f64"}], 8 + 4 + 4 + 8 + 12),
        ([{"kind": "scalar", "dtype": "i32"}, {"kind": "array", "ndim": 3}], 4 + 4 + 8 + 12 + 12),
        ([{"kind": "scalar", "dtype": "f16"}, {"kind": "scalar", "dtype": "bool"}], 4 + 4 + 12),
    ],
)
def test_cuda_parameter_bytes_follow_c_layout(abi, size):
    assert cuda.parameter_bytes(abi) == size


@pytest.mark.parametrize(
    ("arch", "nvrtc", "space"),
    [
        ("sm_90", (13, 0), 32764),
        ("sm_70", (12, 1), 32764),
        ("sm_90", (12, 0), 4096),
        ("sm_61", (12, 4), 4096),
        ("compute_80", None, 32764),
    ],
)
def test_cuda_parameter_space_by_arch_and_toolkit(arch, nvrtc, space):
    assert cuda.parameter_space(arch, nvrtc) == space


def _nvrtc():
    from tests.backends.nvrtc_batch import toolchain_reason

    if toolchain_reason() is not None:
        pytest.skip(f"NVRTC toolchain missing: {toolchain_reason()}")


@pytest.mark.slow
def test_cuda_compiles_parameters_up_to_the_space_and_refuses_one_array_more(tmp_path):
    """2047 two-dimensional arrays (16 bytes each) and the grid are exactly 32,764 bytes:
    NVRTC compiles them; 2048 are refused by qnb at compile, naming the limit (NVRTC
    itself rejects them, with a message about something else)."""
    _nvrtc()
    fits = _kernel_of(tmp_path, 2047, ndim=2)
    ir = fits._lower_for(tuple([np.zeros((1, 1), np.float32)] * 2047))[0]
    artifact = cuda.CudaBackend().compile_for_arch(ir, Options(), "sm_90")
    assert ".entry" in artifact.text["ptx"]
    past = _kernel_of(tmp_path, 2048, ndim=2)
    ir = past._lower_for(tuple([np.zeros((1, 1), np.float32)] * 2048))[0]
    with pytest.raises(BackendError) as raised:
        cuda.CudaBackend().compile_for_arch(ir, Options(), "sm_90")
    assert "32780 bytes of parameters (2048 arrays" in raised.value.message
    assert "parameter space of 32764 bytes for sm_90" in raised.value.message


def test_cuda_host_refuses_what_cuda_would(tmp_path):
    require_backend("cuda-host")
    past = _kernel_of(tmp_path, 2048, ndim=2)
    arrays = [np.zeros((1, 1), np.float32) for _ in range(2048)]
    with qnb.backend("cuda-host"), pytest.raises(BackendError, match="parameter space of 32764"):
        past(*arrays)

"""The cuda backend on a real GPU: every hand-built IR case against the cpu oracle, the
launcher's array kinds (NumPy copied in/out, CuPy arrays and DeviceArrays without copies,
Python scalars), and a warm start from the artifact alone.

Skips with the backend's stated reason where there is no CUDA GPU (the no-GPU checks,
real NVRTC compiles included, are in ``test_cuda_compile.py``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

from qnb.backends.base import Artifact, Options


def _load_cases():
    path = pathlib.Path(__file__).with_name("cuda_ir_cases.py")
    spec = importlib.util.spec_from_file_location("qnb_cuda_ir_cases", path)
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CASES = _load_cases()
CASE_NAMES = [c.name for c in CASES.all_cases()]


@pytest.fixture(scope="module")
def cuda():
    from qnb.backends import get

    backend = get("cuda")
    info = backend.info()
    if not info.available:
        pytest.skip(f"backend 'cuda' unavailable: {info.reason}")
    return backend


@pytest.fixture(scope="module")
def cpu():
    from qnb.backends import get

    backend = get("cpu")
    if not backend.info().available:
        pytest.skip(f"cpu backend unavailable: {backend.info().reason}")
    return backend


def _run(backend, case, inputs):
    return CASES.launch(backend.load(backend.compile(case.kernel, Options())), case, inputs)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASE_NAMES)
def test_case_matches_cpu(cuda, cpu, name):
    case = next(c for c in CASES.all_cases() if c.name == name)
    want = _run(cpu, case, CASES.copy_inputs(case.inputs))
    got = _run(cuda, case, CASES.copy_inputs(case.inputs))
    for param in case.kernel.arrays:
        CASES.assert_close(got[param.name], want[param.name], case.rtol, f"{name}: {param.name}")


@pytest.mark.gpu
def test_cupy_arrays_and_device_arrays_run_without_copies(cuda):
    import cupy

    case = next(c for c in CASES.all_cases() if c.name == "binary_add_f32")
    launcher = cuda.load(cuda.compile(case.kernel, Options()))
    a = cupy.asarray(case.inputs["a"])
    b = cuda.to_device(case.inputs["b"])
    out = cupy.zeros((16, 16), cupy.float32)
    pointer = out.data.ptr
    launcher((1, 1, 1), [a, b, out, 1.5])
    assert out.data.ptr == pointer  # written in place
    np.testing.assert_allclose(out.get(), case.inputs["a"] + case.inputs["b"], rtol=1e-6)
    assert isinstance(b.numpy(), np.ndarray)


@pytest.mark.gpu
def test_numpy_outputs_are_written_back(cuda):
    case = next(c for c in CASES.all_cases() if c.name == "transpose_f64")
    inputs = CASES.copy_inputs(case.inputs)
    _run(cuda, case, inputs)
    np.testing.assert_array_equal(inputs["out"], case.inputs["a"].T)


@pytest.mark.gpu
def test_f16_matmul_on_tensor_cores_is_exact_enough(cuda):
    case = next(c for c in CASES.all_cases() if c.name == "matmul_f16")
    inputs = CASES.copy_inputs(case.inputs)
    _run(cuda, case, inputs)
    want = case.inputs["a"].astype(np.float32) @ case.inputs["b"].astype(np.float32)
    np.testing.assert_allclose(inputs["out"], want, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_warm_start_from_artifact_alone(cuda):
    import json

    case = next(c for c in CASES.all_cases() if c.name == "binary_mul_f32")
    artifact = cuda.compile(case.kernel, Options())
    stored = Artifact(json.loads(json.dumps(artifact.text)), bytes(artifact.binary))
    inputs = CASES.copy_inputs(case.inputs)
    cuda.load(stored)((1, 1, 1), [inputs[p.name] for p in case.kernel.params])
    np.testing.assert_allclose(inputs["out"], case.inputs["a"] * case.inputs["b"], rtol=1e-6)


@pytest.mark.gpu
def test_many_programs_and_an_empty_grid(cuda):
    case = next(c for c in CASES.all_cases() if c.name == "memory_control_i32")
    inputs = CASES.copy_inputs(case.inputs)
    launcher = cuda.load(cuda.compile(case.kernel, Options()))
    launcher((0, 1, 1), [inputs[p.name] for p in case.kernel.params])  # no programs: no-op
    np.testing.assert_array_equal(inputs["out"], case.inputs["out"])


@pytest.mark.gpu
def test_arrays_of_more_than_2_31_elements(cuda):
    # Flat offsets are 64-bit in the CUDA code (each index and dimension is still i32):
    # the last rows of a 4 GiB f16 array are read and written where they are.
    import cupy

    import qnb
    from tests.helpers import define

    scope, _ = define("""
        @qnb.kernel
        def tail(x: qnb.Array[qnb.f16, 2], out: qnb.Array[qnb.f16, 2]):
            last = x.shape[0] - 16
            t = Tile16.load(x, last, 0)
            t.store(out, 0, 0)
            (t * 2.0).store(x, last, 0)
            out[0, 0] = x[x.shape[0] - 1, 15]
        """)
    rows = 2**27 + 16  # × 16 columns: 2**31 + 256 elements
    x = cupy.zeros((rows, 16), cupy.float16)
    block = (cupy.arange(256, dtype=cupy.float32) / 8).astype(cupy.float16).reshape(16, 16)
    x[-16:] = block
    out = cupy.full((16, 16), cupy.nan, cupy.float16)
    with qnb.backend("cuda"):
        scope["tail"](x, out)
    want = block.get().copy()
    want[0, 0] = 2 * want[15, 15]  # the element store reads the doubled tile back
    np.testing.assert_array_equal(out.get(), want)
    np.testing.assert_array_equal(x[-16:].get(), 2 * block.get())
    assert not bool(x[:-16].any())  # nothing else was written


@pytest.mark.gpu
def test_grids_past_65535_on_y_and_z(cuda):
    from tests.helpers import check_program_ids

    for holds_tile in (True, False):  # a block per program, and a thread per program
        check_program_ids("cuda", (2, 70000), holds_tile)
        check_program_ids("cuda", (3, 2, 70000), holds_tile)
        check_program_ids("cuda", (300, 7), holds_tile)


@pytest.mark.gpu
def test_a_bf16_cupy_array_stays_on_the_device(cuda):
    """CuPy 14's bfloat16 arrays launch as they are (their bits are the kernel's uint16),
    are written in place, and agree bit for bit with the cpu backend."""
    import cupy

    import qnb

    if not hasattr(cupy, "bfloat16") and "bfloat16" not in dir(cupy):
        pytest.skip(f"CuPy {cupy.__version__} has no bfloat16 (a uint16 view still works)")

    @qnb.kernel
    def scale(x: qnb.Array[qnb.bf16, 2], out: qnb.Array[qnb.bf16, 2]):
        (qnb.Tile16.load(x, 0, 0) * 3.0 + 1.0).store(out, 0, 0)

    host = np.random.default_rng(0).standard_normal((16, 16)).astype(qnb.bf16)
    want = np.zeros_like(host)
    with qnb.backend("cpu"):
        scale[1](host, want)
    x = cupy.asarray(host)
    out = cupy.zeros((16, 16), dtype=x.dtype)
    pointer = out.data.ptr
    with qnb.backend("cuda"):
        scale[1](x, out)
    assert out.data.ptr == pointer
    np.testing.assert_array_equal(out.get().view(np.uint16), want.view(np.uint16))

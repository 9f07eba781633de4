"""The cuda backend's no-GPU checks: render every kernel and REALLY compile it with NVRTC to
a cubin for sm_80 and sm_90 (a failure fails the test), map compiler errors back to the
kernel's line, and keep rendering free of any device.

Skips (with the reason) only when the NVRTC toolchain of the ``cuda`` extra is not
installed: ``cupy-cuda13x``, ``nvidia-cuda-nvrtc==13.0.*``, ``nvidia-cuda-runtime==13.0.*``
and ``nvidia-cuda-crt==13.0.*`` (headers).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

import pytest

from qnb import ir
from qnb.backends.base import Options
from qnb.errors import BackendError, CompileError
from tests.backends.nvrtc_batch import Unit, compile_units, toolchain_reason

ARCHS = ("sm_80", "sm_90")


def _load_cases():
    path = pathlib.Path(__file__).with_name("cuda_ir_cases.py")
    spec = importlib.util.spec_from_file_location("qnb_cuda_ir_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


CASES = _load_cases()


needs_nvrtc = pytest.mark.skipif(
    toolchain_reason() is not None, reason=f"NVRTC toolchain missing: {toolchain_reason()}"
)


@pytest.fixture(scope="module")
def backend():
    from qnb.backends.cuda import CudaBackend

    return CudaBackend()


# --------------------------------------------------------------------------- no toolchain at all


def test_render_needs_no_device_or_compiler(backend):
    case = CASES.all_cases()[0]
    text = backend.render(case.kernel, Options())
    assert 'extern "C" __global__' in text
    assert "__launch_bounds__(256)" in text  # a 16x16 tile: 256 threads, a slot each
    assert '#line 2 "qnb-kernel"' in text
    assert "__launch_bounds__(32)" in backend.render(case.kernel, Options(threads=32))


def test_info_reports_a_reason_without_a_gpu(backend):
    info = backend.info()
    assert info.name == "cuda"
    if not info.available:
        assert info.reason


def test_a_machine_without_the_nvidia_driver_says_so(backend):
    """Without a driver the CUDA runtime answers "CUDA driver version is insufficient",
    which would send a user to upgrade a driver that is not there. Runs for real where
    libcuda cannot be loaded (as on the machines the suite runs on without a GPU)."""
    from qnb.backends import cuda

    if cuda._driver_installed():
        pytest.skip("the NVIDIA driver (libcuda) is installed here")
    info = backend.info()
    assert not info.available
    if toolchain_reason() is None:  # the runtime was asked, and found no driver
        assert info.reason == "no NVIDIA driver/GPU found"
        assert "insufficient" not in info.reason
    with pytest.raises(BackendError, match="backend 'cuda' is not available: ") as raised:
        backend.device_arch()  # what a launch on cuda meets
    assert raised.value.message.endswith(info.reason)


def test_key_components_name_arch_and_compiler(backend):
    backend_part, compiler_part = backend.key_components()
    assert backend_part["name"] == "cuda" and "arch" in backend_part
    assert {"nvrtc", "cupy"} <= set(compiler_part)


# --------------------------------------------------------------------------- real NVRTC compiles


@pytest.mark.slow
@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_op_at_every_dtype_compiles(backend, arch):
    """All hand-built IR cases (every op × dtype) through render + NVRTC → cubin: as a few
    NVRTC programs, each kernel in a namespace of its own (``nvrtc_batch``); a failing
    kernel is named with its own log."""
    units = [Unit(case.name, backend.render(case.kernel, Options())) for case in CASES.all_cases()]
    compiled, failures = compile_units(units, arch)
    assert not failures, "\n\n".join(failures[:5])
    assert [c.label for c in compiled] == [case.name for case in CASES.all_cases()]


def test_a_batched_compile_names_the_failing_kernel_and_shares_nothing(backend):
    """The batch compiles alone to name what failed, and a kernel sees only its own
    definitions and includes: another kernel's prelude or ``#include`` does not rescue a
    kernel rendered without one."""
    if toolchain_reason() is not None:
        pytest.skip(f"NVRTC toolchain missing: {toolchain_reason()}")
    f32, f16 = (
        backend.render(next(c for c in CASES.all_cases() if c.name == name).kernel, Options())
        for name in ("binary_add_f32", "binary_add_f16")
    )
    no_prelude = f32.replace("namespace qnb {", "namespace qnb_gone {")
    no_include = f16.replace("#include <cuda_fp16.h>\n", "")
    assert no_prelude != f32 and no_include != f16 and "__half" in no_include
    units = [Unit("f32", f32), Unit("no_prelude", no_prelude), Unit("f16", f16)]
    units.append(Unit("no_include", no_include))
    compiled, failures = compile_units(units, "sm_80", reuse=False)
    assert [f.split(":")[0] for f in failures] == ["no_prelude", "no_include"], failures
    assert all("NVRTC rejected" in f for f in failures)
    compiled, failures = compile_units([Unit("f32", f32), Unit("f16", f16)], "sm_80", reuse=False)
    assert not failures and [c.label for c in compiled] == ["f32", "f16"]
    assert all(f".entry {c.entry}(" in c.ptx for c in compiled)


def test_a_kernel_compiled_before_is_read_back_not_compiled(backend, monkeypatch, tmp_path):
    """``compile_units`` keeps what compiled per (text, arch, command line) and reads it
    back instead of compiling again; another arch or option compiles anew, and
    ``reuse=False`` always compiles."""
    from tests.backends import nvrtc_batch

    if toolchain_reason() is not None:
        pytest.skip(f"NVRTC toolchain missing: {toolchain_reason()}")
    monkeypatch.setattr(nvrtc_batch, "STORE", tmp_path)
    case = next(c for c in CASES.all_cases() if c.name == "binary_add_f16")
    unit = Unit("f16", backend.render(case.kernel, Options()))
    first, failures = compile_units([unit], "sm_80")
    assert not failures and f".entry {first[0].entry}(" in first[0].ptx
    calls = []
    original = nvrtc_batch.nvrtc_compile
    monkeypatch.setattr(
        nvrtc_batch, "nvrtc_compile", lambda *a, **k: calls.append(a[1]) or original(*a, **k)
    )
    again, failures = compile_units([Unit("again", unit.source)], "sm_80")
    assert calls == [] and not failures
    assert (again[0].label, again[0].entry, again[0].ptx) == ("again", first[0].entry, first[0].ptx)
    compile_units([unit], "sm_90")
    compile_units([unit], "sm_80", Options(fast_math=True))
    compile_units([unit], "sm_80", reuse=False)
    assert calls == ["sm_90", "sm_80", "sm_80"]


@needs_nvrtc
def test_f16_matmul_uses_tensor_cores(backend):
    case = next(c for c in CASES.all_cases() if c.name == "mma_f16")
    artifact = backend.compile_for_arch(case.kernel, Options(), arch="sm_90")
    assert "wmma::mma_sync" in artifact.text["source"]
    assert re.search(r"wmma\.mma\.sync|mma\.sync", artifact.text["ptx"])


@needs_nvrtc
def test_artifact_is_json_safe_and_complete(backend):
    import json

    case = next(c for c in CASES.all_cases() if c.name == "memory_control_f32")
    artifact = backend.compile_for_arch(case.kernel, Options(fast_math=True), arch="sm_90")
    json.dumps(artifact.text)
    assert artifact.text["entry"] == "qnb_memory_control"
    assert [e["name"] for e in artifact.text["abi"]] == ["a", "out", "v", "w", "n"]
    out = next(e for e in artifact.text["abi"] if e["name"] == "out")
    assert out["stored"] and out["ndim"] == 3
    assert artifact.text["line_map"], "located lines are mapped back to the IR"
    # the parameter list is the ABI: array pointer + one int per dim; scalars by value
    assert "const float* a_a, int n_a_0, int n_a_1, int n_a_2" in artifact.text["source"]


@needs_nvrtc
def test_compile_error_maps_to_the_kernel_line(backend, monkeypatch):
    """A compiler error names the IR line (``ir_loc``) and carries NVRTC's log."""
    from qnb.backends import cuda_render

    case = next(c for c in CASES.all_cases() if c.name == "binary_add_f32")
    kernel = case.kernel
    kernel.body[2].loc = ir.Loc(0, 7, 4)
    kernel.body[2].value.loc = ir.Loc(0, 7, 4)
    original = cuda_render.CudaRenderer.expr_Binary

    def broken(self, node):
        text = original(self, node)
        return text + " + undefined_name" if node.loc and node.loc.line == 7 else text

    monkeypatch.setattr(cuda_render.CudaRenderer, "expr_Binary", broken)
    with pytest.raises(CompileError) as info:
        backend.compile_for_arch(kernel, Options(), arch="sm_90")
    error = info.value
    assert "undefined_name" in error.log
    assert error.ir_loc.line == 7 and error.ir_loc.unit == 0
    assert "undefined_name" in (error.generated_line or "")


@needs_nvrtc
def test_f64_is_supported_and_compiles(backend):
    case = next(c for c in CASES.all_cases() if c.name == "cholesky_solve_f64")
    artifact = backend.compile_for_arch(case.kernel, Options(), arch="sm_80")
    assert "double" in artifact.text["source"] and artifact.binary


def _load_suite():
    try:
        from tests import suite
    except ImportError:  # pytest run without the repository root on sys.path
        path = pathlib.Path(__file__).parents[1] / "suite.py"
        spec = importlib.util.spec_from_file_location("tests.suite", path)
        suite = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = suite
        spec.loader.exec_module(suite)
    return suite


@pytest.mark.slow
@needs_nvrtc
def test_suite_kernels_compile():
    """Every kernel of the shared suite (``tests/suite.py``) at each of its dtypes, through
    ``kernel.source("cuda", *args)`` and NVRTC (batched, ``nvrtc_batch``), for sm_80 and
    sm_90."""
    import numpy as np

    suite = _load_suite()
    assert suite.CASES, "tests/suite.py defines no kernels"
    failures, units = [], []
    for case in suite.CASES:
        for dtype in case.dtypes:
            _grid, args = case.make(np.random.default_rng(0), dtype)
            label = f"{case.name}[{np.dtype(dtype).name}]"
            try:
                units.append(Unit(label, case.kernel.source("cuda", *args)))
            except Exception as exc:  # a render failure is a failure too
                failures.append(f"{label}: render: {type(exc).__name__}: {exc}")
    for arch in ARCHS:
        compiled, failed = compile_units(units, arch)
        failures += [f"[{arch}] {failure}" for failure in failed]
        assert [c.label for c in compiled] == [u.label for u in units] or failed
    assert not failures, f"{len(failures)} failed:\n" + "\n\n".join(failures[:5])
    assert units


# --------------------------------------------------------------------------- prelude semantics


_HOST_SHIM = r"""
#define __device__
#define __forceinline__ inline
#include <math.h>
#include <cmath>
using std::copysign; using std::floor; using std::fmod;
"""

_HOST_DRIVER = r"""
template <class T> void run(const T* a, const T* b, T* out, int n) {
  for (int k = 0; k < n; ++k) {
    out[5 * k + 0] = qnb::floordiv_(a[k], b[k]);
    out[5 * k + 1] = qnb::mod_(a[k], b[k]);
    out[5 * k + 2] = qnb::max_(a[k], b[k]);
    out[5 * k + 3] = qnb::min_(a[k], b[k]);
    out[5 * k + 4] = qnb::pow_(a[k], b[k]);
  }
}
extern "C" void run_f32(const float* a, const float* b, float* o, int n) { run(a, b, o, n); }
extern "C" void run_f64(const double* a, const double* b, double* o, int n) { run(a, b, o, n); }
extern "C" void run_i32(const int* a, const int* b, int* o, int n) { run(a, b, o, n); }
"""


def test_prelude_python_semantics_on_host(tmp_path):
    """The prelude's floor division, modulo, maximum/minimum and power, compiled for the
    host with g++, agree with NumPy (the cpu backend's definition) on edge values."""
    import ctypes
    import shutil
    import subprocess

    import numpy as np

    from qnb.backends.cuda_prelude import prelude_text

    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++/clang++) to check the prelude with")
    source = tmp_path / "prelude.cpp"
    source.write_text(_HOST_SHIM + "\n" + prelude_text("common") + "\n" + _HOST_DRIVER)
    library = tmp_path / "prelude.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-std=c++17", "-o", str(library), str(source)],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    for fn in (lib.run_f32, lib.run_f64, lib.run_i32):
        fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int]
    values = [-7.5, -3.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 7.25, 1e-3, 0.1]
    a, b = (np.array(v) for v in zip(*[(x, y) for x in values for y in values]))
    with np.errstate(all="ignore"):
        for dtype, fn in (
            (np.float32, lib.run_f32),
            (np.float64, lib.run_f64),
            (np.int32, lib.run_i32),
        ):
            x, y = a.astype(dtype), b.astype(dtype)
            if dtype is np.int32:
                x, y = (a * 2).astype(dtype), (b * 2).astype(dtype)
            out = np.zeros(5 * len(x), dtype)
            fn(x.ctypes.data, y.ctypes.data, out.ctypes.data, len(x))
            got = out.reshape(-1, 5)
            ok = y != 0
            want = [np.floor_divide(x, y), np.mod(x, y), np.maximum(x, y), np.minimum(x, y)]
            for k, name in enumerate(("floordiv", "mod", "max", "min")):
                mask = ok if dtype is np.int32 and k < 2 else np.ones_like(ok)
                np.testing.assert_array_equal(
                    got[mask, k], want[k][mask], err_msg=f"{name} {np.dtype(dtype).name}"
                )
            if dtype is not np.int32:
                np.testing.assert_allclose(
                    got[:, 4], np.power(x, y), rtol=1e-6, equal_nan=True, err_msg="pow"
                )
            else:
                nonneg = y >= 0
                np.testing.assert_array_equal(got[nonneg, 4], np.power(x[nonneg], y[nonneg]))

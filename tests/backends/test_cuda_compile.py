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

ARCHS = ("sm_80", "sm_90")


def _load_cases():
    path = pathlib.Path(__file__).with_name("cuda_ir_cases.py")
    spec = importlib.util.spec_from_file_location("qnb_cuda_ir_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


CASES = _load_cases()


def _toolchain_reason() -> str | None:
    try:
        from qnb.backends import cuda

        cuda.nvrtc_version()
        cuda.include_dirs()
    except BackendError as exc:
        return exc.message
    return None


needs_nvrtc = pytest.mark.skipif(_toolchain_reason() is not None,
                                 reason=f"NVRTC toolchain missing: {_toolchain_reason()}")


@pytest.fixture(scope="module")
def backend():
    from qnb.backends.cuda import CudaBackend

    return CudaBackend()


# --------------------------------------------------------------------------- no toolchain at all


def test_render_needs_no_device_or_compiler(backend):
    case = CASES.all_cases()[0]
    text = backend.render(case.kernel, Options())
    assert 'extern "C" __global__' in text
    assert "__launch_bounds__(256)" in text
    assert '#line 2 "qnb-kernel"' in text


def test_info_reports_a_reason_without_a_gpu(backend):
    info = backend.info()
    assert info.name == "cuda"
    if not info.available:
        assert info.reason


def test_key_components_name_arch_and_compiler(backend):
    backend_part, compiler_part = backend.key_components()
    assert backend_part["name"] == "cuda" and "arch" in backend_part
    assert {"nvrtc", "cupy"} <= set(compiler_part)


# --------------------------------------------------------------------------- real NVRTC compiles


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_op_at_every_dtype_compiles(backend, arch):
    """All hand-built IR cases (every op × dtype) through render + NVRTC → cubin."""
    failures, compiled = [], 0
    for case in CASES.all_cases():
        try:
            artifact = backend.compile_for_arch(case.kernel, Options(), arch=arch)
        except CompileError as exc:
            failures.append(f"{case.name}: {exc}\n{exc.log}")
            continue
        assert artifact.binary and artifact.binary[:4] == b"\x7fELF", case.name
        assert f".target {arch}" in artifact.text["ptx"]
        compiled += 1
    assert not failures, "\n\n".join(failures[:5])
    assert compiled == len(CASES.all_cases())


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


@needs_nvrtc
def test_suite_kernels_compile():
    """Every kernel of the shared suite (``tests/suite.py``) at each of its dtypes, through
    ``kernel.source("cuda", *args)`` and NVRTC, for sm_80 and sm_90."""
    import numpy as np

    from qnb.backends.cuda import nvrtc_compile

    suite = _load_suite()
    assert suite.CASES, "tests/suite.py defines no kernels"
    failures, compiled = [], 0
    for case in suite.CASES:
        for dtype in case.dtypes:
            _grid, args = case.make(np.random.default_rng(0), dtype)
            label = f"{case.name}[{np.dtype(dtype).name}]"
            try:
                source = case.kernel.source("cuda", *args)
            except Exception as exc:  # a render failure is a failure too
                failures.append(f"{label}: render: {type(exc).__name__}: {exc}")
                continue
            for arch in ARCHS:
                try:
                    cubin, _ptx, _log = nvrtc_compile(source, arch)
                except CompileError as exc:
                    failures.append(f"{label} [{arch}]: {exc}\n{exc.log}")
                    continue
                assert cubin[:4] == b"\x7fELF"
                compiled += 1
    assert not failures, f"{len(failures)} failed:\n" + "\n\n".join(failures[:5])
    assert compiled > 0

"""What a GPU's own failures become on the cuda backend: out of GPU memory and the errors
the driver or runtime reports (a kernel's illegal address arrives at the next copy or
synchronisation) are qnb ``BackendError``s naming the kernel and what was being done,
never raw CuPy exceptions. The exceptions are CuPy's own (its error classes construct
without a GPU); the launcher that raises them runs only where a GPU is (gpu_check.sh)."""

from __future__ import annotations

import pytest

import qnb
from qnb.backends.cuda import gpu_error

memory = pytest.importorskip("cupy.cuda.memory", reason="CuPy is not installed")
runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")


def test_out_of_gpu_memory_names_the_kernel_and_the_step():
    err = gpu_error(
        memory.OutOfMemoryError(3 * 2**30, 2**30), "softmax", "copying the arguments of"
    )
    assert isinstance(err, qnb.BackendError)
    text = str(err)
    assert "out of GPU memory copying the arguments of kernel 'softmax'" in text
    assert "3,221,225,472 bytes" in text and "free_all_blocks" in text


def test_an_illegal_address_says_the_context_is_lost():
    exc = runtime.CUDARuntimeError(700)  # cudaErrorIllegalAddress
    err = gpu_error(exc, "gather", "copying back the results of")
    assert isinstance(err, qnb.BackendError)
    text = str(err)
    assert "the GPU reported an error copying back the results of kernel 'gather'" in text
    assert "illegal memory access" in text and "restart the Python process" in text


def test_another_runtime_error_is_reported_without_the_restart_advice():
    err = gpu_error(runtime.CUDARuntimeError(2), None, "waiting for")  # memory allocation
    assert isinstance(err, qnb.BackendError)
    assert "waiting for the kernels" in str(err) and "restart" not in str(err)


def test_an_error_that_is_not_the_gpu_s_passes_through():
    exc = RuntimeError("something else")
    assert gpu_error(exc, "k", "launching") is exc

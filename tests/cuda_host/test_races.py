"""No data races in the generated GPU code: every suite kernel's CUDA C++ under
ThreadSanitizer on the host model (``racecheck.py``), where only barriers order one
thread's accesses before another's.

The CUDA and WGSL renderers share the walker that places the barriers, so this checks
the barrier discipline of both. A renderer with one barrier removed must be caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from qnb.backends import gpu_codegen
from tests import suite
from tests.conftest import require_backend
from tests.cuda_host.racecheck import race_report

# One dtype per kernel (f32 where it has it), f16 for the tensor-core products, and bf16.
RUNS = [
    (case, np.float32 if np.float32 in case.dtypes else case.dtypes[0]) for case in suite.CASES
] + [(case, np.float16) for case in suite.CASES if "matmul" in case.name]
RUNS += [(case, suite.BF16) for case in suite.CASES if suite.BF16 in case.dtypes]


@pytest.fixture(scope="module")
def reports():
    """Each run's race report, made by the test that asks for it (one ThreadSanitizer
    build per test keeps each within its timeout; pytest-xdist spreads the files)."""
    require_backend("cuda-host")
    runs = {(c.name, np.dtype(d).name): (c, d) for c, d in RUNS}

    class Reports(dict):
        def __missing__(self, key):
            self[key] = race_report(*suite.lowered(*runs[key], seed=5))
            return self[key]

    return Reports()


@pytest.mark.parametrize(
    ("name", "dtype"), [(c.name, np.dtype(d).name) for c, d in RUNS], ids=lambda v: str(v)
)
def test_generated_code_has_no_data_race(reports, name, dtype):
    assert reports[(name, dtype)] == ""


def test_a_missing_barrier_is_reported_at_the_kernel_line(monkeypatch):
    require_backend("cuda-host")

    original = gpu_codegen.GpuRenderer.to_shared

    def to_shared_without_its_barrier(self, *args, **kwargs):
        barrier, self.barrier = self.barrier, "// (barrier removed)"
        try:
            return original(self, *args, **kwargs)
        finally:
            self.barrier = barrier

    monkeypatch.setattr(gpu_codegen.GpuRenderer, "to_shared", to_shared_without_its_barrier)
    case = next(c for c in suite.CASES if c.name == "transpose_and_reduce")
    report = race_report(*suite.lowered(case, np.float32, seed=5))
    assert "WARNING: ThreadSanitizer: data race" in report
    assert "qnb-kernel:" in report  # the #line directives name the user's line


@pytest.mark.parametrize("name", ["shift_tile", "tile_then_elements", "sliding_window"])
def test_stores_that_overlap_earlier_accesses_are_ordered(name):
    # A store over memory another thread of the program loaded or stored earlier needs a
    # barrier before it (tests/backends/test_memory_order.py checks the values).
    require_backend("cuda-host")
    from tests.backends.test_memory_order import KERNELS

    x = np.arange(24 * 17, dtype=np.float32).reshape(24, 17)
    args = (x, 3) if name == "sliding_window" else (x,)
    kernel_ir = KERNELS[name]._lower_for(args)[0]
    assert race_report(kernel_ir, (1,), list(args)) == ""

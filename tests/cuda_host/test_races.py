"""No data races in the generated GPU code: every suite kernel's CUDA C++ under
ThreadSanitizer on the host model (``racecheck.py``), where only barriers order one
thread's accesses before another's.

The CUDA and WGSL renderers share the walker that places the barriers, so this checks
the barrier discipline of both. A renderer with one barrier removed must be caught.
"""

from __future__ import annotations

import numpy as np
import pytest

from qnb.backends import gpu
from tests import suite
from tests.conftest import require_backend
from tests.cuda_host import racecheck
from tests.cuda_host.racecheck import prebuild, race_report

# One dtype per kernel (f32 where it has it), f16 for the tensor-core products, and bf16.
RUNS = [
    (case, np.float32 if np.float32 in case.dtypes else case.dtypes[0]) for case in suite.CASES
] + [(case, np.float16) for case in suite.CASES if "matmul" in case.name]
RUNS += [(case, suite.BF16) for case in suite.CASES if suite.BF16 in case.dtypes]


@pytest.fixture(scope="module")
def reports():
    """Each run's race report, made by the test that asks for it: the first to ask of each
    ``BATCH`` runs builds their one ThreadSanitizer program (``racecheck.prebuild``), and
    each test runs its own kernel of it in a process of its own, so its report is its
    kernel's alone."""
    require_backend("cuda-host")
    from tests.cuda_host.backend import BATCH

    keys = [(c.name, np.dtype(d).name) for c, d in RUNS]
    runs = dict(zip(keys, RUNS))
    launches = {}

    class Reports(dict):
        def __missing__(self, key):
            if key not in launches:
                start = keys.index(key) // BATCH * BATCH
                batch = keys[start : start + BATCH]
                launches.update({k: suite.lowered(*runs[k], seed=5) for k in batch})
                prebuild([launches[k][0] for k in batch])
            self[key] = race_report(*launches[key])
            return self[key]

    return Reports()


@pytest.mark.parametrize(
    ("name", "dtype"), [(c.name, np.dtype(d).name) for c, d in RUNS], ids=lambda v: str(v)
)
def test_generated_code_has_no_data_race(reports, name, dtype):
    assert reports[(name, dtype)] == ""


def test_a_missing_barrier_is_reported_at_the_kernel_line(monkeypatch):
    require_backend("cuda-host")

    original = gpu.GpuRenderer.to_shared

    def to_shared_without_its_barrier(self, *args, **kwargs):
        barrier, self.barrier = self.barrier, "// (barrier removed)"
        try:
            return original(self, *args, **kwargs)
        finally:
            self.barrier = barrier

    monkeypatch.setattr(gpu.GpuRenderer, "to_shared", to_shared_without_its_barrier)
    # built in one program with a kernel that has no exchange to lose a barrier from: the
    # race is in the report of the kernel that has it, and only there
    racy, clean = (
        suite.lowered(next(c for c in suite.CASES if c.name == name), np.float32, seed=5)
        for name in ("transpose_and_reduce", "copy_tiles")
    )
    monkeypatch.setattr(racecheck, "_BUILT", {})
    prebuild([racy[0], clean[0]])
    assert len({program for program, _index in racecheck._BUILT.values()}) == 1
    report = race_report(*racy)
    assert "WARNING: ThreadSanitizer: data race" in report
    assert "qnb-kernel:" in report  # the #line directives name the user's line
    assert race_report(*clean) == ""


OVERLAPPING = ["shift_tile", "tile_then_elements", "sliding_window"]


@pytest.mark.parametrize("name", OVERLAPPING)
def test_stores_that_overlap_earlier_accesses_are_ordered(name):
    # A store over memory another thread of the program loaded or stored earlier needs a
    # barrier before it (tests/backends/test_memory_order.py checks the values).
    require_backend("cuda-host")
    from tests.backends.test_memory_order import KERNELS

    x = np.arange(24 * 17, dtype=np.float32).reshape(24, 17)
    lowered = {}
    for each in OVERLAPPING:
        each_args = (x, 3) if each == "sliding_window" else (x,)
        lowered[each] = (KERNELS[each]._lower_for(each_args)[0], each_args)
    prebuild([kernel_ir for kernel_ir, _args in lowered.values()])  # one program for the three
    kernel_ir, args = lowered[name]
    assert race_report(kernel_ir, (1,), list(args)) == ""

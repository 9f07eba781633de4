"""No hazard where there is none: every kernel of the test corpora (``tests/suite.py``,
``tests/shape_cases.py``, the hand-built IR of ``tests/backends/gpu_shape_cases.py`` and
``cuda_ir_cases.py``), of the benchmarks and of the notebooks, launched as they are
launched, is checked and found race free, except the few that really race, which are
named here with the reason (and must be found).

Each corpus kernel is also run through both forms of the check's first pass, the whole
kernel and its access skeleton (``qnb/backends/cpu_skeleton.py``), which must touch the
same memory: the same intervals of units, by the same programs, read or stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qnb
from qnb import hazards
from tests import shape_cases, suite
from tests.backends import cuda_ir_cases, gpu_shape_cases
from tests.hazards.launches import checking_launches

ROOT = Path(__file__).resolve().parents[2]

# Kernels in the corpora that really race (and so must be found), with why.
RACING = {
    "scale_shift": "benchmarks/bench_cpu_launch.py: 'overlapping windows, one per row "
    "offset (the issue's kernel)': program p stores rows p .. p+15 of y, so programs "
    "p and p+1 both store 15 rows (each the same value: a launch-path benchmark)",
    "racing_histogram": "notebooks/07_races_and_atomics.ipynb: the race it teaches",
    "memory_control": "tests/backends/cuda_ir_cases.py (hand-built IR, its line 13): every "
    "program stores its acc to out[num_programs][0, 0], so the element's final value is "
    "whichever program stores last (cuda and cpu may differ there)",
}


def assert_no_hazard(found) -> None:
    detail = [found.summary()] + [h.describe() for h in found.hazards[:5]]
    assert found.ok, "\n".join(detail)


def intervals(overlaps) -> dict:
    """Pass 1's intervals per memory, each once, sorted: what it saw touched."""
    out = {}
    for index, parts in overlaps.intervals.items():
        table = np.stack([np.concatenate(column).astype(np.int64) for column in zip(*parts)], 1)
        out[index] = np.unique(table, axis=0)
    return out


def assert_skeleton_touches_the_same(launch_, host) -> None:
    stored = launch_.stored_arguments(host)
    whole = hazards._first_pass(launch_, host, stored, skeleton=False)
    bones = hazards._first_pass(launch_, host, stored, skeleton=True)
    seen, seen_by_skeleton = intervals(whole), intervals(bones)
    assert seen.keys() == seen_by_skeleton.keys()
    for index in seen:
        np.testing.assert_array_equal(seen_by_skeleton[index], seen[index])


def check_kernel(launch, args) -> None:
    assert_no_hazard(qnb.check(launch, *args))
    assert_skeleton_touches_the_same(hazards._specialise(launch, args), hazards._host_arrays(args))


# ----------------------------------------------------------------------------- test corpora


@pytest.mark.parametrize("case", suite.CASES, ids=lambda c: c.name)
def test_suite_kernels_have_no_hazard(case):
    for dtype in case.dtypes[:2]:
        grid, args = case.make(np.random.default_rng(0), dtype)
        check_kernel(case.kernel[grid], args)


SHAPE_PARAMS = [(c, s) for c in shape_cases.SHAPE_CASES for s in c.shapes]


@pytest.mark.parametrize(
    ("case", "shape"),
    SHAPE_PARAMS,
    ids=[f"{c.name}-{shape_cases.param_id(s)}" for c, s in SHAPE_PARAMS],
)
def test_shape_case_kernels_have_no_hazard(case, shape):
    grid, args = case.make(np.random.default_rng(0), case.dtypes[0], shape)
    check_kernel(case.kernel[grid], args)


def _ir_cases():
    cases = [(c.name, c.kernel, c.inputs, (1, 1, 1)) for c in gpu_shape_cases.all_cases()]
    cases += [(c.name, c.kernel, c.inputs, c.grid) for c in cuda_ir_cases.all_cases()]
    return cases


@pytest.mark.parametrize(
    ("name", "kernel_ir", "inputs", "grid"),
    _ir_cases(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hand_built_ir_has_no_hazard(name, kernel_ir, inputs, grid):
    launch_ = hazards._ir_launch(kernel_ir, grid)
    host = [inputs[p.name] for p in kernel_ir.params]
    found = hazards._check(launch_, host)
    if kernel_ir.name in RACING:
        (first,) = found.hazards[:1]
        assert (first.kind, first.array, first.index) == ("write-write", "out", (3, 0, 0))
        assert first.lines == (13, 13) and first.programs == ((0, 0, 0), (1, 0, 0))
    else:
        assert_no_hazard(found)
    assert_skeleton_touches_the_same(launch_, host)


# ----------------------------------------------------------------------------- benchmarks


def _benchmark_launches():
    """(name, launch, args) of every benchmark kernel, at small sizes where the benchmark
    builds its own arguments inside its timing code."""
    from benchmarks import (
        bench_check,
        bench_compare,
        bench_cpu_launch,
        bench_cuda,
        bench_layouts,
        bench_peers,
        bench_trace,
    )

    rng = np.random.default_rng(0)

    def r(*shape, dtype=np.float32):
        return rng.uniform(-1, 1, shape).astype(dtype)

    def spd(count, dtype=np.float64):
        m = rng.uniform(-1, 1, (count, 16, 16))
        return (m @ m.transpose(0, 2, 1) + 16 * np.eye(16)).astype(dtype)

    out = []
    for name, kernel, grid, args in [*bench_check.cases(), *bench_trace.cases()]:
        out.append((f"{kernel.name}: {name}", kernel[grid], args))
    out.append(("bench_compare.cancel", bench_compare.cancel[3], [r(48, 16), r(48, 16)]))
    out += [
        ("bench_cpu_launch.scale_rows", bench_cpu_launch.scale_rows[4], [r(64, 16), r(64, 16)]),
        (
            "bench_cpu_launch.offset_grid",
            bench_cpu_launch.offset_grid[2, 2],
            [r(48, 48), r(32, 32)],
        ),
        ("bench_cpu_launch.trivial", bench_cpu_launch.trivial, [r(16, 16)]),
    ]
    peers = bench_peers
    out += [
        ("bench_peers.trivial", peers.trivial, [r(16, 16)]),
        ("bench_peers.affine_tiles", peers.affine_tiles[2, 2], [r(32, 32), r(32, 32)]),
        ("bench_peers.affine_elements", peers.affine_elements[40], [r(37), r(37)]),
        ("bench_peers.tiled_matmul", peers.tiled_matmul[2, 2], [r(32, 48), r(48, 32), r(32, 32)]),
        ("bench_peers.row_softmax", peers.row_softmax[3], [r(48, 16), r(48, 16)]),
        (
            "bench_peers.cholesky_solve",
            peers.cholesky_solve[3],
            [spd(3), r(3, 16, 16, dtype=np.float64), r(3, 16, 16, dtype=np.float64)],
        ),
    ]
    matmul, softmax = bench_layouts.shaped_kernels()
    out += [
        ("bench_layouts.matmul", matmul[2, 2], [r(64, 32), r(32, 32), r(64, 32), 32, 16, 8]),
        ("bench_layouts.row_softmax", softmax[4], [r(32, 32), r(32, 32), 8, 32]),
    ]
    cuda = bench_cuda._namespace()
    half = np.float16
    out += [
        (
            "bench_cuda.tile_matmul",
            cuda["tile_matmul"][6, 6],
            [r(96, 96, dtype=half), r(96, 96, dtype=half), r(96, 96)],
        ),
        (
            "bench_cuda.block_matmul",
            cuda["block_matmul"][3, 3],
            [r(96, 96, dtype=half), r(96, 96, dtype=half), r(96, 96)],
        ),
        (
            "bench_cuda.batched_cholesky",
            cuda["batched_cholesky"][8],
            [spd(8, np.float32), r(8, 16, 16)],
        ),
        ("bench_cuda.add_one", cuda["add_one"], [r(16, 16)]),
    ]
    return out


def test_benchmark_kernels_have_no_hazard_but_the_racing_one():
    # bench_cpu.cases() builds its launches in lambdas: run each, every launch checked
    from benchmarks import bench_cpu

    with qnb.backend("cpu"), checking_launches() as found:
        for _name, run_qnb, _numpy, _check in bench_cpu.cases():
            run_qnb()
    assert {name for name, _, _ in found} == {"batched_cholesky", "tiled_matmul", "copy_tiles"}
    for _name, _grid, result in found:
        assert_no_hazard(result)
    for name, launch, args in _benchmark_launches():
        found = qnb.check(launch, *args)
        assert found.ok, f"{name}: {found.summary()}"
    from benchmarks import bench_cpu_launch

    x = np.random.default_rng(1).uniform(-1, 1, (64, 16)).astype(np.float32)
    racing = qnb.check(bench_cpu_launch.scale_shift[8], x, np.zeros_like(x))
    assert not racing.ok and racing.hazards[0].kind == "write-write"
    assert racing.hazards[0].programs == ((0, 0, 0), (1, 0, 0)) and racing.hazards[0].same_value


# ----------------------------------------------------------------------------- notebooks

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_launches_have_no_hazard_but_the_taught_race(name, tmp_path):
    """Each notebook's code cells run in an IPython shell (as scripts/run_notebooks.py
    runs them: the reference machine, a fresh cache), every launch checked."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import run_notebooks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    env = run_notebooks.reference_environment(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "tests.hazards.launches", str(ROOT / "notebooks" / name)],
        cwd=ROOT / "notebooks",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert rows, f"{name}: no launch was checked"
    for row in rows:
        if row["kernel"] in RACING:
            assert not row["ok"], f"{name}: {row['kernel']} races and was not found"
        else:
            assert row["ok"], f"{name}: {row['summary']}"

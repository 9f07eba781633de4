"""The puzzle that waits for an op not yet on every backend: a histogram
(``qnb.atomic_add``, which wgpu does not run yet). Its statement and reference solution
are written here; it joins ``names()`` (before ``prefix_sums``, as the contract's
teaching order has it) once its solution passes on cpu and wgpu. Nothing here is
imported by ``qnb.puzzles``.
"""

from __future__ import annotations

import numpy as np

from qnb.puzzles.puzzle import Case, Puzzle, cdiv


def histogram(x, bins):
    return np.bincount(x, minlength=bins)[:bins]


HISTOGRAM_SOLUTION = """\
@qnb.kernel
def histogram(x: qnb.Array[qnb.i32, 1], hist: qnb.Array[qnb.i32, 1]):
    start = qnb.program_id(0) * 128
    values = Vec[128].load(x, start, other=-1)  # -1 lies outside hist: it counts nothing
    qnb.atomic_add(hist, values, 1)
"""


def _histogram_inputs(rng, sizes):
    # (bins is for the NumPy definition, not a kernel parameter)
    return {"x": rng.integers(0, sizes["bins"], sizes["n"], dtype=np.int32), "bins": sizes["bins"]}


PENDING = [
    Puzzle(
        name="histogram",
        title="A histogram with atomics",
        goal="`hist[b]` counts the elements of `x` equal to `b`. Many programs add to one "
        "bin: a plain store from several programs to one element is a race; "
        "`qnb.atomic_add(hist, index, 1)` adds once per index, safely. (`hist` starts at "
        "0 here, not poisoned.)",
        signature="def histogram(x: qnb.Array[qnb.i32, 1], hist: qnb.Array[qnb.i32, 1]):",
        grid_text="`cdiv(n, 128)` programs",
        params=("x", "hist"),
        outputs=("hist",),
        make=_histogram_inputs,
        numpy=histogram,
        grid=lambda s: (cdiv(s["n"], 128),),
        cases=(
            Case({"n": 1, "bins": 1}, "a size of 1"),
            Case({"n": 1000, "bins": 37}, "not a multiple of 128"),
            Case({"n": 100_000, "bins": 256}, "large"),
        ),
        output_dtypes={"hist": np.int32},
        initial={"hist": 0},
    ),
]
SOLUTIONS = {"histogram": HISTOGRAM_SOLUTION}

__all__ = ["PENDING", "SOLUTIONS"]

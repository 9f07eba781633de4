"""The two puzzles that wait for ops not yet in qnb: a histogram (``qnb.atomic_add``) and a
scan (``cumsum``). Their statements and reference solutions are written here; they join
``names()`` (between ``box_blur`` and ``transpose``, as the contract's teaching order
has them) once the ops exist and their solutions pass on cpu and wgpu. Nothing here is
imported by ``qnb.puzzles``.
"""

from __future__ import annotations

import numpy as np

from qnb.puzzles.puzzle import Case, Puzzle, cdiv


def histogram(x, bins):
    return np.bincount(x, minlength=bins)[:bins]


def prefix_sums(x):
    return np.cumsum(x)


HISTOGRAM_SOLUTION = """\
@qnb.kernel
def histogram(x: qnb.Array[qnb.i32, 1], hist: qnb.Array[qnb.i32, 1]):
    start = qnb.program_id(0) * 128
    values = Vec[128].load(x, start, other=-1)  # -1 lies outside hist: it counts nothing
    qnb.atomic_add(hist, values, 1)
"""

SCAN_SOLUTION = """\
@qnb.kernel
def prefix_sums(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    carry = 0.0
    for start in range(0, x.shape[0], 1024):
        v = Vec[1024].load(x, start).cumsum() + carry
        v.store(out, start)
        carry = v[1023]  # (past the end the loads read 0: the last sum is the total)
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
    Puzzle(
        name="prefix_sums",
        title="A scan",
        goal="`out[i] = x[0] + ... + x[i]`: one program, a `Vec[1024]` at a time with "
        "`v.cumsum()`, carrying the total so far into the next block.",
        signature="def prefix_sums(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="1 program",
        params=("x", "out"),
        outputs=("out",),
        make=lambda rng, s: {"x": rng.uniform(0.25, 2.0, s["n"]).astype(np.float32)},
        numpy=prefix_sums,
        grid=lambda s: (1,),
        cases=(
            Case({"n": 1}, "a size of 1"),
            Case({"n": 5000}, "not a multiple of 1024"),
            Case({"n": 100_000}, "large"),
        ),
        rtol=1e-4,
        atol=1e-3,
    ),
]
SOLUTIONS = {"histogram": HISTOGRAM_SOLUTION, "prefix_sums": SCAN_SOLUTION}

__all__ = ["PENDING", "SOLUTIONS"]

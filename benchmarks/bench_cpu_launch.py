"""The cpu backend's fixed cost per launch on small grids, against another tree.

``python benchmarks/bench_cpu_launch.py`` prints, for this tree's qnb, the median time
per launch of a few small kernels and of the NumPy code doing the same work.
``--against PATH`` runs that in fresh processes for this tree and the tree at PATH in
turn (interleaved rounds) and prints medians and ratios: old / new, and each tree /
NumPy. Machines here are noisy: read the ratios, not the absolute times.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import qnb
from qnb import Tile16

REPO = Path(__file__).resolve().parents[1]


@qnb.kernel
def scale_shift(x, y):  # overlapping windows, one per row offset (the kernel)
    t = Tile16.load(x, qnb.program_id(0), 0)
    (t * 2.0 + 1.0).store(y, qnb.program_id(0), 0)


@qnb.kernel
def scale_rows(x, y):  # a column of whole blocks
    i = qnb.program_id(0) * 16
    (Tile16.load(x, i, 0) * 2.0 + 1.0).store(y, i, 0)


@qnb.kernel
def offset_grid(x, y):  # a 2-D grid of windows off the block grid (both ids stepping)
    i, j = qnb.program_id(0), qnb.program_id(1)
    (Tile16.load(x, j * 16 + 1, i * 16 + 1) * 2.0 + 1.0).store(y, j * 16, i * 16)


@qnb.kernel
def trivial(d):
    Tile16.full(4.0).store(d, 0, 0)


def _per_launch(fn, launches=200, repeat=7):
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        samples.append((time.perf_counter() - start) / launches)
    return statistics.median(samples)


def measure():
    """``{case: (qnb seconds, NumPy seconds)}`` per launch, for this process's qnb."""
    rng = np.random.default_rng(0)
    out = {}
    for rows, grid in ((64, 4), (1024, 64), (64, 60)):  # (60: edge programs leave x)
        x = rng.uniform(-1, 1, (rows, 16)).astype(np.float32)
        y = np.zeros_like(x)
        n = min(grid + 15, rows)
        view = y[:n]

        def numpy_form(x=x, view=view, n=n):
            np.add(np.multiply(x[:n], 2.0, out=view), 1.0, out=view)

        out[f"pid-row windows, grid {grid} on {rows}x16"] = (
            _per_launch(lambda g=grid, x=x, y=y: scale_shift[g](x, y)),
            _per_launch(numpy_form),
        )
    x = rng.uniform(-1, 1, (1024, 16)).astype(np.float32)
    y = np.zeros_like(x)
    out["block column, grid 64 on 1024x16"] = (
        _per_launch(lambda: scale_rows[64](x, y)),
        _per_launch(lambda: np.add(np.multiply(x, 2.0, out=y), 1.0, out=y)),
    )
    x = rng.uniform(-1, 1, (80, 80)).astype(np.float32)
    y = np.zeros_like(x)

    def numpy_grid():
        np.add(np.multiply(x[1:65, 1:65], 2.0, out=y[:64, :64]), 1.0, out=y[:64, :64])

    out["2-D offset windows, grid (4, 4) on 80x80"] = (
        _per_launch(lambda: offset_grid[4, 4](x, y)),
        _per_launch(numpy_grid),
    )
    d = np.zeros((16, 16), np.float32)
    out["trivial (full(4.0).store)"] = (
        _per_launch(lambda: trivial(d)),
        _per_launch(lambda: d.__setitem__((slice(0, 16), slice(0, 16)), 4.0)),
    )
    return out


def _run_tree(tree, script):
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, script, "--json"], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None):
    argv = sys.argv[1:] if argv is None else argv
    if "--json" in argv:
        print(json.dumps(measure()))
        return
    if "--against" not in argv:
        for case, (q, n) in measure().items():
            print(f"{case:40s} qnb {q * 1e6:8.1f} us  NumPy {n * 1e6:6.1f} us  ({q / n:.1f}x)")
        return
    old_tree = Path(argv[argv.index("--against") + 1]).resolve()
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 3
    script = str(Path(__file__).resolve())
    runs = {"new": [], "old": []}
    for _ in range(rounds):  # interleaved: the machine's load falls on both alike
        runs["old"].append(_run_tree(old_tree, script))
        runs["new"].append(_run_tree(REPO, script))
    print(f"per launch, medians of {rounds} interleaved rounds (old: {old_tree})")
    print(f"{'case':40s} {'old us':>8s} {'new us':>8s} {'old/new':>8s} {'new/NumPy':>9s}")
    for case in runs["new"][0]:
        old = statistics.median(r[case][0] for r in runs["old"])
        new = statistics.median(r[case][0] for r in runs["new"])
        numpy = statistics.median(r[case][1] for r in runs["new"] + runs["old"])
        print(f"{case:40s} {old * 1e6:8.1f} {new * 1e6:8.1f} {old / new:8.2f} {new / numpy:9.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""``qnb.check`` beside the plain cpu launch of the same kernel, side by side in one run.

Each row times ``qnb.check(k[grid], *args)`` and ``k[grid](*args)`` on the cpu backend
(warm: compiled and cached before timing), interleaved, and reports the medians, the
ratio of the medians (check / launch: what recording who touched what costs; the
contract says at most 3×) and the range of the ratios of the runs paired in time. The
kernels are race free (a check of a racing kernel also runs the launch again, and one
program at a time in two orders): a tiled matmul 512³ in 16×16 tiles with its K loop,
a row softmax, a batched Cholesky of 16,384 16×16 matrices (out of place, and in place:
every element read and stored, by its own program) and a 5-point stencil.

    python benchmarks/bench_check.py            # the table
    python benchmarks/bench_check.py --raw      # one line per case: name, check s, launch s
    python benchmarks/bench_check.py --repeats 15

Machines here are noisy: read the ratio and its range, not the absolute times.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402
from benchmarks._timing import alternated  # noqa: E402

# the kernels bench_trace and bench_cpu time (the same tiled matmul, softmax, Cholesky)
from benchmarks.bench_cpu import batched_cholesky  # noqa: E402
from benchmarks.bench_trace import softmax_rows_64 as row_softmax  # noqa: E402
from benchmarks.bench_trace import tiled_matmul  # noqa: E402
from qnb import Tile16  # noqa: E402

REPEATS = 9


@qnb.kernel
def stencil(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    centre = Tile16.load(x, i, j)
    around = Tile16.load(x, i - 1, j) + Tile16.load(x, i + 1, j)
    around = around + Tile16.load(x, i, j - 1) + Tile16.load(x, i, j + 1)
    (centre * 4.0 - around).store(out, i, j)


def cases():
    """(name, kernel, grid, args) for each row."""
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (512, 512)).astype(np.float32) for _ in range(2))
    yield "tiled matmul 512³ f32, grid 32×32", tiled_matmul, (32, 32), [a, b, np.empty_like(a)]
    x = rng.uniform(-1, 1, (65536, 64)).astype(np.float32)
    yield "row softmax 65,536×64 f32, grid 4096", row_softmax, (4096,), [x, np.empty_like(x)]
    m = rng.uniform(-1, 1, (16384, 16, 16))
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16)
    yield (
        "batched Cholesky 16,384×16×16 f64",
        batched_cholesky,
        (16384,),
        [spd, np.empty_like(spd)],
    )
    in_place = spd.copy()
    yield "the same, in place (a, a)", batched_cholesky, (16384,), [in_place, in_place]
    img = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    yield "5-point stencil 1024² f32, grid 64×64", stencil, (64, 64), [img, np.empty_like(img)]


def main(raw: bool = False, repeats: int = REPEATS):
    if not raw:
        print(f"{'case':<42} {'check':>9} {'launch':>9} {'ratio':>6}  range of paired ratios")
    with qnb.backend("cpu"):
        for name, kernel, grid, args in cases():
            found = qnb.check(kernel[grid], *args)
            assert found.ok, found  # a race-free kernel: the cost of a clean check
            checks, launches = alternated(
                lambda k=kernel, g=grid, a=args: qnb.check(k[g], *a),
                lambda k=kernel, g=grid, a=args: k[g](*a),
                repeats,
            )
            check_s, launch_s = statistics.median(checks), statistics.median(launches)
            if raw:
                print(f"{name}\t{check_s}\t{launch_s}", flush=True)
                continue
            paired = [c / p for c, p in zip(checks, launches)]
            print(
                f"{name:<42} {check_s * 1e3:>7.1f}ms {launch_s * 1e3:>7.1f}ms "
                f"{check_s / launch_s:>5.2f}×  {min(paired):.2f}–{max(paired):.2f}×",
                flush=True,
            )


if __name__ == "__main__":
    count = REPEATS
    if "--repeats" in sys.argv:
        count = int(sys.argv[sys.argv.index("--repeats") + 1])
    main(raw="--raw" in sys.argv, repeats=count)

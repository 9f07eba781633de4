"""The cpu backend against NumPy doing the same work, side by side in one run.

Each row times qnb (warm: compiled and cached before timing) and the NumPy baseline,
interleaved, and reports medians and their ratio (qnb / NumPy; lower is better).
Machines here are noisy: read the ratio, not the absolute times.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

import qnb
from qnb import Tile16

REPO = Path(__file__).resolve().parents[1]


@qnb.kernel
def batched_cholesky(a: qnb.Array[qnb.f64, 3], out: qnb.Array[qnb.f64, 3]):
    b = qnb.program_id(0)
    t = Tile16.load(a[b], 0, 0)
    t.cholesky_(0.0)
    t.store(out[b], 0, 0)


def _suite_kernels():
    """The tiled matmul and tile copy of the shared tile suite (tests/suite.py)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.suite import copy_tiles, tiled_matmul

    return tiled_matmul, copy_tiles


def side_by_side(run_qnb, run_numpy, repeats=5):
    """Median seconds of each, timed alternately so drift hits both alike."""
    run_qnb()
    run_numpy()
    qnb_times, numpy_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        run_qnb()
        qnb_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_numpy()
        numpy_times.append(time.perf_counter() - start)
    return statistics.median(qnb_times), statistics.median(numpy_times)


def cases():
    tiled_matmul, tile_copy = _suite_kernels()
    rng = np.random.default_rng(0)
    count = 16384
    m = rng.uniform(-1, 1, (count, 16, 16))
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16)
    chol_out = np.empty_like(spd)

    a = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    b = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    c = np.empty_like(a)

    src = rng.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    dst = np.empty_like(src)
    dst_numpy = np.empty_like(src)

    def numpy_copy():
        dst_numpy[:] = src

    yield (
        "batched Cholesky, 16,384 × 16×16 f64",
        lambda: batched_cholesky[count](spd, chol_out),
        lambda: np.linalg.cholesky(spd),
        lambda: np.allclose(chol_out, np.linalg.cholesky(spd)),
    )
    yield (
        "tiled matmul 512×512 f32",
        lambda: tiled_matmul[(32, 32)](a, b, c),
        lambda: a @ b,
        lambda: np.allclose(c, a @ b, rtol=1e-4, atol=1e-4),
    )
    yield (
        "tile copy 4096×4096 f32",
        lambda: tile_copy[(256, 256)](src, dst),
        numpy_copy,
        lambda: np.array_equal(dst, src),
    )


def main():
    print(f"{'case':<40} {'qnb cpu':>10} {'NumPy':>10} {'ratio':>7}  check")
    with qnb.backend("cpu"):
        for name, run_qnb, run_numpy, check in cases():
            qnb_s, numpy_s = side_by_side(run_qnb, run_numpy)
            ok = "ok" if check() else "WRONG"
            print(
                f"{name:<40} {qnb_s * 1e3:>8.1f}ms {numpy_s * 1e3:>8.1f}ms "
                f"{qnb_s / numpy_s:>6.2f}×  {ok}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""``kernel.trace`` beside the plain cpu launch of the same kernel, side by side in one run.

Each row times ``k.trace[grid](*args)`` and ``k[grid](*args)`` on the cpu backend (warm:
compiled and cached before timing), interleaved, and reports medians and their ratio
(trace / launch: what recording every op of every program costs). The kernels are the
notebooks' (tiled matmul, batched Cholesky solve, a 64-wide softmax) and a causal
attention with a loop whose trip count differs between programs (masked lanes).

    python benchmarks/bench_trace.py            # the table
    python benchmarks/bench_trace.py --raw      # one line per case: name, trace s, launch s

Machines here are noisy: read the ratio, not the absolute times. To compare two trees,
run this file under each (PYTHONPATH) alternately and compare the trace columns.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # (run as a script: benchmarks/ is not a package there)
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402
from benchmarks._timing import alternated  # noqa: E402
from qnb import Tile, Tile16  # noqa: E402


@qnb.kernel
def tiled_matmul(a: qnb.Array[qnb.f32, 2], b: qnb.Array[qnb.f32, 2], c: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * Tile16.SIZE
    col = qnb.program_id(1) * Tile16.SIZE
    acc = Tile16.zeros(qnb.f32)
    for k in range(0, a.shape[1], Tile16.SIZE):
        acc = qnb.mma(Tile16.load(a, row, k), Tile16.load(b, k, col), acc)
    acc.store(c, row, col)


@qnb.kernel
def cholesky_solve(
    A: qnb.Array[qnb.f32, 3],
    B: qnb.Array[qnb.f32, 3],
    L_out: qnb.Array[qnb.f32, 3],
    Y_out: qnb.Array[qnb.f32, 3],
    X: qnb.Array[qnb.f32, 3],
):
    s = qnb.program_id(0)
    L = Tile16.load(A[s], 0, 0)
    L.cholesky_(1e-12)
    L.store(L_out[s], 0, 0)
    Y = Tile16.load(B[s], 0, 0)
    L.solve_triangular_(Y)
    Y.store(Y_out[s], 0, 0)
    L_inv_T = Tile16.eye(qnb.f32)
    L.solve_triangular_(L_inv_T)
    (Y @ L_inv_T.T).store(X[s], 0, 0)


@qnb.kernel
def softmax_rows_64(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    t = Tile[16, 64].load(x, row, 0, other=-math.inf)
    e = qnb.exp(t - t.max(axis=1, keepdims=True))
    (e / e.sum(axis=1, keepdims=True)).store(out, row, 0)


@qnb.kernel
def causal_attention(
    q: qnb.Array[qnb.f32, 2],
    k: qnb.Array[qnb.f32, 2],
    v: qnb.Array[qnb.f32, 2],
    out: qnb.Array[qnb.f32, 2],
    scale: qnb.f32,
):
    qb = qnb.program_id(0)
    row = qb * 16
    qt = Tile16.load(q, row, 0)
    rows = row + qnb.arange(16)[:, None]
    m = Tile[16, 1].full(-math.inf, qnb.f32)
    l = Tile[16, 1].zeros(qnb.f32)  # noqa: E741 (the paper's name)
    acc = Tile16.zeros(qnb.f32)
    for kb in range(qb + 1):
        col = kb * 16
        s = (qt @ Tile16.load(k, col, 0).T) * scale
        cols = col + qnb.arange(16)[None, :]
        s = qnb.where(cols <= rows, s, -math.inf)
        m_new = qnb.maximum(m, s.max(axis=1, keepdims=True))
        p = qnb.exp(s - m_new)
        alpha = qnb.exp(m - m_new)
        l = l * alpha + p.sum(axis=1, keepdims=True)  # noqa: E741
        acc = acc * alpha + p @ Tile16.load(v, col, 0)
        m = m_new
    (acc / l).store(out, row, 0)


def cases():
    """(name, kernel, grid, args) for each row."""
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, size=(32, 40)).astype(np.float32)
    b = rng.integers(-3, 4, size=(40, 32)).astype(np.float32)
    yield (
        "tiled matmul 32×40 @ 40×32, grid 2×2",
        tiled_matmul,
        (2, 2),
        [a, b, np.zeros((32, 32), np.float32)],
    )
    big_a = rng.uniform(-1, 1, (128, 128)).astype(np.float32)
    big_b = rng.uniform(-1, 1, (128, 128)).astype(np.float32)
    yield (
        "tiled matmul 128×128, grid 8×8",
        tiled_matmul,
        (8, 8),
        [big_a, big_b, np.zeros_like(big_a)],
    )
    m = rng.uniform(-1, 1, (3, 16, 16)).astype(np.float32)
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16, dtype=np.float32)
    rhs = rng.uniform(-1, 1, (3, 16, 16)).astype(np.float32)
    outs = [np.zeros_like(spd) for _ in range(3)]
    yield "Cholesky solve, 3 × 16×16", cholesky_solve, (3,), [spd, rhs, *outs]
    x = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    yield "softmax 64×64, grid 4", softmax_rows_64, (4,), [x, np.zeros_like(x)]
    q, k, v = (rng.uniform(-1, 1, (64, 16)).astype(np.float32) for _ in range(3))
    yield (
        "causal attention 64×16, grid 4",
        causal_attention,
        (4,),
        [q, k, v, np.zeros_like(q), 0.25],
    )


def side_by_side(first, second, repeats=7):
    """Median seconds of each, timed alternately so drift hits both alike."""
    times = alternated(first, second, repeats)
    return statistics.median(times[0]), statistics.median(times[1])


def main(raw: bool = False):
    if not raw:
        print(f"{'case':<40} {'trace':>10} {'launch':>10} {'ratio':>7}")
    with qnb.backend("cpu"):
        for name, kernel, grid, args in cases():
            trace_s, launch_s = side_by_side(
                lambda k=kernel, g=grid, a=args: k.trace[g](*a),
                lambda k=kernel, g=grid, a=args: k[g](*a),
            )
            if raw:
                print(f"{name}\t{trace_s}\t{launch_s}", flush=True)
            else:
                print(
                    f"{name:<40} {trace_s * 1e3:>8.2f}ms {launch_s * 1e3:>8.2f}ms "
                    f"{trace_s / launch_s:>6.1f}×",
                    flush=True,
                )


if __name__ == "__main__":
    main(raw="--raw" in sys.argv)

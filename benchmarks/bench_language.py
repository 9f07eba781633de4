"""The kernels users write after the tutorials, beside the NumPy a performance-minded user
would write for the same result, side by side in one process.

Rows: a histogram of 10⁶ i32 values into 256 bins by ``qnb.atomic_add`` (``np.bincount``),
an argmax of each row of 4096×1024 f32 by a loop over 128-wide column tiles
(``np.argmax(x, axis=1)``), a layer norm of 8192×1024 f32 rows by the same loop (NumPy in
place: ``out=`` everywhere), and a cumsum of 10⁶ f32 by a two-level scan (per-block
``cumsum``, a scan of the block totals, the offsets added: three launches; ``np.cumsum``
with ``out=``). Each pair is timed alternately after a
warm-up (compiled and cached first); the table gives the medians, their ratio (qnb ÷
NumPy) and the range of the ratios of the runs paired in time. Every qnb result is checked
against NumPy's before it is timed.

    python benchmarks/bench_language.py                 # cpu
    python benchmarks/bench_language.py --wgpu          # and wgpu (lavapipe here: slow)
    python benchmarks/bench_language.py --repeats 15

Machines here are noisy: read the ratio and its range, not the absolute times.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402
from benchmarks._timing import alternated  # noqa: E402
from qnb import Tile, Vec  # noqa: E402

REPEATS = 9
BINS = 256
HIST_BLOCK = 4096  # elements a program counts


@qnb.kernel
def histogram(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1]):
    i = qnb.program_id(0)
    qnb.atomic_add(h, Vec[HIST_BLOCK].load(x, i * HIST_BLOCK, other=-1), 1)


@qnb.kernel
def row_argmax(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.i32, 1]):
    row = qnb.program_id(0) * 16
    best = Vec[16].full(-math.inf, qnb.f32)  # each row's largest value so far
    where = Vec[16].zeros(qnb.i32)  # and its column
    for col in range(0, x.shape[1], 128):
        t = Tile[16, 128].load(x, row, col, other=-math.inf)
        top = t.max(axis=1)
        better = top > best  # strictly: the first of equal values stays
        where = qnb.where(better, t.argmax(axis=1) + col, where)
        best = qnb.maximum(best, top)
    where.store(out, row)


@qnb.kernel
def layer_norm(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], eps: qnb.f32):
    row = qnb.program_id(0) * 16
    n = x.shape[1]
    total = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, n, 128):
        total = total + Tile[16, 128].load(x, row, col).sum(axis=1, keepdims=True)
    mean = total / n
    squares = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, n, 128):
        centred = Tile[16, 128].load(x, row, col) - mean
        squares = squares + (centred * centred).sum(axis=1, keepdims=True)
    inv = 1.0 / qnb.sqrt(squares / n + eps)
    for col in range(0, n, 128):
        ((Tile[16, 128].load(x, row, col) - mean) * inv).store(out, row, col)


SCAN_BLOCK = 4096  # elements a program scans


@qnb.kernel
def block_scans(
    x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1], totals: qnb.Array[qnb.f32, 1]
):
    i = qnb.program_id(0)
    v = Vec[SCAN_BLOCK].load(x, i * SCAN_BLOCK).cumsum()  # (past the end: zeros)
    v.store(out, i * SCAN_BLOCK)
    totals[i] = v[SCAN_BLOCK - 1]


@qnb.kernel
def scan_totals(totals: qnb.Array[qnb.f32, 1], offsets: qnb.Array[qnb.f32, 1]):
    carry = 0.0  # one program: the block totals, a vec at a time, each carried on
    for start in range(0, totals.shape[0], SCAN_BLOCK):
        v = Vec[SCAN_BLOCK].load(totals, start).cumsum() + carry
        v.store(offsets, start)
        carry = v[SCAN_BLOCK - 1]


@qnb.kernel
def add_offsets(out: qnb.Array[qnb.f32, 1], offsets: qnb.Array[qnb.f32, 1]):
    i = qnb.program_id(0) + 1  # (block 0 needs no offset)
    start = i * SCAN_BLOCK
    (Vec[SCAN_BLOCK].load(out, start) + offsets[i - 1]).store(out, start)


def numpy_layer_norm(x, out, eps, scratch):
    """Layer norm as a NumPy user who cares writes it: one pass per step, in place."""
    mean = x.mean(axis=1, keepdims=True)
    np.subtract(x, mean, out=out)
    np.multiply(out, out, out=scratch)
    var = scratch.mean(axis=1, keepdims=True)
    var += eps
    np.sqrt(var, out=var)
    np.divide(out, var, out=out)


def cases(small: bool = False):
    """(name, qnb call, NumPy call, check) for each row; ``small`` for a quick test."""
    rng = np.random.default_rng(0)
    n = 10**4 if small else 10**6
    x = rng.integers(0, BINS, n).astype(np.int32)
    h = np.zeros(BINS, np.int32)

    def qnb_histogram():
        h[:] = 0
        histogram[qnb.cdiv(n, HIST_BLOCK)](x, h)
        return h

    yield (
        f"histogram {n:,} i32 → {BINS} bins",
        qnb_histogram,
        lambda: np.bincount(x, minlength=BINS),
        lambda got, want: np.array_equal(got, want),
    )

    rows, width = (64, 256) if small else (4096, 1024)
    a = rng.standard_normal((rows, width)).astype(np.float32)
    found = np.full(rows, -1, np.int32)

    def qnb_argmax():
        row_argmax[rows // 16](a, found)
        return found

    yield (
        f"row argmax {rows}×{width} f32",
        qnb_argmax,
        lambda: np.argmax(a, axis=1),
        lambda got, want: np.array_equal(got, want),
    )

    s = rng.uniform(-1, 1, n).astype(np.float32)
    blocks = qnb.cdiv(n, SCAN_BLOCK)
    scanned, totals, offsets, want_scan = (
        np.empty(n, np.float32),
        np.empty(blocks, np.float32),
        np.empty(blocks, np.float32),
        np.empty(n, np.float32),
    )

    def qnb_cumsum():
        block_scans[blocks](s, scanned, totals)
        scan_totals[1](totals, offsets)
        if blocks > 1:
            add_offsets[blocks - 1](scanned, offsets)
        return scanned

    yield (
        f"cumsum {n:,} f32 (two-level scan)",
        qnb_cumsum,
        lambda: np.cumsum(s, out=want_scan),
        lambda got, want: np.allclose(got, want, rtol=1e-4, atol=1e-3),
    )

    rows, width = (64, 256) if small else (8192, 1024)
    z = (rng.standard_normal((rows, width)) * 2 + 0.5).astype(np.float32)
    normed, want_out, scratch = (np.empty_like(z) for _ in range(3))

    def qnb_layer_norm():
        layer_norm[rows // 16](z, normed, 1e-5)
        return normed

    def numpy_norm():
        numpy_layer_norm(z, want_out, 1e-5, scratch)
        return want_out

    yield (
        f"layer norm {rows}×{width} f32",
        qnb_layer_norm,
        numpy_norm,
        lambda got, want: np.allclose(got, want, rtol=1e-4, atol=1e-4),
    )


def main(wgpu: bool = False, repeats: int = REPEATS, small: bool = False):
    backends = ["cpu"] + (["wgpu"] if wgpu else [])
    print(f"{'case':<36} {'backend':<7} {'qnb':>9} {'NumPy':>9} {'ratio':>6}  paired range")
    for backend in backends:
        with qnb.backend(backend):
            for name, ours, theirs, agrees in cases(small):
                assert agrees(np.array(ours()), theirs()), f"{name}: qnb {backend} ≠ NumPy"
                mine, numpy_s = alternated(ours, theirs, repeats)
                paired = [m / t for m, t in zip(mine, numpy_s)]
                a, b = statistics.median(mine), statistics.median(numpy_s)
                print(
                    f"{name:<36} {backend:<7} {a * 1e3:>7.2f}ms {b * 1e3:>7.2f}ms "
                    f"{a / b:>5.2f}×  {min(paired):.2f}–{max(paired):.2f}×",
                    flush=True,
                )


if __name__ == "__main__":
    count = REPEATS
    if "--repeats" in sys.argv:
        count = int(sys.argv[sys.argv.index("--repeats") + 1])
    main(wgpu="--wgpu" in sys.argv, repeats=count, small="--small" in sys.argv)

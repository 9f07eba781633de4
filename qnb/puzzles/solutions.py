"""The reference solutions of the puzzles: one ``@qnb.kernel`` each, named as its puzzle.

``qnb.puzzles.solution(name)`` gives a function's source text. Each is the plain way to
solve its puzzle with what the puzzles before it taught; the tests check every one on
cpu and wgpu against its NumPy definition, at every case.
"""

from __future__ import annotations

import math

import qnb
from qnb import Tile, Vec

# ------------------------------------------------------------------ maps and guards


@qnb.kernel
def add_ten(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    start = qnb.program_id(0) * 128
    v = Vec[128].load(x, start)
    (v + 10.0).store(out, start)


@qnb.kernel
def multiply(x: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    start = qnb.program_id(0) * 128
    (Vec[128].load(x, start) * Vec[128].load(y, start)).store(out, start)


@qnb.kernel
def guarded_square(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    i = qnb.program_id(0)
    if i < x.shape[0]:
        out[i] = x[i] * x[i]


@qnb.kernel
def clip(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1], low: qnb.f32, high: qnb.f32):
    start = qnb.program_id(0) * 128
    v = Vec[128].load(x, start)
    qnb.minimum(qnb.maximum(v, low), high).store(out, start)


@qnb.kernel
def scale_2d(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    col = qnb.program_id(1) * 32
    t = Tile[16, 32].load(x, row, col)
    (t * 2.0 + 1.0).store(out, row, col)


# ------------------------------------------------------------------ broadcasting


@qnb.kernel
def outer_sum(a: qnb.Array[qnb.f32, 1], b: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    col = qnb.program_id(1) * 32
    u = Vec[16].load(a, row)
    v = Vec[32].load(b, col)
    (u[:, None] + v[None, :]).store(out, row, col)


@qnb.kernel
def add_bias(x: qnb.Array[qnb.f32, 2], bias: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    col = qnb.program_id(1) * 32
    t = Tile[16, 32].load(x, row, col)
    (t + Vec[32].load(bias, col)).store(out, row, col)


# ------------------------------------------------------------------ reductions


@qnb.kernel
def total(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    acc = Vec[1024].zeros(qnb.f32)
    for start in range(0, x.shape[0], 1024):
        acc = acc + Vec[1024].load(x, start)
    out[0] = acc.sum()


@qnb.kernel
def row_sums(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):
    row = qnb.program_id(0) * 16
    acc = Vec[16].zeros(qnb.f32)
    for col in range(0, x.shape[1], 64):
        acc = acc + Tile[16, 64].load(x, row, col).sum(axis=1)
    acc.store(out, row)


@qnb.kernel
def column_means(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):
    col = qnb.program_id(0) * 64
    acc = Vec[64].zeros(qnb.f32)
    for row in range(0, x.shape[0], 16):
        acc = acc + Tile[16, 64].load(x, row, col).sum(axis=0)
    (acc / x.shape[0]).store(out, col)


@qnb.kernel
def row_max(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):
    row = qnb.program_id(0) * 16
    best = Vec[16].full(-math.inf, qnb.f32)
    for col in range(0, x.shape[1], 64):
        t = Tile[16, 64].load(x, row, col, other=-math.inf)
        best = qnb.maximum(best, t.max(axis=1))
    best.store(out, row)


@qnb.kernel
def masked_softmax(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    t = Tile[16, 128].load(x, row, 0, other=-math.inf)
    e = qnb.exp(t - t.max(axis=1, keepdims=True))
    (e / e.sum(axis=1, keepdims=True)).store(out, row, 0)


@qnb.kernel
def layer_norm(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], eps: qnb.f32):
    row = qnb.program_id(0) * 16
    n = x.shape[1]
    t = Tile[16, 128].load(x, row, 0)
    mean = t.sum(axis=1, keepdims=True) / n
    inside = qnb.arange(128)[None, :] < n
    d = qnb.where(inside, t - mean, 0.0)
    var = (d * d).sum(axis=1, keepdims=True) / n
    (d / qnb.sqrt(var + eps)).store(out, row, 0)


# ------------------------------------------------------------------ stencils


@qnb.kernel
def stencil_3(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    start = qnb.program_id(0) * 128
    left = Vec[128].load(x, start - 1)
    middle = Vec[128].load(x, start)
    right = Vec[128].load(x, start + 1)
    (left + middle + right).store(out, start)


@qnb.kernel
def box_blur(img: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    col = qnb.program_id(1) * 16
    acc = Tile[16, 16].zeros(qnb.f32)
    for di in qnb.static(range(-1, 2)):
        for dj in qnb.static(range(-1, 2)):
            acc = acc + Tile[16, 16].load(img, row + di, col + dj)
    (acc / 9.0).store(out, row, col)


# ------------------------------------------------------------------ atomics and scans


@qnb.kernel
def histogram(x: qnb.Array[qnb.i32, 1], hist: qnb.Array[qnb.i32, 1]):
    start = qnb.program_id(0) * 128
    values = Vec[128].load(x, start, other=-1)  # -1 lies outside hist: it counts nothing
    qnb.atomic_add(hist, values, 1)


@qnb.kernel
def prefix_sums(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    carry = 0.0
    for start in range(0, x.shape[0], 1024):
        v = Vec[1024].load(x, start).cumsum() + carry
        v.store(out, start)
        carry = v[1023]  # (past the end the loads read 0: the last sum is the total)


# ------------------------------------------------------------------ matrices


@qnb.kernel
def transpose(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 32
    col = qnb.program_id(1) * 32
    Tile[32, 32].load(x, row, col).T.store(out, col, row)


@qnb.kernel
def outer_product(u: qnb.Array[qnb.f32, 1], v: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 32
    col = qnb.program_id(1) * 32
    qnb.outer(Vec[32].load(u, row), Vec[32].load(v, col)).store(out, row, col)


@qnb.kernel
def matvec(a: qnb.Array[qnb.f32, 2], x: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 1]):
    row = qnb.program_id(0) * 16
    acc = Vec[16].zeros(qnb.f32)
    for col in range(0, a.shape[1], 64):
        t = Tile[16, 64].load(a, row, col)
        acc = acc + (t * Vec[64].load(x, col)).sum(axis=1)
    acc.store(y, row)


@qnb.kernel
def matmul(a: qnb.Array[qnb.f32, 2], b: qnb.Array[qnb.f32, 2], c: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 32
    col = qnb.program_id(1) * 32
    acc = Tile[32, 32].zeros(qnb.f32)
    for k in range(0, a.shape[1], 32):
        acc = qnb.mma(Tile[32, 32].load(a, row, k), Tile[32, 32].load(b, k, col), acc)
    acc.store(c, row, col)


@qnb.kernel
def linear_relu(
    x: qnb.Array[qnb.f32, 2],
    w: qnb.Array[qnb.f32, 2],
    bias: qnb.Array[qnb.f32, 1],
    out: qnb.Array[qnb.f32, 2],
):
    row = qnb.program_id(0) * 32
    col = qnb.program_id(1) * 32
    acc = Tile[32, 32].zeros(qnb.f32)
    for k in range(0, x.shape[1], 32):
        acc = qnb.mma(Tile[32, 32].load(x, row, k), Tile[32, 32].load(w, k, col), acc)
    qnb.maximum(acc + Vec[32].load(bias, col), 0.0).store(out, row, col)


# ------------------------------------------------------------------ attention


@qnb.kernel
def causal_attention(
    q: qnb.Array[qnb.f32, 2],
    k: qnb.Array[qnb.f32, 2],
    v: qnb.Array[qnb.f32, 2],
    out: qnb.Array[qnb.f32, 2],
    scale: qnb.f32,
):
    qb = qnb.program_id(0)
    row = qb * 32
    qt = Tile[32, 32].load(q, row, 0)
    rows = row + qnb.arange(32)[:, None]
    m = Tile[32, 1].full(-math.inf, qnb.f32)
    denom = Tile[32, 1].zeros(qnb.f32)
    acc = Tile[32, 32].zeros(qnb.f32)
    for kb in range(qb + 1):
        col = kb * 32
        s = (qt @ Tile[32, 32].load(k, col, 0).T) * scale
        cols = col + qnb.arange(32)[None, :]
        s = qnb.where(cols <= rows, s, -math.inf)  # (keys past the end: rows past it too)
        m_new = qnb.maximum(m, s.max(axis=1, keepdims=True))
        p = qnb.exp(s - m_new)
        alpha = qnb.exp(m - m_new)
        denom = denom * alpha + p.sum(axis=1, keepdims=True)
        acc = acc * alpha + p @ Tile[32, 32].load(v, col, 0)
        m = m_new
    (acc / denom).store(out, row, 0)

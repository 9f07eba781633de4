"""The tile suite: kernels that exercise every op and construct, each with an input
maker and an independent NumPy reference (written directly, not through qnb).

Used by the cpu tests, the differential test (every backend against cpu), the NVRTC
compile test and the cache benchmarks. ``Case.make(rng, dtype)`` returns the grid and
the arguments with every output poisoned (NaN, or a sentinel for integers) so that an
element a kernel fails to write shows up; ``Case.expect(inputs)`` returns the expected
contents of each output argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import qnb
from qnb import Tile16, Vec16

F16, F32, F64, I32 = np.float16, np.float32, np.float64, np.int32
BF16 = ml_dtypes.bfloat16  # cpu and cuda; wgpu refuses it (test_differential)
FLOATS = (F32, F64, F16)


def poison(shape, dtype):
    if np.dtype(dtype).kind == "f" or np.dtype(dtype) == np.dtype(BF16):
        return np.full(shape, np.nan, dtype)
    if np.dtype(dtype).kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, -12345, dtype)


def rand(rng, shape, dtype, low=-1.0, high=1.0):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    values = rng.uniform(low, high, size=shape)
    values[values == 0] = 0.5  # never all-zero, never exactly zero
    return values.astype(dtype)


def spd(rng, count, dtype, size=16):
    m = rng.uniform(-1, 1, size=(count, size, size))
    return (m @ m.transpose(0, 2, 1) + size * np.eye(size)).astype(dtype)


@dataclass
class Case:
    name: str
    kernel: qnb.Kernel
    make: Callable  # (rng, dtype) -> (grid, args)
    expect: Callable  # (args) -> {arg index: expected array}
    dtypes: tuple = (F32, F64)
    notes: str = ""
    ops: list = field(default_factory=list)

    def __repr__(self):
        return f"Case({self.name})"


CASES: list[Case] = []


def case(name, make, expect, dtypes=(F32, F64), ops=()):
    def register(kernel):
        CASES.append(Case(name, kernel, make, expect, tuple(dtypes), ops=list(ops)))
        return kernel

    return register


# ----------------------------------------------------------------------------- memory


def _copy_make(rng, dtype):
    x = rand(rng, (37, 45), dtype)
    return (3, 3), [x, poison(x.shape, dtype)]


@case("copy_tiles", _copy_make, lambda a: {1: a[0]}, dtypes=(F32, F64, F16, I32))
@qnb.kernel
def copy_tiles(src, dst):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    t = Tile16.load(src, i * 16, j * 16)
    t.store(dst, i * 16, j * 16)


def _window_make(rng, dtype):
    src = rand(rng, (20, 21), dtype)
    return (1,), [src, poison((4, 16, 16), dtype)]


def _window_expect(a):
    src = a[0]
    out = np.empty((4, 16, 16), src.dtype)
    windows = [(0, 20, 0, 21), (10, 20, 13, 21), (4, 9, 2, 30), (18, 25, 19, 40)]
    for k, (r0, r1, c0, c1) in enumerate(windows):
        t = np.full((16, 16), -1, src.dtype)
        for i in range(16):
            for j in range(16):
                if r0 + i < min(r1, 20) and c0 + j < min(c1, 21):
                    t[i, j] = src[r0 + i, c0 + j]
        out[k] = t
    return {1: out}


@case("load_window_edges", _window_make, _window_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def load_window_edges(src, out):
    t = Tile16.full(-1, src.dtype)
    t.load_(src, 0, 20, 0, 21)
    out[0, 0:16, 0:16] = t
    t = Tile16.full(-1, src.dtype)
    t[:] = src[10:20, 13:21]
    out[1, 0:16, 0:16] = t
    t = Tile16.full(-1, src.dtype)
    t.load_(src, 4, 9, 2, 30)
    out[2, 0:16, 0:16] = t
    t = Tile16.full(-1, src.dtype)
    t.load_(src, 18, 25, 19, 40)
    out[3, 0:16, 0:16] = t


def _store_make(rng, dtype):
    dst = rand(rng, (23, 19), dtype)
    return (1,), [rand(rng, (16, 16), dtype), dst]


def _store_expect(a):
    t, dst = a[0], a[1].copy()
    for r0, r1, c0, c1 in [(0, 5, 0, 7), (20, 30, 10, 19), (7, 12, 15, 40)]:
        for i in range(16):
            for j in range(16):
                if r0 + i < min(r1, 23) and c0 + j < min(c1, 19):
                    dst[r0 + i, c0 + j] = t[i, j]
    return {1: dst}


@case("store_window_edges", _store_make, _store_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def store_window_edges(tile_src, dst):
    t = Tile16.load(tile_src, 0, 0)
    t.store(dst, 0, 5, 0, 7)
    dst[20:30, 10:19] = t
    t.store(dst, 7, 12, 15, 40)


def _slab_make(rng, dtype):
    x = rand(rng, (3, 40, 24), dtype)
    return (3, 2), [x, poison((3, 40, 24), dtype)]


def _slab_expect(a):
    x = a[0]
    out = np.full(x.shape, np.nan if x.dtype.kind == "f" else -12345, x.dtype)
    for b in range(3):
        for p in range(2):
            r0 = p * 16 + 5
            for i in range(16):
                for j in range(24):
                    if r0 + i < 40:
                        out[b, r0 + i, j] = x[b, r0 + i, j] * 2
    return {1: out}


@case("slab_3d_offsets", _slab_make, _slab_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def slab_3d_offsets(x, out):
    b = qnb.program_id(0)
    p = qnb.program_id(1)
    r0 = p * 16 + 5
    t = Tile16.zeros(x.dtype)
    t[:] = x[b, r0 : r0 + 16, 0:16]
    out[b, r0 : r0 + 16, 0:16] = t * 2
    u = Tile16.load(x[b], r0, 16)
    u2 = u * 2
    u2.store(out[b], r0, r0 + 16, 16, 24)


def _padded_make(rng, dtype):
    # Room for the 3×3 grid the differential test adds (extra programs), so every
    # program stores in range and cpu and the GPU backends compare element by element.
    x = rand(rng, (20, 21), dtype, -50.0, 50.0)
    line = rand(rng, (21,), dtype)
    outputs = [
        poison((27, 16, 16), dtype),  # three tiles per program
        poison((9 * 32,), dtype),  # two vecs per program
        poison((9, 16, 16), np.float32),  # load(..., dtype=qnb.f32)
        poison((9, 16, 16), np.int32),  # load(..., dtype=qnb.i32)
        poison(x.shape, dtype),  # a padded store
    ]
    return (2, 2), [x, line, *outputs, float("nan")]


def _padded_tile(x, r, c, other, dtype=None):
    """``Tile16.load(x, r, c, other=other, dtype=dtype)`` in NumPy."""
    dtype = np.dtype(dtype or x.dtype)
    t = np.full((16, 16), other, np.float64)
    for i in range(16):
        for j in range(16):
            if 0 <= r + i < x.shape[0] and 0 <= c + j < x.shape[1]:
                t[i, j] = x[r + i, c + j].astype(dtype) if dtype.kind == "i" else x[r + i, c + j]
    if dtype.kind == "i":
        return t.astype(np.int64).astype(dtype)
    return t.astype(x.dtype).astype(dtype)


def _padded_vec(line, start, other):
    return np.array(
        [line[start + i] if 0 <= start + i < len(line) else other for i in range(16)], line.dtype
    )


def _padded_expect(a):
    x, line, tiles, vecs, as_f32, as_i32, stored = (np.array(v) for v in a[:7])
    for p in range(2):
        for q in range(2):
            b, r, c = p + 2 * q, p * 16 - 3, q * 16 - 5
            tiles[3 * b] = _padded_tile(x, r, c, -np.inf)
            tiles[3 * b + 1] = _padded_tile(x, r + 9, c - 12, np.nan)
            tiles[3 * b + 2] = _padded_tile(x, r, c, 0)
            vecs[32 * b : 32 * b + 16] = _padded_vec(line, p * 16 - 7, np.nan)
            vecs[32 * b + 16 : 32 * b + 32] = _padded_vec(line, q * 16 + 10, np.inf)
            as_f32[b] = _padded_tile(x, c, r, 2.5, np.float32)
            as_i32[b] = _padded_tile(x, c, r, -7, np.int32)
            for i in range(16):
                for j in range(16):
                    if 0 <= r + i < x.shape[0] and 0 <= c + j < x.shape[1]:
                        stored[r + i, c + j] = x[r + i, c + j] + 1
    return {2: tiles, 3: vecs, 4: as_f32, 5: as_i32, 6: stored}


@case("padded_loads", _padded_make, _padded_expect, dtypes=(F32, F64, F16))
@qnb.kernel
def padded_loads(x, line, tiles, vecs, as_f32, as_i32, stored, nan_fill: qnb.f32):
    """``other=`` (a literal ±inf, a runtime NaN), ``dtype=``, negative and past-the-end
    offsets, each program at its own."""
    p = qnb.program_id(0)
    q = qnb.program_id(1)
    b = p + qnb.num_programs(0) * q
    r = p * 16 - 3
    c = q * 16 - 5
    tiles[3 * b, 0:16, 0:16] = Tile16.load(x, r, c, other=-math.inf)
    tiles[3 * b + 1, 0:16, 0:16] = Tile16.load(x, r + 9, c - 12, other=nan_fill)
    tiles[3 * b + 2, 0:16, 0:16] = Tile16.load(x, r, c)
    Vec16.load(line, p * 16 - 7, other=nan_fill).store(vecs, 32 * b)
    Vec16.load(line, q * 16 + 10, other=math.inf).store(vecs, 32 * b + 16)
    as_f32[b, 0:16, 0:16] = Tile16.load(x, c, r, other=2.5, dtype=qnb.f32)
    as_i32[b, 0:16, 0:16] = Tile16.load(x, c, r, dtype=qnb.i32, other=-7)
    (Tile16.load(x, r, c) + 1).store(stored, r, c)


# ----------------------------------------------------------------------------- elementwise


def _ew_make(rng, dtype):
    x = rand(rng, (32, 32), dtype, 0.1, 2.0)
    y = rand(rng, (32, 32), dtype)
    return (2, 2), [x, y, poison((32, 32), dtype), 1.5]


def _ew_expect(a):
    x, y, _, s = a
    dt = x.dtype
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    r = np.sqrt(x64) + np.exp(y64) * s - np.log(x64) / 2 + np.abs(y64)
    r = np.maximum(r, x64) - np.minimum(y64, 0.25)
    r = np.where(y64 > 0, r, -r)
    return {2: r.astype(dt)}


@case("elementwise_math", _ew_make, _ew_expect, dtypes=(F32, F64, F16))
@qnb.kernel
def elementwise_math(x, y, out, s: qnb.f32):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    a = Tile16.load(x, i, j)
    b = Tile16.load(y, i, j)
    r = qnb.sqrt(a) + qnb.exp(b) * s - qnb.log(a) / 2 + qnb.abs(b)
    r = qnb.maximum(r, a) - qnb.minimum(b, 0.25)
    r = qnb.where(b > 0, r, -r)
    r.astype(x.dtype).store(out, i, j)


def _int_make(rng, dtype):
    x = rng.integers(-40, 40, size=(16, 16)).astype(np.int32)
    y = rng.integers(1, 9, size=(16, 16)).astype(np.int32) * rng.choice([-1, 1], size=(16, 16))
    return (1,), [x, y.astype(np.int32), poison((4, 16, 16), np.int32)]


def _int_expect(a):
    x, y = a[0].astype(np.int64), a[1].astype(np.int64)
    out = np.stack([x // y, x % y, x * y - 3, np.maximum(x, y)]).astype(np.int32)
    return {2: out}


@case("int_floor_semantics", _int_make, _int_expect, dtypes=(I32,))
@qnb.kernel
def int_floor_semantics(x, y, out):
    a = Tile16.load(x, 0, 0)
    b = Tile16.load(y, 0, 0)
    out[0, 0:16, 0:16] = a // b
    out[1, 0:16, 0:16] = a % b
    out[2, 0:16, 0:16] = a * b - 3
    out[3, 0:16, 0:16] = qnb.maximum(a, b)


def _mask_make(rng, dtype):
    x = rand(rng, (16, 16), dtype)
    return (1,), [x, poison((16, 16), dtype), poison((16, 16), np.int32)]


def _mask_expect(a):
    x = a[0]
    m = (x > -0.5) & (x < 0.5) | (x > 0.9)
    return {1: np.where(~m, x, np.zeros_like(x)), 2: m.astype(np.int32)}


@case("bool_masks", _mask_make, _mask_expect, dtypes=(F32, F64))
@qnb.kernel
def bool_masks(x, out, mask_out):
    t = Tile16.load(x, 0, 0)
    m = (t > -0.5) & (t < 0.5) | (t > 0.9)
    qnb.where(~m, t, 0.0).store(out, 0, 0)
    qnb.where(m, 1, 0).store(mask_out, 0, 0)


def _cast_make(rng, dtype):
    x = rand(rng, (16, 16), dtype, -20, 20)
    return (1,), [x, poison((16, 16), dtype), poison((16, 16), np.int32)]


def _cast_expect(a):
    x = a[0]
    as_int = np.trunc(x.astype(np.float64)).astype(np.int32)
    return {1: (as_int.astype(np.float64) * 0.5).astype(x.dtype), 2: as_int}


@case("astype_roundtrip", _cast_make, _cast_expect, dtypes=(F32, F64, F16))
@qnb.kernel
def astype_roundtrip(x, out, out_int):
    t = Tile16.load(x, 0, 0)
    k = t.astype(qnb.i32)
    k.store(out_int, 0, 0)
    (k.astype(x.dtype) * 0.5).store(out, 0, 0)


# ----------------------------------------------------------------------------- reductions etc.


def _tile_make(rng, dtype):
    return (1,), [rand(rng, (16, 16), dtype), poison((16, 16), dtype), poison((7, 16), dtype)]


def _reduce_expect(a):
    t = a[0]
    wide = t.astype(np.float64) if t.dtype.kind == "f" else t
    rows = np.stack(
        [
            wide.sum(0),
            wide.sum(1),
            wide.max(0),
            wide.min(1),
            np.full(16, wide.sum()),
            np.full(16, wide.max()),
            np.full(16, wide.min()),
        ]
    )
    return {1: t.T.copy(), 2: rows.astype(t.dtype)}


@case("transpose_and_reduce", _tile_make, _reduce_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def transpose_and_reduce(x, out_t, out_r):
    t = Tile16.load(x, 0, 0)
    t.T.store(out_t, 0, 0)
    out_r[0:1, 0:16] = Tile16.zeros(x.dtype)  # row 0 is overwritten below
    rows = Tile16.zeros(x.dtype)
    v0 = t.sum(axis=0)
    v1 = t.sum(axis=1)
    v2 = t.max(axis=0)
    v3 = t.min(1)
    for j in range(16):
        rows[0, j] = v0[j]
        rows[1, j] = v1[j]
        rows[2, j] = v2[j]
        rows[3, j] = v3[j]
        rows[4, j] = t.sum()
        rows[5, j] = t.max()
        rows[6, j] = t.min()
    rows.store(out_r, 0, 7, 0, 16)


def _rowcol_make(rng, dtype):
    return (1,), [rand(rng, (16, 16), dtype), poison((64,), dtype), poison((16,), dtype)]


def _rowcol_expect(a):
    t = a[0]
    v = t[3] + t[:, 5] * 2
    out = np.concatenate([t[3], t[:, 5], v, v[::-1] * 0 + v.sum()]).astype(t.dtype)
    w = np.array([t[i, 15 - i] for i in range(16)], t.dtype)
    return {1: out, 2: w}


@case("rows_cols_vectors", _rowcol_make, _rowcol_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def rows_cols_vectors(x, out, diag):
    t = Tile16.load(x, 0, 0)
    r = t.row(3)
    c = t.col(5)
    v = r + c * 2
    r.store(out, 0)
    c.store(out, 16)
    v.store(out, 32)
    s = Vec16.full(v.sum(), x.dtype)
    s.store(out, 48)
    w = Vec16.zeros(x.dtype)
    for i in range(16):
        w[i] = t[i, 15 - i]
    diag[0:16] = w


def _vecload_make(rng, dtype):
    return (1,), [rand(rng, (20, 6), dtype), rand(rng, (21,), dtype), poison((16, 16), dtype)]


def _vecload_expect(a):
    m, line = a[0], a[1]
    out = np.zeros((16, 16), m.dtype)
    col = np.zeros(16, m.dtype)
    col[:15] = m[5:20, 2]
    part = np.zeros(16, m.dtype)
    part[:6] = line[15:21]
    window = np.zeros(16, m.dtype)
    window[:4] = m[1:5, 4]
    ones = np.ones(16, m.dtype)
    out[:] = np.outer(col, part) + np.outer(window, ones)
    return {2: out}


@case("vector_loads", _vecload_make, _vecload_expect)
@qnb.kernel
def vector_loads(m, line, out):
    col = Vec16.load(m, 5, 40, 2)
    part = line[15:40]
    window = m[1:5, 4]
    t = qnb.outer(col, part)
    t += qnb.outer(window, Vec16.full(1, m.dtype))
    t.store(out, 0, 0)


def _elem_make(rng, dtype):
    x = rand(rng, (5, 7), dtype)
    return (2,), [x, poison((2, 5, 7), dtype)]


def _elem_expect(a):
    x = a[0]
    out = np.empty((2, 5, 7), x.dtype)
    out[0] = x * 2
    out[1] = x * 3
    return {1: out}


@case("element_access", _elem_make, _elem_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def element_access(x, out):
    p = qnb.program_id(0)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[p, i, j] = x[i, j] * (p + 2)


# ----------------------------------------------------------------------------- linear algebra


def _mm_make(rng, dtype):
    n = 48
    a, b = rand(rng, (n, 40), dtype), rand(rng, (40, n), dtype)
    out_dtype = np.float32 if dtype in (F16, BF16) else dtype  # halves accumulate in f32
    return (3, 3), [a, b, poison((n, n), out_dtype)]


def _mm_expect(a):
    x, y, out = a
    return {2: (x.astype(np.float64) @ y.astype(np.float64)).astype(out.dtype)}


@case("tiled_matmul", _mm_make, _mm_expect, dtypes=(F32, F64, F16, BF16))
@qnb.kernel
def tiled_matmul(a, b, c):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(c.dtype)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(c, i, j)


def _mat_make(rng, dtype):
    return (1,), [
        rand(rng, (16, 16), dtype),
        rand(rng, (16, 16), dtype),
        poison((16, 16), np.float32 if dtype == F16 else dtype),
    ]


@case(
    "matmul_operator",
    _mat_make,
    lambda a: {
        2: (a[0].astype(np.float64) @ a[1].astype(np.float64) + a[0].astype(np.float64)).astype(
            a[2].dtype
        )
    },
    dtypes=(F32, F64, F16),
)
@qnb.kernel
def matmul_operator(x, y, out):
    a = Tile16.load(x, 0, 0)
    b = Tile16.load(y, 0, 0)
    c = a @ b
    c += a.astype(c.dtype)
    c.store(out, 0, 0)


def _outer_make(rng, dtype):
    return (1,), [
        rand(rng, (16, 16), dtype),
        rand(rng, (16,), dtype),
        rand(rng, (16,), dtype),
        poison((16, 16), dtype),
    ]


def _outer_expect(a):
    t, u, v, _ = a
    w = t.astype(np.float64) - np.outer(u, v) + 2 * np.outer(v, u)
    return {3: w.astype(t.dtype)}


@case("outer_updates", _outer_make, _outer_expect)
@qnb.kernel
def outer_updates(x, u_arr, v_arr, out):
    t = Tile16.load(x, 0, 0)
    u = Vec16.load(u_arr, 0)
    v = Vec16.load(v_arr, 0)
    t -= qnb.outer(u, v)
    t += qnb.outer(v, u) * 2
    t.store(out, 0, 0)


def _chol_make(rng, dtype):
    count = 4
    big = np.zeros((40, 70), dtype)
    mats = spd(rng, count, dtype)
    offsets = [(0, 0), (3, 20), (24, 37), (20, 54)]
    for (r, c), m in zip(offsets, mats):
        big[r : r + 16, c : c + 16] = m
    rows = np.array([o[0] for o in offsets], np.int32)
    cols = np.array([o[1] for o in offsets], np.int32)
    return (count,), [big, rows, cols, poison((count, 16, 16), dtype)]


def _chol_expect(a):
    big, rows, cols, out = a
    expected = np.stack(
        [
            np.linalg.cholesky(big[r : r + 16, c : c + 16].astype(np.float64))
            for r, c in zip(rows, cols)
        ]
    )
    return {3: expected.astype(out.dtype)}


@case("cholesky_offsets", _chol_make, _chol_expect)
@qnb.kernel
def cholesky_offsets(big, rows, cols, out):
    p = qnb.program_id(0)
    r = rows[p]
    c = cols[p]
    t = Tile16.zeros(big.dtype)
    t.load_(big, r, r + 16, c, c + 16)
    t.cholesky_(1e-10)
    out[p, 0:16, 0:16] = t


def _solve_make(rng, dtype):
    count = 3
    mats = spd(rng, count, np.float64)
    lower = np.linalg.cholesky(mats).astype(dtype)
    rhs = rand(rng, (count, 16, 16), dtype)
    return (count,), [lower, rhs, poison((count, 16, 16), dtype)]


def _solve_expect(a):
    lower, rhs, out = a
    x = np.linalg.solve(lower.astype(np.float64), rhs.astype(np.float64).transpose(0, 2, 1))
    return {2: x.transpose(0, 2, 1).astype(out.dtype)}


@case("solve_triangular", _solve_make, _solve_expect)
@qnb.kernel
def solve_triangular(lower, rhs, out):
    b = qnb.program_id(0)
    L = Tile16.load(lower[b], 0, 0)
    B = Tile16.load(rhs[b], 0, 0)
    L.solve_triangular_(B, lower=True)
    B.store(out[b], 0, 0)


def _spd_solve_make(rng, dtype):
    count = 5
    return (count,), [
        spd(rng, count, dtype),
        rand(rng, (count, 16, 16), dtype),
        poison((count, 16, 16), dtype),
    ]


def _spd_solve_expect(a):
    m, rhs, out = a
    x = np.linalg.solve(m.astype(np.float64), rhs.astype(np.float64).transpose(0, 2, 1))
    return {2: x.transpose(0, 2, 1).astype(out.dtype)}


@case("cholesky_then_solve", _spd_solve_make, _spd_solve_expect)
@qnb.kernel
def cholesky_then_solve(m, rhs, out):
    b = qnb.program_id(0)
    A = Tile16.load(m[b], 0, 0)
    A.cholesky_(1e-10)
    X = Tile16.load(rhs[b], 0, 0)
    A.solve_triangular_(X)  # X = B L^-T
    inverse_t = Tile16.eye(m.dtype)
    A.solve_triangular_(inverse_t)  # L^-T
    (X @ inverse_t.T).store(out[b], 0, 0)  # B L^-T L^-1 = B (L L^T)^-1


# ----------------------------------------------------------------------------- control flow and static


USE_IDENTITY = True


def _static_make(rng, dtype):
    return (1,), [poison((16, 16), dtype)]


@case(
    "static_flag",
    _static_make,
    lambda a: {
        0: (np.eye(16) * 3 + 1).astype(a[0].dtype)
        if USE_IDENTITY
        else np.ones((16, 16), a[0].dtype)
    },
    dtypes=(F32, F64, I32),
)
@qnb.kernel
def static_flag(out):
    t = Tile16.zeros(out.dtype)
    if qnb.static(USE_IDENTITY):
        t.eye_()
        t = t * 3
    t += 1
    for k in qnb.static(range(2)):
        t = t + k - k
    t.store(out, 0, 0)


def _flow_make(rng, dtype):
    counts = rng.integers(0, 12, size=6).astype(np.int32)
    return (6,), [counts, rand(rng, (6, 16), dtype), poison((96,), dtype)]


def _flow_expect(a):
    counts, x, _ = a
    out = np.empty_like(x)
    for p in range(6):
        total = np.zeros(16)
        i = 0
        while True:
            if i >= counts[p]:
                break
            i += 1
            if i % 3 == 0:
                continue
            total += x[p].astype(np.float64) * i
        if counts[p] > 5:
            total = -total
        elif counts[p] == 0:
            total = total + 7
        else:
            total = total * 0.5
        out[p] = total
    return {2: out.reshape(-1).astype(x.dtype)}


@case("divergent_control_flow", _flow_make, _flow_expect)
@qnb.kernel
def divergent_control_flow(counts, x, out):
    p = qnb.program_id(0)
    n = counts[p]
    row = Tile16.load(x, p, 0).row(0)
    total = Vec16.zeros(x.dtype)
    i = 0
    while True:
        if i >= n:
            break
        i += 1
        if i % 3 == 0:
            continue
        total = total + row * i
    if n > 5:
        total = -total
    elif n == 0:
        total = total + 7
    else:
        total = total * 0.5
    total.store(out, p * 16)


@qnb.func
def scaled_sum(a, b, factor):
    return (a + b) * factor


@qnb.func
def bump(t):
    t += 1


def _func_make(rng, dtype):
    return (2, 3), [rand(rng, (32, 48), dtype), poison((32, 48), dtype)]


def _func_expect(a):
    x = a[0].astype(np.float64)
    out = np.empty_like(x)
    for pi in range(2):
        for pj in range(3):
            blk = x[pi * 16 : pi * 16 + 16, pj * 16 : pj * 16 + 16]
            out[pi * 16 : pi * 16 + 16, pj * 16 : pj * 16 + 16] = (
                (blk + blk.T) * (pi + pj + 1) + 1 + pi * 3 + pj
            )
    return {1: out.astype(a[0].dtype)}


@case("funcs_and_program_ids", _func_make, _func_expect)
@qnb.kernel
def funcs_and_program_ids(x, out):
    pi = qnb.program_id(0)
    pj = qnb.program_id(1)
    t = Tile16.load(x, pi * 16, pj * 16)
    r = scaled_sum(t, t.T, pi + pj + 1)
    bump(r)
    r = r + (pi * qnb.num_programs(1) + pj)
    r.store(out, pi * 16, pj * 16)


def _runtime_loop_make(rng, dtype):
    x = rand(rng, (16, 64), dtype)
    return (4,), [x, poison((64,), dtype)]


def _runtime_loop_expect(a):
    x = a[0].astype(np.float64)
    out = np.empty((4, 16))
    for p in range(4):
        acc = np.zeros(16)
        for k in range(p, 4):
            acc += x[:, k * 16 : (k + 1) * 16].sum(1)
        out[p] = acc
    return {1: out.reshape(-1).astype(a[0].dtype)}


@case("runtime_loop_bounds", _runtime_loop_make, _runtime_loop_expect)
@qnb.kernel
def runtime_loop_bounds(x, out):
    p = qnb.program_id(0)
    acc = Vec16.zeros(x.dtype)
    for k in range(p, x.shape[1] // 16):
        acc += Tile16.load(x, 0, k * 16).sum(axis=1)
    acc.store(out, p * 16)


def _scalar_make(rng, dtype):
    return (5,), [rand(rng, (5,), dtype), poison((5, 3), dtype), 2.5, 3]


def _scalar_expect(a):
    x, _out, s, n = a
    res = np.empty((5, 3))
    for p in range(5):
        v = float(x[p])
        acc = 0.0
        for k in range(n):
            acc = acc + v * s + k
        res[p] = [acc, max(v, 0.0), min(p * 2 - 3, n) // 2]
    return {1: res.astype(x.dtype)}


@case("scalar_arithmetic", _scalar_make, _scalar_expect)
@qnb.kernel
def scalar_arithmetic(x, out, s: qnb.f32, n: qnb.i32):
    p = qnb.program_id(0)
    v = x[p]
    acc = 0.0
    for k in range(n):
        acc = acc + v * s + k
    out[p, 0] = acc
    out[p, 1] = max(v, 0.0)
    out[p, 2] = min(p * 2 - 3, n) // 2


# ----------------------------------------------------------------------------- bits and math

SHIFT_COUNTS = (-1, 0, 31, 32, 40)  # NumPy defines every count; C++ and WGSL do not


def _bitwise_make(rng, dtype):
    x = rng.integers(-(2**31), 2**31, size=(32, 16), dtype=np.int64).astype(np.int32)
    counts = rng.integers(0, 32, size=(16, 16)).astype(np.int32)
    counts.flat[: 4 * len(SHIFT_COUNTS)] = np.repeat(SHIFT_COUNTS, 4)
    per_program = np.array([40, -1], np.int32)  # each program's scalar count
    return (2,), [x, counts, per_program, poison((16, 16, 16), I32), poison((128,), I32)]


def _bitwise_expect(a):
    x, c, n = a[0], a[1], a[2]
    tiles, rows = np.empty((16, 16, 16), np.int32), np.empty((2, 4, 16), np.int32)
    for p in range(2):
        t, k = x[p * 16 : (p + 1) * 16], n[p]
        tiles[p * 8 : (p + 1) * 8] = [
            t << c,
            t >> c,
            t & c,
            t | c,
            t ^ c,
            ~t,
            (t >> 4) & 0xF,
            (t << k) ^ (t >> k),
        ]
        s = t[0]
        rows[p] = [s << c[0], s >> k, ~(s & 0xF0F), (s | k) ^ c[1]]
    return {3: tiles, 4: rows.reshape(-1)}


@case("bitwise_i32", _bitwise_make, _bitwise_expect, dtypes=(I32,))
@qnb.kernel
def bitwise_i32(x, counts, shift, out, rows):
    p = qnb.program_id(0)
    t = Tile16.load(x, p * 16, 0)
    c = Tile16.load(counts, 0, 0)
    k = shift[p]
    (t << c).store(out[p * 8], 0, 0)
    (t >> c).store(out[p * 8 + 1], 0, 0)
    (t & c).store(out[p * 8 + 2], 0, 0)
    (t | c).store(out[p * 8 + 3], 0, 0)
    (t ^ c).store(out[p * 8 + 4], 0, 0)
    (~t).store(out[p * 8 + 5], 0, 0)
    ((t >> 4) & 0xF).store(out[p * 8 + 6], 0, 0)  # a nibble unpack
    ((t << k) ^ (t >> k)).store(out[p * 8 + 7], 0, 0)
    s = t.row(0)
    (s << c.row(0)).store(rows, p * 64)
    (s >> k).store(rows, p * 64 + 16)
    (~(s & 0xF0F)).store(rows, p * 64 + 32)
    ((s | k) ^ c.row(1)).store(rows, p * 64 + 48)


def _scalar_bits_make(rng, dtype):
    x = rng.integers(-(2**31), 2**31, size=(8,), dtype=np.int64).astype(np.int32)
    counts = np.array([-1, 0, 31, 32, 40, 5, -33, 1], np.int32)
    return (8,), [x, counts, poison((8, 6), I32)]


def _scalar_bits_expect(a):
    x, c = a[0], a[1]
    return {2: np.stack([x << c, x >> c, x & c, x | c, x ^ ~c, (x >> 28) & 7], axis=1)}


@case("scalar_bitwise", _scalar_bits_make, _scalar_bits_expect, dtypes=(I32,))
@qnb.kernel
def scalar_bitwise(x, counts, out):
    p = qnb.program_id(0)
    v = x[p]
    c = counts[p]
    out[p, 0] = v << c
    out[p, 1] = v >> c
    out[p, 2] = v & c
    out[p, 3] = v | c
    out[p, 4] = v ^ ~c
    out[p, 5] = (v >> 28) & 7


MATH = (np.exp2, np.log2, np.sin, np.cos, np.tanh, np.floor, np.ceil)


def _math_make(rng, dtype):
    x = rand(rng, (16, 16), dtype, -4.0, 4.0)
    return (1,), [x, poison((7, 16, 16), dtype), poison((7 * 16,), dtype), poison((7,), dtype)]


def _math_expect(a):
    x = a[0]
    positive = np.abs(x)  # log2 of |x|
    with np.errstate(all="ignore"):
        tiles = np.stack([f(positive if f is np.log2 else x) for f in MATH])
    return {1: tiles, 2: tiles[:, 3].reshape(-1), 3: tiles[:, 3, 7]}


@case("math_functions", _math_make, _math_expect, dtypes=(*FLOATS, BF16))
@qnb.kernel
def math_functions(x, out, vecs, scalars):
    t = Tile16.load(x, 0, 0)
    u = abs(t)
    qnb.exp2(t).store(out[0], 0, 0)
    qnb.log2(u).store(out[1], 0, 0)
    qnb.sin(t).store(out[2], 0, 0)
    qnb.cos(t).store(out[3], 0, 0)
    qnb.tanh(t).store(out[4], 0, 0)
    qnb.floor(t).store(out[5], 0, 0)
    qnb.ceil(t).store(out[6], 0, 0)
    v = t.row(3)
    qnb.exp2(v).store(vecs, 0)
    qnb.log2(abs(v)).store(vecs, 16)
    qnb.sin(v).store(vecs, 32)
    qnb.cos(v).store(vecs, 48)
    qnb.tanh(v).store(vecs, 64)
    qnb.floor(v).store(vecs, 80)
    qnb.ceil(v).store(vecs, 96)
    s = t[3, 7]
    scalars[0] = qnb.exp2(s)
    scalars[1] = qnb.log2(abs(s))
    scalars[2] = qnb.sin(s)
    scalars[3] = qnb.cos(s)
    scalars[4] = qnb.tanh(s)
    scalars[5] = qnb.floor(s)
    scalars[6] = qnb.ceil(s)


CASE_BY_NAME = {c.name: c for c in CASES}


def lowered(case, dtype, seed=0):
    """One launch of ``case`` as a backend takes it, without the kernel layer: (its
    KernelIR, the grid as 3 ints, the runtime arguments in parameter order)."""
    grid, args = case.make(np.random.default_rng(seed), dtype)
    grid = ((grid,) if isinstance(grid, int) else tuple(grid)) + (1, 1)
    kernel_ir, _ = case.kernel._lower_for(args)
    _, runtime_args = case.kernel._signature(args)
    return kernel_ir, grid[:3], runtime_args


def tolerance(dtype, case_name=""):
    """(rtol, atol) that fit the dtype (and how much arithmetic a case does)."""
    dtype = np.dtype(dtype)
    heavy = case_name in (
        "cholesky_offsets",
        "solve_triangular",
        "cholesky_then_solve",
        "tiled_matmul",
        "matmul_operator",
        "divergent_control_flow",
    )
    if dtype == np.float16:
        return (2e-2, 5e-2) if heavy else (5e-3, 5e-3)
    if dtype == np.dtype(BF16):  # one bf16 ulp is 2**-8 of the value
        return (5e-2, 5e-2) if heavy else (1e-2, 1e-2)
    if dtype == np.float32:
        return (2e-4, 2e-4) if heavy else (2e-5, 1e-5)
    if dtype == np.float64:
        return (1e-10, 1e-10)
    return (0, 0)


def run_case(c: Case, dtype, backend="cpu", seed=0):
    """Run a case on a backend; returns (args after the run, expected outputs)."""
    rng = np.random.default_rng(seed)
    grid, args = c.make(rng, dtype)
    inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with qnb.backend(backend):
        c.kernel[grid](*args)
    return args, c.expect(inputs)

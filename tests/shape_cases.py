"""Kernels over tiles of any shape (``Tile[M, N]``, ``Vec[N]``), each with an input maker
and an independent NumPy reference written directly here (not through qnb).

Each kernel takes its shape as ``qnb.Template`` parameters, so one kernel is compiled once
per shape. ``ShapeCase.make(rng, dtype, shape)`` returns the grid and the arguments (every
output poisoned: NaN, or a sentinel for integers); ``ShapeCase.expect(args, shape)``
returns the expected contents of each output argument by index. The cpu tests run every
case (``tests/backends/test_shapes_cpu.py``); the GPU backends run the same cases once
at the shapes ``test_shapes_cpu.GPU_SHAPES``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import qnb
from qnb import Tile, Vec
from tests.suite import F16, F32, F64, I32, poison, rand

# The shapes every case runs at (unless it says otherwise): a row, a column, wide,
# square, large, tall.
SHAPES = ((1, 16), (16, 1), (8, 32), (32, 32), (64, 64), (128, 32))
SQUARES = ((1, 1), (4, 4), (16, 16), (32, 32), (64, 64))


@dataclass
class ShapeCase:
    name: str
    kernel: qnb.Kernel
    make: Callable  # (rng, dtype, shape) -> (grid, args)
    expect: Callable  # (args, shape) -> {arg index: expected array}
    dtypes: tuple = (F32, F64)
    shapes: tuple = SHAPES
    tolerance: float = 0.0  # relative, for float results that sum (0: exact)

    def __repr__(self):
        return f"ShapeCase({self.name})"


SHAPE_CASES: list[ShapeCase] = []


def shape_case(name, make, expect, dtypes=(F32, F64), shapes=SHAPES, tolerance=0.0):
    def register(kernel):
        SHAPE_CASES.append(ShapeCase(name, kernel, make, expect, dtypes, shapes, tolerance))
        return kernel

    return register


def params():
    """(case, dtype, shape) for every case: the parametrisation the tests use."""
    return [(c, d, s) for c in SHAPE_CASES for d in c.dtypes for s in c.shapes]


def param_id(value) -> str:
    if isinstance(value, ShapeCase):
        return value.name
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    return np.dtype(value).name


def _padded(x, r, c, shape, other):
    """``Tile[shape].load(x, r, c, other=other)`` written out."""
    m, n = shape
    out = np.full((m, n), other, x.dtype)
    for i in range(m):
        for j in range(n):
            if 0 <= r + i < x.shape[0] and 0 <= c + j < x.shape[1]:
                out[i, j] = x[r + i, c + j]
    return out


# ----------------------------------------------------------------------------- memory


def _copy_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (3 * m + 1, 2 * n + 3), dtype)
    return (4, 3), [x, poison(x.shape, dtype), m, n]


def _copy_expect(a, shape):
    x, out = a[0], a[1].copy()
    m, n = shape
    rows, cols = min(4 * m, x.shape[0]), min(3 * n, x.shape[1])
    out[:rows, :cols] = x[:rows, :cols]
    return {1: out}


@shape_case("copy_tiles", _copy_make, _copy_expect, dtypes=(F32, F64, F16, I32))
@qnb.kernel
def copy_tiles(src, dst, M: qnb.Template, N: qnb.Template):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    t = Tile[M, N].load(src, i * M, j * N)
    t.store(dst, i * M, j * N)


def _offsets_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m + 3, n + 2), dtype, 1.0, 2.0)
    return (1,), [x, poison((4, m, n), dtype), poison((m + 6, n + 6), dtype), m, n]


_OFFSETS = ((-2, -3), (1, 1), (-1, 2), (3, -5))


def _offsets_expect(a, shape):
    x = a[0]
    m, n = shape
    out = np.empty((4, m, n), x.dtype)
    other = -7 if x.dtype.kind == "i" else -math.inf
    for k, (r, c) in enumerate(_OFFSETS):
        out[k] = _padded(x, r, c, shape, other)
    stored = a[2].copy()
    t = _padded(x, 0, 0, shape, 0)
    # t.store(stored, -1, 4): the elements before the array are not written
    for i in range(m):
        for j in range(n):
            if 0 <= i - 1 < stored.shape[0] and j + 4 < stored.shape[1]:
                stored[i - 1, j + 4] = t[i, j]
    return {1: out, 2: stored}


@shape_case("load_offsets_other", _offsets_make, _offsets_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def load_offsets_other(x, out, stored, M: qnb.Template, N: qnb.Template):
    other = -7 if x.dtype == qnb.i32 else -math.inf
    for k in qnb.static(range(4)):
        r, c = qnb.static(_OFFSETS[k])
        t = Tile[M, N].load(x, r, c, other=other)
        out[k, 0:M, 0:N] = t
    Tile[M, N].load(x, 0, 0).store(stored, -1, 4)


def _window_make(rng, dtype, shape):
    m, n = shape
    src = rand(rng, (m + 4, n + 5), dtype)
    return (1,), [src, poison((4, m, n), dtype), m, n]


def _windows(shape):
    m, n = shape
    rows, cols = m + 4, n + 5
    return [
        (0, rows, 0, cols),
        (m // 2, rows, n // 2 + 1, cols),
        (2, 2 + max(1, m // 3), 1, cols + 9),
        (rows - 2, rows + 5, cols - 2, cols + 20),
    ]


def _window_expect(a, shape):
    src = a[0]
    m, n = shape
    out = np.empty((4, m, n), src.dtype)
    for k, (r0, r1, c0, c1) in enumerate(_windows(shape)):
        t = np.full((m, n), -1, src.dtype)
        for i in range(m):
            for j in range(n):
                if r0 + i < min(r1, src.shape[0]) and c0 + j < min(c1, src.shape[1]):
                    t[i, j] = src[r0 + i, c0 + j]
        out[k] = t
    return {1: out}


@shape_case("load_window_edges", _window_make, _window_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def load_window_edges(src, out, M: qnb.Template, N: qnb.Template):
    rows = M + 4
    cols = N + 5
    t = Tile[M, N].full(-1, src.dtype)
    t.load_(src, 0, rows, 0, cols)
    out[0, 0:M, 0:N] = t
    t = Tile[M, N].full(-1, src.dtype)
    t[:] = src[M // 2 : rows, N // 2 + 1 : cols]
    out[1, 0:M, 0:N] = t
    t = Tile[M, N].full(-1, src.dtype)
    t.load_(src, 2, 2 + qnb.static(max(1, M // 3)), 1, cols + 9)
    out[2, 0:M, 0:N] = t
    t = Tile[M, N].full(-1, src.dtype)
    t.load_(src, rows - 2, rows + 5, cols - 2, cols + 20)
    out[3, 0:M, 0:N] = t


def _store_make(rng, dtype, shape):
    m, n = shape
    return (1,), [rand(rng, (m, n), dtype), rand(rng, (m + 7, n + 3), dtype), m, n]


def _store_windows(shape):
    m, n = shape
    rows, cols = m + 7, n + 3
    return [(0, max(1, m // 2), 0, n), (rows - 3, rows + 10, 2, cols), (1, 3, cols - 1, cols + 40)]


def _store_expect(a, shape):
    t, dst = a[0], a[1].copy()
    m, n = shape
    for r0, r1, c0, c1 in _store_windows(shape):
        for i in range(m):
            for j in range(n):
                if r0 + i < min(r1, dst.shape[0]) and c0 + j < min(c1, dst.shape[1]):
                    dst[r0 + i, c0 + j] = t[i, j]
    return {1: dst}


@shape_case("store_window_edges", _store_make, _store_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def store_window_edges(tile_src, dst, M: qnb.Template, N: qnb.Template):
    rows = M + 7
    cols = N + 3
    t = Tile[M, N].load(tile_src, 0, 0)
    t.store(dst, 0, qnb.static(max(1, M // 2)), 0, N)
    dst[rows - 3 : rows + 10, 2:cols] = t
    t.store(dst, 1, 3, cols - 1, cols + 40)


def _mixed_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m, n), F32)
    return (1,), [x, poison((m, n), F32), poison((m, n), F64), m, n]


def _mixed_expect(a, shape):
    return {1: a[0], 2: a[0].astype(F64)}


@shape_case("mixed_dtype_roundtrip", _mixed_make, _mixed_expect, dtypes=(F32,))
@qnb.kernel
def mixed_dtype_roundtrip(x, back, wide, M: qnb.Template, N: qnb.Template):
    t = Tile[M, N].zeros(qnb.f64)
    t.load_(x, 0, M, 0, N)  # f32 data into an f64 tile: exact
    t.store(wide, 0, 0)
    u = Tile[M, N].full(3.0, qnb.f64)
    u[:] = x[0:M, 0:N]
    back[0:M, 0:N] = u  # and back into f32: bit-exact


# ----------------------------------------------------------------------------- vecs


def _vec_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m + 2, n + 2), dtype, 1.0, 2.0)
    line = rand(rng, (n + 3,), dtype, 1.0, 2.0)
    return (1,), [
        x,
        line,
        poison((6, n), dtype),
        poison((2, m), dtype),
        poison(x.shape, dtype),
        poison(line.shape, dtype),
        m,
        n,
    ]


def _vec_expect(a, shape):
    x, line = a[0], a[1]
    m, n = shape
    other = -9
    rows = np.empty((6, n), x.dtype)

    def along(get, count, start):
        return np.array(
            [get(start + k) if get(start + k) is not None else other for k in range(count)],
            x.dtype,
        )

    def at_row(r):
        return lambda c: x[r, c] if 0 <= r < x.shape[0] and 0 <= c < x.shape[1] else None

    def at_line(i):
        return line[i] if 0 <= i < line.shape[0] else None

    rows[0] = along(at_line, n, -2)
    rows[1] = along(at_row(1), n, -1)
    rows[2] = along(at_row(m + 5), n, 0)  # a row outside the array: all other
    rows[3] = np.array([x[1, c] if c < min(n + 2, x.shape[1]) else 0 for c in range(2, 2 + n)])
    rows[4] = along(at_row(0), n, 3)
    rows[5] = np.arange(n).astype(x.dtype)
    cols = np.empty((2, m), x.dtype)
    cols[0] = np.array(
        [x[-2 + i, 1] if 0 <= -2 + i < x.shape[0] else other for i in range(m)], x.dtype
    )
    cols[1] = np.array([x[i, 0] if i < x.shape[0] else 0 for i in range(m)], x.dtype)
    written = a[4].copy()
    v = rows[4]
    for j in range(n):  # v.store_row(written, 1, -1)
        if 0 <= j - 1 < written.shape[1]:
            written[1, j - 1] = v[j]
    for i in range(m):  # cols[0] stored as a column at (m - 1, 2)
        if m - 1 + i < written.shape[0]:
            written[m - 1 + i, 2] = cols[0][i]
    for j in range(n):  # written[0, 1:n+1] = rows[1]
        if 1 + j < min(n + 1, written.shape[1]):
            written[0, 1 + j] = rows[1][j]
    stored_line = a[5].copy()
    for i in range(n):  # rows[0].store(stored_line, -1)
        if 0 <= i - 1 < stored_line.shape[0]:
            stored_line[i - 1] = rows[0][i]
    return {2: rows, 3: cols, 4: written, 5: stored_line}


@shape_case("vec_lines", _vec_make, _vec_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def vec_lines(x, line, rows, cols, written, stored_line, M: qnb.Template, N: qnb.Template):
    a = Vec[N].load(line, -2, other=-9)
    rows[0, 0:N] = a
    rows[1, 0:N] = Vec[N].load_row(x, 1, -1, other=-9)
    rows[2, 0:N] = Vec[N].load_row(x, M + 5, 0, other=-9)
    rows[3, 0:N] = Vec[N].load_row(x, 1, 2)
    v = Vec[N].load_row(x, 0, 3, other=-9)
    rows[4, 0:N] = v
    rows[5, 0:N] = qnb.arange(N, dtype=x.dtype)
    c = Vec[M].load_col(x, -2, 1, other=-9)
    cols[0, 0:M] = c
    cols[1, 0:M] = Vec[M].load(x, 0, M, 0)
    v.store_row(written, 1, -1)
    c.store_col(written, M - 1, 2)
    written[0, 1 : N + 1] = Vec[N].load_row(x, 1, -1, other=-9)
    a.store(stored_line, -1)


# ----------------------------------------------------------------------------- arithmetic


def _ew_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m, n), dtype, 0.5, 2.0)
    y = rand(rng, (m, n), dtype, 0.5, 2.0)
    row = rand(rng, (n,), dtype, 0.5, 2.0)
    col = rand(rng, (m,), dtype, 0.5, 2.0)
    return (1,), [x, y, row, col, *(poison((m, n), dtype) for _ in range(4)), m, n]


def _ew_expect(a, shape):
    x, y, row, col = a[:4]
    dtype = x.dtype
    with np.errstate(all="ignore"):
        if dtype.kind == "i":
            first = x * y + x // np.where(y == 0, 1, y) - row
            second = np.where(x > y, x, y) - col[:, None]
            third = (x - x.max(axis=1, keepdims=True)) + x.min(axis=0, keepdims=True)
            fourth = row[None, :] * col[:, None] + (x % 7)
        else:
            first = (x * y + x / y - row).astype(dtype)
            second = np.where(x > y, np.exp(x), y).astype(dtype) - col[:, None]
            third = (x - x.max(axis=1, keepdims=True)) + x.min(axis=0, keepdims=True)
            fourth = (row[None, :] * col[:, None] + np.sqrt(x)).astype(dtype)
    return {4: first, 5: second.astype(dtype), 6: third.astype(dtype), 7: fourth.astype(dtype)}


@shape_case("broadcast_elementwise", _ew_make, _ew_expect, dtypes=(F32, F64, I32), tolerance=1e-6)
@qnb.kernel
def broadcast_elementwise(x, y, row, col, o1, o2, o3, o4, M: qnb.Template, N: qnb.Template):
    a = Tile[M, N].load(x, 0, 0)
    b = Tile[M, N].load(y, 0, 0)
    r = Vec[N].load(row, 0)
    c = Vec[M].load(col, 0)
    if x.dtype == qnb.i32:
        (a * b + a // qnb.where(b == 0, 1, b) - r).store(o1, 0, 0)
        (qnb.where(a > b, a, b) - c[:, None]).store(o2, 0, 0)
        (r[None, :] * c[:, None] + a % 7).store(o4, 0, 0)
    else:
        (a * b + a / b - r).store(o1, 0, 0)
        (qnb.where(a > b, qnb.exp(a), b) - c[:, None]).store(o2, 0, 0)
        (r[None, :] * c[:, None] + qnb.sqrt(a)).store(o4, 0, 0)
    (a - a.max(axis=1, keepdims=True) + a.min(axis=0, keepdims=True)).store(o3, 0, 0)


def _softmax_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (2 * m, n - 1 if n > 1 else 1), dtype)
    return (2,), [x, poison(x.shape, dtype), m, n]


def _softmax_expect(a, shape):
    x = a[0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {1: (e / e.sum(axis=1, keepdims=True)).astype(a[0].dtype)}


@shape_case("row_softmax", _softmax_make, _softmax_expect, dtypes=(F32, F64), tolerance=1e-5)
@qnb.kernel
def row_softmax(x, out, M: qnb.Template, N: qnb.Template):
    i = qnb.program_id(0)
    t = Tile[M, N].load(x, i * M, 0, other=-math.inf)  # the edge counts for nothing
    e = qnb.exp(t - t.max(axis=1, keepdims=True))
    (e / e.sum(axis=1, keepdims=True)).store(out, i * M, 0)


# ----------------------------------------------------------------------------- shapes


def _reduce_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m, n), dtype)
    return (1,), [
        x,
        poison((n, m), dtype),
        poison((3, n), dtype),
        poison((3, m), dtype),
        poison((4,), dtype),
        m,
        n,
    ]


def _reduce_expect(a, shape):
    x = a[0]
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    sums = [x.sum(axis=0, dtype=acc), x.max(axis=0), x.min(axis=0)]
    by_row = [x.sum(axis=1, dtype=acc), x.max(axis=1), x.min(axis=1)]
    return {
        1: x.T,
        2: np.array(sums).astype(x.dtype),
        3: np.array(by_row).astype(x.dtype),
        4: np.array([x.sum(dtype=acc), x.max(), x.min(), x[shape[0] - 1, 0]]).astype(x.dtype),
    }


@shape_case(
    "transpose_and_reduce", _reduce_make, _reduce_expect, dtypes=(F32, F64, I32), tolerance=1e-5
)
@qnb.kernel
def transpose_and_reduce(x, out_t, over_rows, over_cols, scalars, M: qnb.Template, N: qnb.Template):
    t = Tile[M, N].load(x, 0, 0)
    t.T.store(out_t, 0, 0)
    over_rows[0, 0:N] = t.sum(axis=0)
    over_rows[1, 0:N] = t.max(axis=0)
    over_rows[2, 0:N] = t.min(axis=0)
    over_cols[0, 0:M] = t.sum(axis=1)
    over_cols[1, 0:M] = t.max(axis=1)
    over_cols[2, 0:M] = t.min(axis=1)
    scalars[0] = t.sum()
    scalars[1] = t.max()
    scalars[2] = t.min()
    scalars[3] = t[M - 1, 0]


def _rowcol_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (m, n), dtype)
    return (1,), [x, poison((2, max(m, n)), dtype), poison((m, n), dtype), m, n]


def _rowcol_expect(a, shape):
    x = a[0]
    m, n = shape
    lines = a[1].copy()
    lines[0, :n] = x[m - 1]
    lines[1, :m] = x[:, n - 1]
    t = x.copy()
    t[0, n - 1] = 5
    t[m - 1, 0] = t[0, 0] + 1
    return {1: lines, 2: t}


@shape_case("rows_cols_elements", _rowcol_make, _rowcol_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def rows_cols_elements(x, lines, out, M: qnb.Template, N: qnb.Template):
    t = Tile[M, N].load(x, 0, 0)
    lines[0, 0:N] = t.row(M - 1)
    lines[1, 0:M] = t.col(N - 1)
    t[0, N - 1] = 5
    t[M - 1, 0] = t[0, 0] + 1
    t.store(out, 0, 0)


# ----------------------------------------------------------------------------- linear algebra

MATMUL_SHAPES = ((1, 16, 8), (16, 1, 4), (8, 32, 16), (32, 32, 32), (64, 64, 16), (128, 32, 8))


def _mm_make(rng, dtype, shape):
    m, n, k = shape
    a = rand(rng, (m, k), dtype)
    b = rand(rng, (k, n), dtype)
    acc = rand(rng, (m, n), F32 if dtype == F16 else dtype)
    out_dtype = F32 if dtype == F16 else dtype
    return (1,), [a, b, acc, poison((m, n), out_dtype), poison((m, n), out_dtype), m, n, k]


def _mm_expect(a, shape):
    x, y, acc = a[0], a[1], a[2]
    wide = np.int64 if x.dtype.kind == "i" else np.float64
    product = x.astype(wide) @ y.astype(wide)
    out = a[3].dtype
    if x.dtype.kind == "i":
        product = product.astype(np.int32)  # wraps, as i32 @ does
    return {3: product.astype(out), 4: (acc.astype(wide) + product).astype(out)}


@shape_case(
    "matmul_mma",
    _mm_make,
    _mm_expect,
    dtypes=(F32, F64, F16, I32),
    shapes=MATMUL_SHAPES,
    tolerance=1e-4,
)
@qnb.kernel
def matmul_mma(a, b, acc, out, out_acc, M: qnb.Template, N: qnb.Template, K: qnb.Template):
    x = Tile[M, K].load(a, 0, 0)
    y = Tile[K, N].load(b, 0, 0)
    (x @ y).store(out, 0, 0)
    qnb.mma(x, y, Tile[M, N].load(acc, 0, 0)).store(out_acc, 0, 0)


def _outer_make(rng, dtype, shape):
    m, n = shape
    return (1,), [
        rand(rng, (m,), dtype),
        rand(rng, (n,), dtype),
        rand(rng, (m, n), dtype),
        poison((3, m, n), dtype),
        m,
        n,
    ]


def _outer_expect(a, shape):
    u, v, t = a[0], a[1], a[2]
    o = np.outer(u, v).astype(u.dtype)
    return {3: np.array([o, t + o, t - o]).astype(u.dtype)}


@shape_case("outer_updates", _outer_make, _outer_expect, dtypes=(F32, F64, I32))
@qnb.kernel
def outer_updates(u, v, t, out, M: qnb.Template, N: qnb.Template):
    a = Vec[M].load(u, 0)
    b = Vec[N].load(v, 0)
    out[0, 0:M, 0:N] = qnb.outer(a, b)
    x = Tile[M, N].load(t, 0, 0)
    x += qnb.outer(a, b)
    out[1, 0:M, 0:N] = x
    y = Tile[M, N].load(t, 0, 0)
    y -= qnb.outer(a, b)
    out[2, 0:M, 0:N] = y


def spd(rng, count, dtype, size):
    m = rng.uniform(-1, 1, size=(count, size, size))
    return (m @ m.transpose(0, 2, 1) + size * np.eye(size)).astype(dtype)


def _chol_make(rng, dtype, shape):
    n = shape[0]
    a = spd(rng, 1, dtype, n)[0]
    return (1,), [
        a,
        rand(rng, (3, n), dtype),
        poison((n, n), dtype),
        poison((3, n), dtype),
        poison((2, n, n), dtype),
        n,
    ]


def _chol_expect(a, shape):
    x, rhs = a[0].astype(np.float64), a[1].astype(np.float64)
    n = shape[0]
    lower = np.linalg.cholesky(x)
    solved = np.linalg.solve(lower, rhs.T).T  # X @ L.T == B
    eye = np.eye(n)
    return {
        2: lower.astype(a[0].dtype),
        3: solved.astype(a[0].dtype),
        4: np.array([eye, eye]).astype(a[0].dtype),
    }


@shape_case(
    "cholesky_solve_eye",
    _chol_make,
    _chol_expect,
    dtypes=(F32, F64),
    shapes=SQUARES,
    tolerance=1e-4,
)
@qnb.kernel
def cholesky_solve_eye(a, rhs, lower, solved, eyes, N: qnb.Template):
    t = Tile[N, N].load(a, 0, 0)
    t.cholesky_(0.0)
    t.store(lower, 0, 0)
    b = Tile[4, N].load(rhs, 0, 0)  # three rows of B, and a fourth past the array
    t.solve_triangular_(b)
    b.store(solved, 0, 0)
    eyes[0, 0:N, 0:N] = Tile[N, N].eye(a.dtype)
    e = Tile[N, N].full(3.0, a.dtype)
    e.eye_()
    eyes[1, 0:N, 0:N] = e


def _chol_offsets_make(rng, dtype, shape):
    n = shape[0]
    count = 4
    big = rand(rng, (3 * n + 5, 4 * n + 7), dtype)
    offsets = [(0, 0), (3, n + 4), (2 * n + 5, 2 * n + 1), (n, 3 * n + 7)]
    for (r, c), m in zip(offsets, spd(rng, count, dtype, n)):
        big[r : r + n, c : c + n] = m
    rows = np.array([o[0] for o in offsets], np.int32)
    cols = np.array([o[1] for o in offsets], np.int32)
    return (count,), [big, rows, cols, poison((count, n, n), dtype), n]


def _chol_offsets_expect(a, shape):
    big, rows, cols, out, n = a
    lower = [
        np.linalg.cholesky(big[r : r + n, c : c + n].astype(np.float64)) for r, c in zip(rows, cols)
    ]
    return {3: np.stack(lower).astype(out.dtype)}


@shape_case(
    "cholesky_offsets",
    _chol_offsets_make,
    _chol_offsets_expect,
    shapes=((16, 16), (32, 32), (64, 64), (2, 2)),
    tolerance=1e-4,
)
@qnb.kernel
def cholesky_offsets(big, rows, cols, out, N: qnb.Template):
    p = qnb.program_id(0)
    r = rows[p]
    c = cols[p]
    t = Tile[N, N].zeros(big.dtype)
    t.load_(big, r, r + N, c, c + N)
    t.cholesky_(1e-10)
    out[p, 0:N, 0:N] = t


def _spd_solve_make(rng, dtype, shape):
    n = shape[0]
    count = 3
    return (count,), [
        spd(rng, count, dtype, n),
        rand(rng, (count, 2 * n, n), dtype),
        poison((count, 2 * n, n), dtype),
        n,
    ]


def _spd_solve_expect(a, shape):
    m, rhs, out, _n = a
    x = np.linalg.solve(m.astype(np.float64), rhs.astype(np.float64).transpose(0, 2, 1))
    return {2: x.transpose(0, 2, 1).astype(out.dtype)}


@shape_case(
    "cholesky_then_solve",
    _spd_solve_make,
    _spd_solve_expect,
    shapes=((16, 16), (32, 32), (8, 8)),
    tolerance=1e-4,
)
@qnb.kernel
def cholesky_then_solve(m, rhs, out, N: qnb.Template):
    b = qnb.program_id(0)
    A = Tile[N, N].load(m[b], 0, 0)
    A.cholesky_(1e-10)
    X = Tile[2 * N, N].load(rhs[b], 0, 0)  # B: Tile[M, N] with M = 2N
    A.solve_triangular_(X)  # X = B L^-T
    inverse_t = Tile[N, N].eye(m.dtype)
    A.solve_triangular_(inverse_t)  # L^-T
    (X @ inverse_t.T).store(out[b], 0, 0)  # B L^-T L^-1 = B (L L^T)^-1


# ----------------------------------------------------------------------------- aligned blocks
# Whole-block loads and stores in launch order, strips shared by every program and slabs
# of a 3-D array take the cpu interpreter's block paths: the same answers as elementwise.


def _aligned_make(rng, dtype, shape):
    m, n = shape
    x = rand(rng, (4 * m, 3 * n), dtype)
    x3 = rand(rng, (12, m, n), dtype)
    return (4, 3), [
        x,
        x3,
        poison(x.shape, dtype),
        poison((4 * m, n), dtype),
        poison(x3.shape, dtype),
        m,
        n,
    ]


def _aligned_expect(a, shape):
    x, x3 = a[0], a[1]
    m, n = shape
    strips = x.reshape(4 * m, 3, n).sum(
        axis=1, dtype=np.float64 if x.dtype.kind == "f" else np.int64
    )
    return {2: x * 2, 3: strips.astype(x.dtype), 4: x3 + 1}


@shape_case(
    "aligned_blocks", _aligned_make, _aligned_expect, dtypes=(F32, F64, I32), tolerance=1e-6
)
@qnb.kernel
def aligned_blocks(x, x3, doubled, strips, slabs, M: qnb.Template, N: qnb.Template):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    t = Tile[M, N].load(x, i * M, j * N)  # programs tile x in launch order
    (t * 2).store(doubled, i * M, j * N)
    acc = Tile[M, N].zeros(x.dtype)
    for k in range(0, x.shape[1], N):  # a strip of blocks, the same in every program
        acc += Tile[M, N].load(x, i * M, k)
    if j == 0:
        acc.store(strips, i * M, 0)
    b = i + j * 4  # the flat launch index: consecutive slabs
    (Tile[M, N].load(x3[b], 0, 0) + 1).store(slabs[b], 0, 0)

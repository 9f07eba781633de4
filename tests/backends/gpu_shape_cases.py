"""Hand-built IR kernels of tiles and vecs of many shapes, for the GPU layouts.

Each case builds IR directly (no front end) and says what NumPy computes for it, so the
GPU backends' layouts for every shape (``qnb.backends.gpu``: P threads, fragments of
``max(1, S // P)`` slots, exchanges through scratch) are checked with no front end:
``test_gpu_shapes.py`` runs them on wgpu and cuda-host (poisoned outputs) and on cpu where
the cpu backend holds the shape, and NVRTC-compiles them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from qnb import dtypes as D
from qnb import ir

L = ir.Loc(0, 1)
I32 = D.i32


@dataclass
class ShapeCase:
    name: str
    kernel: ir.KernelIR
    inputs: dict
    expect: Callable[[dict], dict]  # inputs -> {output name: expected array}
    rtol: float = 1e-5
    threads: tuple = field(default=(None,))  # threads= options to run it with


def c(value, dtype=I32) -> ir.Const:
    return ir.Const(ir.scalar(dtype), L, value)


def add(a, b) -> ir.Expr:
    return ir.Binary(a.type, L, "add", a, b)


def arr(name, dtype, ndim=2) -> ir.Param:
    return ir.Param(name, ir.Type("array", dtype, ndim))


def var(name, typ) -> ir.Var:
    return ir.Var(typ, L, name)


def full(typ, value) -> ir.TileFill:
    return ir.TileFill(typ, L, "full", c(value, typ.dtype))


def load(param, shape, r0=0, c0=0, dtype=None, base=0, padded=False) -> ir.LoadWindow:
    typ = ir.tile(dtype or param.type.dtype, shape)
    r, col = c(r0), c(c0)
    return ir.LoadWindow(
        typ,
        L,
        full(typ, base),
        ir.ArrayView(param.name, param.type),
        r,
        add(r, c(shape[0])),
        col,
        add(col, c(shape[1])),
        padded,
    )


def store(value, param, r0=0, c0=0) -> ir.StoreWindow:
    m, n = value.type.shape
    return ir.StoreWindow(
        L, value, ir.ArrayView(param.name, param.type), c(r0), c(r0 + m), c(c0), c(c0 + n)
    )


def vload(param, n, start=0, col=None, axis=0, other=None) -> ir.VecLoad:
    return ir.VecLoad(
        ir.vec(param.type.dtype, n),
        L,
        ir.ArrayView(param.name, param.type),
        c(start),
        c(start + n),
        None if col is None else c(col),
        None if other is None else c(other, param.type.dtype),
        True,
        axis,
    )


def vstore(value, param, start=0, col=None, axis=0) -> ir.VecStore:
    n = value.type.shape[0]
    return ir.VecStore(
        L,
        value,
        ir.ArrayView(param.name, param.type),
        c(start),
        c(start + n),
        None if col is None else c(col),
        True,
        axis,
    )


def kernel(name, params, body, locals_) -> ir.KernelIR:
    return ir.KernelIR(name, params, body, locals_, [ir.Unit(name)])


def rand(shape, dtype=D.f32, seed=0):
    rng = np.random.default_rng(seed)
    if dtype is I32:
        return rng.integers(-9, 9, size=shape).astype(np.int32)
    return rng.uniform(-2, 2, size=shape).astype(dtype.numpy)


def out_of(shape, dtype=D.f32):
    """A poisoned output: every element a GPU fails to write shows."""
    return np.full(shape, -7 if dtype is I32 else np.nan, dtype.numpy)


SHAPES = [(1, 64), (64, 1), (4, 8), (16, 16), (32, 8), (64, 64), (128, 32)]


def unary_binary(shape, dtype):
    """out = exp(t) * u + arange-row (through a free broadcast) + 2 (elementwise, with a
    broadcast vec)."""
    a, b, out = arr("a", dtype), arr("b", dtype), arr("out", dtype)
    t = ir.tile(dtype, shape)
    row = ir.TileFill(ir.vec(dtype, shape[1]), L, "arange", None)
    body = [
        ir.Assign(L, "t", load(a, shape)),
        ir.Assign(L, "u", load(b, shape)),
        ir.Assign(
            L,
            "r",
            add(
                add(
                    ir.Binary(
                        t,
                        L,
                        "mul",
                        ir.Unary(t, L, "exp", var("t", t)) if dtype.is_float else var("t", t),
                        var("u", t),
                    ),
                    ir.Broadcast(t, L, row),
                ),
                full(t, 2),
            ),
        ),
        store(var("r", t), out),
    ]
    inputs = {"a": rand(shape, dtype), "b": rand(shape, dtype, 1), "out": out_of(shape, dtype)}

    def expect(x):
        first = np.exp(x["a"].astype(np.float64)) if dtype.is_float else x["a"]
        return {"out": first * x["b"] + np.arange(shape[1]) + 2}

    return kernel("unary_binary", [a, b, out], body, {"t": t, "u": t, "r": t}), inputs, expect


def transpose(shape, dtype):
    a, out = arr("a", dtype), arr("out", dtype)
    t, tt = ir.tile(dtype, shape), ir.tile(dtype, shape[::-1])
    body = [
        ir.Assign(L, "t", load(a, shape)),
        ir.Assign(L, "r", ir.Transpose(tt, L, var("t", t))),
        store(var("r", tt), out),
    ]
    inputs = {"a": rand(shape, dtype), "out": out_of(shape[::-1], dtype)}
    return (
        kernel("transpose", [a, out], body, {"t": t, "r": tt}),
        inputs,
        lambda x: {"out": x["a"].T},
    )


def reduce(shape, dtype, op):
    """total (a scalar, stored to s[0]); rows (axis 1, stored to a column of vo); cols
    (axis 0, stored as a row of ho)."""
    a = arr("a", dtype)
    s, vo, ho = arr("s", dtype, 1), arr("vo", dtype), arr("ho", dtype)
    m, n = shape
    t = ir.tile(dtype, shape)
    total = ir.Reduce(ir.scalar(dtype), L, op, var("t", t), None)
    body = [
        ir.Assign(L, "t", load(a, shape)),
        ir.ArrayStore(L, ir.ArrayView("s", s.type), [c(0)], total),
        ir.Assign(L, "rows", ir.Reduce(ir.vec(dtype, m), L, op, var("t", t), 1)),
        ir.Assign(L, "cols", ir.Reduce(ir.vec(dtype, n), L, op, var("t", t), 0)),
        vstore(var("rows", ir.vec(dtype, m)), vo, col=1, axis=0),
        vstore(var("cols", ir.vec(dtype, n)), ho, col=0, axis=1),
    ]
    inputs = {
        "a": rand(shape, dtype),
        "s": out_of((1,), dtype),
        "vo": out_of((m, 2), dtype),
        "ho": out_of((1, n), dtype),
    }
    f = {"sum": np.sum, "max": np.max, "min": np.min}[op]

    def expect(x):
        vo = x["vo"].copy()
        vo[:, 1] = f(x["a"], axis=1)
        return {"s": np.array([f(x["a"])]), "vo": vo, "ho": f(x["a"], axis=0)[None, :]}

    locs = {"t": t, "rows": ir.vec(dtype, m), "cols": ir.vec(dtype, n)}
    return kernel(f"reduce_{op}", [a, s, vo, ho], body, locs), inputs, expect


def matmul(m, k, n, dtype, acc=True):
    a, b, out = (
        arr("a", dtype),
        arr("b", dtype),
        arr("out", D.f32 if dtype in (D.f16, D.bf16) else dtype),
    )
    work = out.type.dtype
    ta, tb, tc = ir.tile(dtype, (m, k)), ir.tile(dtype, (k, n)), ir.tile(work, (m, n))
    accumulator = full(tc, 1) if acc else None
    body = [
        ir.Assign(L, "x", load(a, (m, k))),
        ir.Assign(L, "y", load(b, (k, n))),
        ir.Assign(L, "r", ir.Matmul(tc, L, var("x", ta), var("y", tb), accumulator)),
        store(var("r", tc), out),
    ]
    inputs = {"a": rand((m, k), dtype), "b": rand((k, n), dtype, 1), "out": out_of((m, n), work)}

    def expect(x):
        product = x["a"].astype(np.float64) @ x["b"].astype(np.float64)
        return {"out": product + (1 if acc else 0)}

    return kernel("matmul", [a, b, out], body, {"x": ta, "y": tb, "r": tc}), inputs, expect


def outer_rowcol(shape, dtype):
    """out = outer(t.col(1) (Vec[M]), t.row(0) (Vec[N])) with u[0, 0] set to t[m-1, n-1]."""
    a, out = arr("a", dtype), arr("out", dtype)
    m, n = shape
    t = ir.tile(dtype, shape)
    col = ir.RowCol(ir.vec(dtype, m), L, "col", var("t", t), c(min(1, n - 1)))
    row = ir.RowCol(ir.vec(dtype, n), L, "row", var("t", t), c(0))
    got = ir.TileGet(ir.scalar(dtype), L, var("t", t), c(m - 1), c(n - 1))
    body = [
        ir.Assign(L, "t", load(a, shape)),
        ir.Assign(L, "r", ir.TileSet(t, L, ir.Outer(t, L, col, row), c(0), c(0), got)),
        store(var("r", t), out),
    ]
    inputs = {"a": rand(shape, dtype), "out": out_of(shape, dtype)}

    def expect(x):
        a = x["a"].astype(np.float64)
        r = np.outer(a[:, min(1, n - 1)], a[0, :])
        r[0, 0] = a[m - 1, n - 1]
        return {"out": r}

    return kernel("outer_rowcol", [a, out], body, {"t": t, "r": t}), inputs, expect


def broadcast_reshape(shape, dtype):
    """out = t - max(t, axis=1)[:, None] (a general broadcast of Tile[M, 1]) + the column
    vec v (loaded along axis 0) reshaped to Tile[M, 1] and broadcast."""
    a, out = arr("a", dtype), arr("out", dtype)
    m, n = shape
    t = ir.tile(dtype, shape)
    col_t = ir.tile(dtype, (m, 1))
    rows = ir.Reduce(ir.vec(dtype, m), L, "max", var("t", t), 1)
    keep = ir.Reshape(col_t, L, rows)
    v = ir.Reshape(col_t, L, vload(a, m, col=n - 1, axis=0))
    body = [
        ir.Assign(L, "t", load(a, shape)),
        ir.Assign(
            L,
            "r",
            add(
                ir.Binary(t, L, "sub", var("t", t), ir.Broadcast(t, L, keep)),
                ir.Broadcast(t, L, v),
            ),
        ),
        store(var("r", t), out),
    ]
    inputs = {"a": rand(shape, dtype), "out": out_of(shape, dtype)}

    def expect(x):
        a = x["a"].astype(np.float64)
        return {"out": a - a.max(axis=1, keepdims=True) + a[:, n - 1 : n]}

    return kernel("broadcast_reshape", [a, out], body, {"t": t, "r": t}), inputs, expect


def padded_window(shape, dtype):
    """A padded load at (-1, -2) with other=5 (the elements before the array keep 5),
    then stored at (1, 2) (the shift back: out == a inside, 5 in the pad)."""
    a, out = arr("a", dtype), arr("out", dtype)
    m, n = shape
    t = ir.tile(dtype, shape)
    body = [
        ir.Assign(L, "t", load(a, shape, -1, -2, base=5, padded=True)),
        store(var("t", t), out),
    ]
    inputs = {"a": rand(shape, dtype), "out": out_of(shape, dtype)}

    def expect(x):
        r = np.full(shape, 5, np.float64)
        r[1:, 2:] = x["a"][: m - 1, : n - 2]
        return {"out": r}

    return kernel("padded_window", [a, out], body, {"t": t}), inputs, expect


def cholesky_solve(n, m, dtype):
    """out = solve_triangular(cholesky(a a^T + n I), b) (b: Tile[M, N])."""
    a, b, out = arr("a", dtype), arr("b", dtype), arr("out", dtype)
    t, u = ir.tile(dtype, (n, n)), ir.tile(dtype, (m, n))
    eye = ir.TileFill(t, L, "eye", None)
    spd = add(
        ir.Matmul(t, L, var("t", t), ir.Transpose(t, L, var("t", t)), None),
        ir.Binary(t, L, "mul", eye, c(float(n), dtype)),
    )
    body = [
        ir.Assign(L, "t", load(a, (n, n))),
        ir.Assign(L, "u", load(b, (m, n))),
        ir.Assign(L, "l", ir.Cholesky(t, L, spd, c(1e-6, dtype))),
        ir.Assign(L, "r", ir.SolveTriangular(u, L, var("l", t), var("u", u))),
        store(var("r", u), out),
    ]
    inputs = {"a": rand((n, n), dtype), "b": rand((m, n), dtype, 1), "out": out_of((m, n), dtype)}

    def expect(x):
        a = x["a"].astype(np.float64)
        chol = np.linalg.cholesky(a @ a.T + n * np.eye(n))
        return {"out": np.linalg.solve(chol, x["b"].astype(np.float64).T).T}

    locs = {"t": t, "u": u, "l": t, "r": u}
    return kernel("cholesky_solve", [a, b, out], body, locs), inputs, expect


def vec_ops(n, dtype):
    """A 1-D vec: v = load(x) + arange; w = v[::-1]-free ops: sum to a scalar, v set at 0,
    stored to a 1-D array and as a column of a 2-D array."""
    x, out, col = arr("x", dtype, 1), arr("out", dtype, 1), arr("col", dtype)
    vt = ir.vec(dtype, n)
    total = ir.Reduce(ir.scalar(dtype), L, "sum", var("v", vt), None)
    body = [
        ir.Assign(L, "v", add(vload(x, n), ir.TileFill(vt, L, "arange", None))),
        ir.Assign(L, "w", ir.TileSet(vt, L, var("v", vt), c(0), None, total)),
        vstore(var("w", vt), out),
        vstore(var("v", vt), col, col=0, axis=0),
    ]
    inputs = {"x": rand((n,), dtype), "out": out_of((n,), dtype), "col": out_of((n, 1), dtype)}

    def expect(values):
        v = values["x"].astype(np.float64) + np.arange(n)
        w = v.copy()
        w[0] = v.sum()
        return {"out": w, "col": v[:, None]}

    return kernel("vec_ops", [x, out, col], body, {"v": vt, "w": vt}), inputs, expect


def all_cases() -> list[ShapeCase]:
    cases = []

    def add_case(name, built, rtol=1e-5, threads=(None,)):
        cases.append(ShapeCase(name, *built, rtol=rtol, threads=threads))

    for shape in SHAPES:
        tag = f"{shape[0]}x{shape[1]}"
        add_case(f"unary_binary_{tag}_f32", unary_binary(shape, D.f32), threads=(None, 16, 256))
        add_case(f"unary_binary_{tag}_i32", unary_binary(shape, I32))
        add_case(f"transpose_{tag}", transpose(shape, D.f32), threads=(None, 32))
        for op in ("sum", "max"):
            add_case(f"reduce_{op}_{tag}", reduce(shape, D.f32, op), rtol=1e-4)
        add_case(f"outer_rowcol_{tag}", outer_rowcol(shape, D.f32))
        add_case(f"broadcast_reshape_{tag}", broadcast_reshape(shape, D.f32))
        if shape[0] > 1 and shape[1] > 2:
            add_case(f"padded_window_{tag}", padded_window(shape, D.f32))
    for m, k, n in [
        (16, 16, 16),
        (1, 64, 32),
        (64, 1, 8),
        (64, 64, 64),
        (128, 32, 16),
        (32, 128, 32),
    ]:
        add_case(f"matmul_{m}x{k}x{n}", matmul(m, k, n, D.f32), rtol=1e-4, threads=(None, 64))
    add_case("matmul_32x16x64_i32", matmul(32, 16, 64, I32, acc=False))
    for n, m in [(8, 4), (32, 32), (32, 64), (64, 16)]:
        add_case(f"cholesky_solve_{n}_{m}", cholesky_solve(n, m, D.f32), rtol=1e-3)
    for n in (1, 8, 64, 1024, 4096):
        add_case(f"vec_ops_{n}", vec_ops(n, D.f32), rtol=1e-4)
    return cases


HALF_CASES = {  # cuda only: f16/bf16 products (tensor cores where the shapes allow)
    f"matmul_{m}x{k}x{n}_{d}": (m, k, n, dtype)
    for m, k, n in [(16, 16, 16), (64, 32, 64), (32, 64, 16), (8, 16, 4)]
    for d, dtype in (("f16", D.f16), ("bf16", D.bf16))
}

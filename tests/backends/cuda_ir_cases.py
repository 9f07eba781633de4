"""Hand-built IR kernels: every IR op at every dtype it accepts, with no front end.

Each case is a ``KernelIR`` plus the NumPy inputs to launch it with, so the same cases
serve the no-GPU NVRTC compile test (``test_cuda_compile.py``) and the cuda-vs-cpu
differential test on a GPU (``test_cuda.py``). Kernels read a tile from ``a`` (and ``b``),
apply one op, and store the result into ``out``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qnb import dtypes as D
from qnb import ir

FLOATS = (D.f16, D.bf16, D.f32, D.f64)
HALVES = (D.f16, D.bf16)  # products accumulate in f32
NUMERIC = (*FLOATS, D.i32)
L = ir.Loc(0, 1)


def _loc(line: int) -> ir.Loc:
    return ir.Loc(0, line)


@dataclass
class Case:
    name: str
    kernel: ir.KernelIR
    inputs: dict  # param name -> numpy array or Python scalar
    grid: tuple[int, int, int] = (1, 1, 1)
    rtol: float = 1e-5


# --------------------------------------------------------------------------- builders


def const(value, dtype) -> ir.Const:
    return ir.Const(ir.scalar(dtype), L, value)


def var(name, typ) -> ir.Var:
    return ir.Var(typ, L, name)


def view(param: ir.Param, batch=None) -> ir.ArrayView:
    return ir.ArrayView(param.name, param.type, batch)


def zeros(kind, dtype) -> ir.TileFill:
    return ir.TileFill(
        ir.tile(dtype) if kind == "tile" else ir.vec(dtype), L, "full", const(0, dtype)
    )


def tile_load(param: ir.Param, row=0, col=0, batch=None, line=2) -> ir.LoadWindow:
    dtype = param.type.dtype
    r0, c0 = const(row, D.i32), const(col, D.i32)
    r1 = ir.Binary(ir.scalar(D.i32), L, "add", r0, const(16, D.i32))
    c1 = ir.Binary(ir.scalar(D.i32), L, "add", c0, const(16, D.i32))
    return ir.LoadWindow(
        ir.tile(dtype), _loc(line), zeros("tile", dtype), view(param, batch), r0, r1, c0, c1
    )


def tile_store(value, param: ir.Param, batch=None, line=9) -> ir.StoreWindow:
    return ir.StoreWindow(
        _loc(line),
        value,
        view(param, batch),
        const(0, D.i32),
        const(16, D.i32),
        const(0, D.i32),
        const(16, D.i32),
    )


def array(name, dtype, ndim=2) -> ir.Param:
    return ir.Param(name, ir.Type("array", dtype, ndim))


def cast(expr, dtype):
    if expr.type.dtype is dtype:
        return expr
    return ir.Cast(expr.type.with_dtype(dtype), L, expr)


def rand(dtype, shape=(16, 16), low=-4, high=4, seed=0):
    rng = np.random.default_rng(seed)
    if dtype is D.i32:
        return rng.integers(low, high, size=shape).astype(np.int32)
    if dtype is D.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(low, high, size=shape).astype(dtype.numpy)


def tile_kernel(name, dtype, make, out_dtype=None, extra_params=(), positive=False):
    """``out = make(t, u, s)`` with t, u tiles loaded from a, b and s a scalar parameter."""
    out_dtype = out_dtype or dtype
    a, b, out = array("a", dtype), array("b", dtype), array("out", out_dtype)
    s = ir.Param("s", ir.scalar(dtype))
    t, u = var("t", ir.tile(dtype)), var("u", ir.tile(dtype))
    result = make(t, u, var("s", ir.scalar(dtype)))
    body = [
        ir.Assign(_loc(2), "t", tile_load(a)),
        ir.Assign(_loc(3), "u", tile_load(b, line=3)),
        ir.Assign(_loc(4), "r", result),
        tile_store(var("r", result.type), out),
    ]
    kernel = ir.KernelIR(
        name,
        [a, b, out, s, *extra_params],
        body,
        {"t": t.type, "u": u.type, "r": result.type},
        [ir.Unit(name)],
    )
    low = 0.5 if positive else -4
    inputs = {
        "a": rand(dtype, low=low),
        "b": rand(dtype, low=low, seed=1),
        "out": np.zeros((16, 16), out_dtype.numpy),
        "s": 1.5 if dtype.is_float else 3,
    }
    return kernel, inputs


# --------------------------------------------------------------------------- cases


def elementwise_cases():
    for dtype in NUMERIC:
        ops = ["add", "sub", "mul", "floordiv", "mod", "max", "min"]
        if dtype.is_float:
            ops += ["div", "pow"]
        for op in ops:

            def make(t, u, s, op=op):
                rhs = u if op != "pow" else ir.Unary(u.type, L, "abs", u)
                if op in ("floordiv", "mod", "div"):  # keep divisors away from 0
                    rhs = ir.Binary(
                        u.type,
                        L,
                        "max",
                        ir.Unary(u.type, L, "abs", u),
                        ir.TileFill(u.type, L, "full", const(1, u.type.dtype)),
                    )
                if op == "pow":
                    t = ir.Unary(t.type, L, "abs", t)
                return ir.Binary(t.type, L, op, t, rhs)

            yield Case(f"binary_{op}_{dtype}", *tile_kernel(f"binary_{op}", dtype, make))
            # tile with scalar broadcast
            yield Case(
                f"binary_{op}_scalar_{dtype}",
                *tile_kernel(
                    f"binary_{op}_scalar",
                    dtype,
                    lambda t, u, s, op=op: ir.Binary(
                        t.type, L, op, ir.Unary(t.type, L, "abs", t) if op == "pow" else t, s
                    ),
                ),
            )
        unary = ["neg", "abs"] + (list(ir.MATH_OPS) if dtype.is_float else ["invert"])
        for op in unary:
            yield Case(
                f"unary_{op}_{dtype}",
                *tile_kernel(
                    f"unary_{op}",
                    dtype,
                    lambda t, u, s, op=op: ir.Unary(t.type, L, op, t),
                    positive=op in ("log", "log2", "sqrt"),
                ),
            )
        if dtype is D.i32:  # b holds -4..3: negative shift counts too
            for op in (*ir.BOOL_OPS, *ir.SHIFT_OPS):
                yield Case(
                    f"bitwise_{op}_{dtype}",
                    *tile_kernel(
                        f"bitwise_{op}",
                        dtype,
                        lambda t, u, s, op=op: ir.Binary(t.type, L, op, t, u),
                    ),
                )
                yield Case(
                    f"bitwise_{op}_scalar_{dtype}",
                    *tile_kernel(
                        f"bitwise_{op}_scalar",
                        dtype,
                        lambda t, u, s, op=op: ir.Binary(t.type, L, op, u, s),
                    ),
                )
        for op in ir.COMPARE_OPS:
            yield Case(
                f"compare_{op}_{dtype}",
                *tile_kernel(
                    f"compare_{op}",
                    dtype,
                    lambda t, u, s, op=op: ir.Select(
                        t.type, L, ir.Binary(ir.tile(D.bool_), L, op, t, u), t, u
                    ),
                ),
            )
        for op in ir.BOOL_OPS:

            def make(t, u, s, op=op):
                lt = ir.Binary(ir.tile(D.bool_), L, "lt", t, u)
                gt = ir.Binary(ir.tile(D.bool_), L, "gt", t, s)
                mask = ir.Binary(ir.tile(D.bool_), L, op, lt, ir.Unary(gt.type, L, "not", gt))
                return ir.Select(t.type, L, mask, t, u)

            yield Case(f"bool_{op}_{dtype}", *tile_kernel(f"bool_{op}", dtype, make))
        for target in (*NUMERIC, D.bool_):
            if target is not dtype:
                yield Case(
                    f"cast_{dtype}_to_{target}",
                    *tile_kernel(
                        f"cast_to_{target}",
                        dtype,
                        lambda t, u, s, target=target: ir.Cast(t.type.with_dtype(target), L, t),
                        out_dtype=target,
                    ),
                )


def tile_op_cases():
    for dtype in NUMERIC:
        i32 = D.i32
        yield Case(
            f"transpose_{dtype}",
            *tile_kernel("transpose", dtype, lambda t, u, s: ir.Transpose(t.type, L, t)),
        )
        yield Case(
            f"eye_{dtype}",
            *tile_kernel(
                "eye",
                dtype,
                lambda t, u, s: ir.Binary(t.type, L, "add", t, ir.TileFill(t.type, L, "eye", None)),
            ),
        )
        yield Case(
            f"full_{dtype}",
            *tile_kernel("full", dtype, lambda t, u, s: ir.TileFill(t.type, L, "full", s)),
        )
        yield Case(
            f"tile_get_set_{dtype}",
            *tile_kernel(
                "tile_get_set",
                dtype,
                lambda t, u, s: ir.TileSet(
                    t.type,
                    L,
                    t,
                    const(3, i32),
                    const(5, i32),
                    ir.TileGet(s.type, L, u, const(7, i32), const(2, i32)),
                ),
            ),
        )
        for which in ("row", "col"):
            # out = outer(t.row(3), u.col(5)), then set vec element 2 in a vec
            def make(t, u, s, which=which):
                vt = ir.vec(t.type.dtype)
                v = ir.RowCol(vt, L, which, t, const(3, i32))
                w = ir.RowCol(vt, L, "col" if which == "row" else "row", u, const(5, i32))
                w = ir.TileSet(
                    vt, L, w, const(2, i32), None, ir.TileGet(s.type, L, v, const(4, i32), None)
                )
                return ir.Outer(t.type, L, v, w)

            yield Case(f"{which}_outer_{dtype}", *tile_kernel(f"{which}_outer", dtype, make))
        for op in ("sum", "max", "min"):
            for axis in (None, 0, 1):

                def make(t, u, s, op=op, axis=axis):
                    if axis is None:
                        total = ir.Reduce(s.type, L, op, t, None)
                        return ir.TileFill(t.type, L, "full", total)
                    v = ir.Reduce(ir.vec(t.type.dtype), L, op, t, axis)
                    ones = ir.TileFill(ir.vec(t.type.dtype), L, "full", const(1, t.type.dtype))
                    return ir.Outer(t.type, L, v, ones)

                yield Case(
                    f"reduce_{op}_{axis}_{dtype}",
                    *tile_kernel(f"reduce_{op}_{axis}", dtype, make),
                    rtol=1e-2 if dtype in HALVES else 1e-5,
                )


def scan_cases():
    for dtype in NUMERIC:
        for op in ("sum", "prod"):
            for axis in (0, 1):
                yield Case(
                    f"scan_{op}_{axis}_{dtype}",
                    *tile_kernel(
                        f"scan_{op}_{axis}",
                        dtype,
                        lambda t, u, s, op=op, axis=axis: ir.Scan(t.type, L, op, t, axis),
                    ),
                    rtol=1e-2 if dtype in HALVES else 1e-5,
                )


def linalg_cases():
    for dtype in FLOATS:
        out_dtype = D.f32 if dtype in HALVES else dtype
        rtol = 1e-2 if dtype in HALVES else 1e-5
        yield Case(
            f"matmul_{dtype}",
            *tile_kernel(
                "matmul",
                dtype,
                lambda t, u, s: ir.Matmul(ir.tile(out_dtype), L, t, u, None),
                out_dtype=out_dtype,
            ),
            rtol=rtol,
        )
        yield Case(
            f"mma_{dtype}",
            *tile_kernel(
                "mma",
                dtype,
                lambda t, u, s: ir.Matmul(ir.tile(out_dtype), L, t, u, cast(t, out_dtype)),
                out_dtype=out_dtype,
            ),
            rtol=rtol,
        )
        yield cholesky_case(dtype)
    yield Case(
        "matmul_i32",
        *tile_kernel("matmul", D.i32, lambda t, u, s: ir.Matmul(t.type, L, t, u, None)),
    )


def cholesky_case(dtype):
    """out = solve_triangular(cholesky(a a^T + 16 I), b): both linear-algebra ops."""

    def make(t, u, s):
        spd = ir.Binary(
            t.type,
            L,
            "add",
            ir.Matmul(t.type, L, t, ir.Transpose(t.type, L, t), None) if dtype not in HALVES else t,
            ir.Binary(t.type, L, "mul", ir.TileFill(t.type, L, "eye", None), const(16, dtype)),
        )
        chol = ir.Cholesky(t.type, L, spd, const(1e-6, dtype))
        return ir.SolveTriangular(t.type, L, chol, u)

    kernel, inputs = tile_kernel("cholesky_solve", dtype, make)
    return Case(f"cholesky_solve_{dtype}", kernel, inputs, rtol=5e-2 if dtype in HALVES else 1e-4)


def memory_and_control_cases():
    """Windows, vecs, scalar elements, 3-D arrays, program ids and control flow."""
    for dtype in NUMERIC:
        i32 = ir.scalar(D.i32)
        a, out = array("a", dtype, 3), array("out", dtype, 3)
        vec_in, vec_out = array("v", dtype, 1), array("w", dtype, 1)
        n = ir.Param("n", ir.scalar(D.i32))
        pid = ir.ProgramId(i32, L, "id", 0)
        count = ir.ProgramId(i32, L, "count", 0)
        rows = ir.ArrayDim(i32, L, "a", 1)
        cols = ir.ArrayDim(i32, L, "a", 2)
        t = var("t", ir.tile(dtype))
        k = var("k", i32)
        acc = var("acc", ir.scalar(dtype))
        vt = ir.vec(dtype)

        def add(x, y):
            return ir.Binary(x.type, L, "add", x, y)

        n_value = var("n", i32)
        lt = ir.Binary(ir.scalar(D.bool_), L, "lt", k, n_value)
        body = [
            # a partial window with runtime bounds on the slab arr[pid]
            ir.Assign(
                _loc(2),
                "t",
                ir.LoadWindow(
                    t.type,
                    _loc(2),
                    ir.TileFill(t.type, L, "full", const(1, dtype)),
                    view(a, pid),
                    const(2, D.i32),
                    rows,
                    const(1, D.i32),
                    ir.Binary(i32, L, "sub", cols, const(3, D.i32)),
                ),
            ),
            ir.Assign(_loc(3), "acc", const(0, dtype)),
            ir.For(
                _loc(4),
                "k",
                const(0, D.i32),
                const(16, D.i32),
                const(1, D.i32),
                [
                    ir.If(
                        _loc(5),
                        ir.Logical(
                            ir.scalar(D.bool_),
                            L,
                            "and",
                            lt,
                            ir.Binary(
                                ir.scalar(D.bool_),
                                L,
                                "eq",
                                ir.Binary(i32, L, "mod", k, const(2, D.i32)),
                                const(1, D.i32),
                            ),
                        ),
                        [ir.Continue(_loc(6))],
                        [],
                    ),
                    ir.If(
                        _loc(7),
                        ir.Binary(ir.scalar(D.bool_), L, "ge", k, const(12, D.i32)),
                        [ir.Break(_loc(8))],
                        [],
                    ),
                    ir.Assign(_loc(9), "acc", add(acc, ir.TileGet(acc.type, L, t, k, k))),
                ],
            ),
            # k leaves the for loop at 12 and the while loop at 18, a row of a[pid]
            ir.While(
                _loc(10),
                ir.Binary(ir.scalar(D.bool_), L, "lt", k, const(18, D.i32)),
                [
                    ir.Assign(_loc(11), "k", add(k, const(3, D.i32))),
                ],
            ),
            ir.Assign(
                _loc(12),
                "acc",
                add(
                    acc,
                    cast(
                        ir.ArrayLoad(ir.scalar(dtype), L, view(a, pid), [k, const(1, D.i32)]),
                        dtype,
                    ),
                ),
            ),
            ir.ArrayStore(_loc(13), view(out, count), [const(0, D.i32), const(0, D.i32)], acc),
            ir.ArrayStore(
                _loc(14), view(out, pid), [const(15, D.i32), const(15, D.i32)], cast(k, dtype)
            ),
            ir.Assign(
                _loc(15),
                "vv",
                add(
                    ir.VecLoad(vt, L, view(vec_in), const(3, D.i32), n_value, None),
                    ir.VecLoad(
                        vt, L, view(a, pid), const(0, D.i32), const(16, D.i32), const(2, D.i32)
                    ),
                ),
            ),
            ir.VecStore(
                _loc(16),
                var("vv", vt),
                view(vec_out),
                ir.Binary(i32, L, "mul", pid, const(16, D.i32)),
                ir.ArrayDim(i32, L, "w", 0),
            ),
            ir.StoreWindow(
                _loc(17),
                t,
                view(out, pid),
                const(1, D.i32),
                const(17, D.i32),
                const(0, D.i32),
                const(15, D.i32),
            ),
        ]
        kernel = ir.KernelIR(
            "memory_control",
            [a, out, vec_in, vec_out, n],
            body,
            {"t": t.type, "acc": acc.type, "k": i32, "vv": vt},
            [ir.Unit("memory_control")],
        )
        inputs = {
            "a": rand(dtype, (3, 20, 19)),
            "out": np.zeros((4, 18, 17), dtype.numpy),
            "v": rand(dtype, (21,)),
            "w": np.zeros((40,), dtype.numpy),
            "n": 9,
        }
        yield Case(f"memory_control_{dtype}", kernel, inputs, grid=(3, 1, 1))


def copy_inputs(inputs: dict) -> dict:
    """A case's inputs with every array copied (a launch writes into its arguments)."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def launch(launcher, case: Case, inputs: dict) -> dict:
    """Run ``case`` with ``launcher`` on ``inputs`` (in parameter order); returns them."""
    launcher(case.grid, [inputs[p.name] for p in case.kernel.params])
    return inputs


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, name: str) -> None:
    """Exact for bool and int outputs; else within ``rtol`` of the cpu result, relative to
    the output's largest magnitude (at least 1), NaN where the cpu has NaN."""
    if want.dtype == np.bool_ or want.dtype.kind == "i":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    scale = max(1.0, float(np.nanmax(np.abs(want.astype(np.float64)))) if want.size else 1.0)
    np.testing.assert_allclose(
        got.astype(np.float64),
        want.astype(np.float64),
        rtol=rtol,
        atol=rtol * scale,
        equal_nan=True,
        err_msg=name,
    )


def all_cases() -> list[Case]:
    cases = [
        *elementwise_cases(),
        *tile_op_cases(),
        *scan_cases(),
        *linalg_cases(),
        *memory_and_control_cases(),
    ]
    for case in cases:
        if case.name.endswith("_bf16"):  # one bf16 ulp is 2**-8 (two libms' exp may differ)
            case.rtol = max(case.rtol, 1e-2)
    return cases

"""The cpu backend's prepared path on tiles of every shape, against its interpreter.

Every case of ``tests/shape_cases.py`` (each shape and dtype) must be prepared (no fall
back to the interpreter for a shape or for the nodes shapes brought: Broadcast, Reshape,
arange, row and column vec lines), and a launch through the closures must leave the
arguments as the interpreter leaves them: bit for bit, except where a case sums products
(a block-grid matmul is one GEMM, which BLAS may order differently). Bounds errors on
shaped tiles match the interpreter's (type, message, program)."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile, Vec, f32, i32, ir
from qnb.backends.cpu import interpreter
from qnb.backends.cpu.prepared import prepare
from qnb.errors import QnbIndexError
from tests import shape_cases

PARAMS = [
    pytest.param(
        case,
        np.dtype(dtype),
        shape,
        id=f"{case.name}-{np.dtype(dtype).name}-{shape_cases.param_id(shape)}",
    )
    for case, dtype, shape in shape_cases.params()
]


def _grid3(grid):
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    return (*grid, 1, 1)[:3]


def _run(kernel, grid, args, how):
    """``args`` (copied) after one launch ``how`` ("interpreter" or "prepared"), or the
    error it raised."""
    kernel_ir, _ = kernel._lower_for(args)
    stored = ir.array_uses(kernel_ir)[1]
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _, runtime = kernel._signature(copies)
    try:
        if how == "interpreter":
            interpreter.run(kernel_ir, _grid3(grid), runtime, stored)
        else:
            launch = prepare(kernel_ir)
            assert launch is not None, "left to the interpreter"
            launch(_grid3(grid), runtime, stored)
    except QnbIndexError as err:
        return ("error", str(err))
    return copies


def _same(got, want, tolerance):
    if isinstance(want, tuple):
        assert got == want
        return
    for index, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, np.ndarray):
            continue
        if tolerance and w.dtype.kind == "f":
            tol = 1e-3 if w.dtype == np.float16 else 1e-5 if w.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"argument {index}")


@pytest.mark.parametrize(("case", "dtype", "shape"), PARAMS)
def test_shape_case_prepared_matches_interpreter(case, dtype, shape):
    grid, args = case.make(np.random.default_rng(0), dtype, shape)
    want = _run(case.kernel, grid, args, "interpreter")
    got = _run(case.kernel, grid, args, "prepared")
    _same(got, want, case.tolerance)


# ---------------------------------------------------------------------- block grids of shapes


@qnb.kernel
def blocks_affine(x, y, M: qnb.Template, N: qnb.Template):
    i = qnb.program_id(0) * M
    j = qnb.program_id(1) * N
    t = Tile[M, N].load(x, i, j)
    (t * 2.0 + t.sum(axis=0) - t.max(axis=1)[:, None]).store(y, i, j)


@qnb.kernel
def blocks_matmul(a, b, c, M: qnb.Template, N: qnb.Template, K: qnb.Template):
    i = qnb.program_id(0) * M
    j = qnb.program_id(1) * N
    acc = Tile[M, N].zeros(f32)
    for k in range(0, a.shape[1], K):
        acc = qnb.mma(Tile[M, K].load(a, i, k), Tile[K, N].load(b, k, j), acc)
    acc.store(c, i, j)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize("tile", [(8, 32), (32, 8), (1, 16), (16, 1), (64, 64)])
@pytest.mark.parametrize("size", [(64, 64), (37, 50), (100, 20)])
def test_block_grid_of_any_shape(tile, size):
    m, n = tile
    for grid in (((size[0] + m - 1) // m, (size[1] + n - 1) // n), (2, 2)):
        args = [_rand(size), np.full(size, np.nan, np.float32), m, n]
        _same(
            _run(blocks_affine, grid, args, "prepared"),
            _run(blocks_affine, grid, args, "interpreter"),
            1,
        )


@pytest.mark.parametrize("mnk", [(8, 32, 16), (32, 8, 4), (64, 64, 64), (16, 16, 1), (4, 128, 8)])
@pytest.mark.parametrize("sizes", [(64, 64, 64), (37, 50, 45)])
def test_k_loop_gemm_of_any_shape(mnk, sizes):
    m, n, k = mnk
    rows, depth, cols = sizes
    grid = ((rows + m - 1) // m, (cols + n - 1) // n)
    args = [
        _rand((rows, depth), 1),
        _rand((depth, cols), 2),
        np.full((rows, cols), np.nan, np.float32),
        m,
        n,
        k,
    ]
    _same(
        _run(blocks_matmul, grid, args, "prepared"),
        _run(blocks_matmul, grid, args, "interpreter"),
        1,
    )
    got = _run(blocks_matmul, grid, args, "prepared")
    np.testing.assert_allclose(got[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------- errors on shapes


@qnb.kernel
def index_past_side(x, out, i: i32, j: i32):
    t = Tile[8, 32].load(x, 0, 0)
    v = qnb.arange(8, f32)
    out[qnb.program_id(0)] = t[i, j] + v[i]


@qnb.kernel
def unpadded_row(x, out, r: i32):
    Vec[32].load_row(x, r, 0).store(out, 0)


@pytest.mark.parametrize("i,j", [(7, 31), (8, 0), (0, 32), (-1, 3)])
def test_index_errors_on_shaped_tiles_match(i, j):
    args = [_rand((8, 32)), np.zeros(3, np.float32), i, j]
    _same(
        _run(index_past_side, 3, args, "prepared"), _run(index_past_side, 3, args, "interpreter"), 0
    )


@pytest.mark.parametrize("r", [0, 4, 5, -1])
def test_row_line_errors_match(r):
    args = [_rand((5, 40)), np.full(32, np.nan, np.float32), r]
    _same(_run(unpadded_row, 1, args, "prepared"), _run(unpadded_row, 1, args, "interpreter"), 0)

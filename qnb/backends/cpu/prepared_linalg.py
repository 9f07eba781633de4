"""prepared_linalg"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.lanes import _lanes_last
from qnb.backends.cpu.prepared_base import _as_blocks, _Blocks, _strip_product, _tiles
from qnb.backends.cpu.semantics import _cholesky, _solve_lower, is_narrow_float


class LinalgClosures:
    """Linear algebra closures: ``@`` (block strips as one product), outer, rows and columns, Cholesky, solves."""

    def e_Matmul(self, e):
        a_fn, b_fn = self.expr(e.a), self.expr(e.b)
        acc_fn = self.expr(e.acc) if e.acc is not None else None
        out = e.type.dtype.numpy

        def matmul(st):
            a, b = a_fn(st), b_fn(st)
            if (
                isinstance(a, _Blocks)
                and isinstance(b, _Blocks)
                and a.ra == b.ra
                and a.a4.shape[2] == 1
                and b.a4.shape[0] == 1
            ):
                # a block row strip times a block column strip: every program's product
                # at once is one GEMM of the two strips
                # contiguous strips: NumPy's matmul takes a slow loop for some strides
                depth = a.a4.shape[3]
                x = np.ascontiguousarray(a.a4.reshape(-1, depth))
                y = np.ascontiguousarray(b.a4.reshape(depth, -1))
                if is_narrow_float(x.dtype):
                    x, y = x.astype(np.float32), y.astype(np.float32)
                product = _strip_product(x, y, a.a4.shape[1]).astype(out, copy=False)
                result = product.reshape(a.a4.shape[0], a.a4.shape[1], b.a4.shape[2], -1)
                if acc_fn is not None:
                    acc = _as_blocks(acc_fn(st), "tile", a.ra, st.grid)
                    if acc.shape == result.shape and acc.dtype == result.dtype:
                        result += acc
                    else:
                        result = acc + result
                return _Blocks(result, a.ra)
            a, b = _tiles(st, a), _tiles(st, b)
            if is_narrow_float(a.dtype):
                a, b = a.astype(np.float32), b.astype(np.float32)
            result = np.matmul(a, b).astype(out, copy=False)
            if acc_fn is not None:
                acc = _tiles(st, acc_fn(st))
                if result.shape[0] >= acc.shape[0] and result.dtype == acc.dtype:
                    result += acc
                else:
                    result = acc + result
            return result

        return matmul

    def e_Outer(self, e):
        u, v = self.expr(e.u), self.expr(e.v)
        shape = e.type.shape
        if self.is_ones(e.v):  # outer(u, ones): u down the columns, as a view (u * 1 == u)

            def columns(st):
                x = u(st)
                return np.broadcast_to(x[:, :, None], (x.shape[0], *shape))

            return columns
        if self.is_ones(e.u):

            def rows(st):
                y = v(st)
                return np.broadcast_to(y[:, None, :], (y.shape[0], *shape))

            return rows
        return lambda st: u(st)[:, :, None] * v(st)[:, None, :]

    def is_ones(self, e):
        """Whether ``e`` is a vec of ones of the result's dtype known now (a constant, or
        a top-level variable assigned one once)."""
        if isinstance(e, ir.Var):
            value = self.const_vars.get(e.name)
        elif self.constant(e):
            with np.errstate(all="ignore"):
                try:
                    value = self.expr(e)(None)
                except Exception:  # noqa: BLE001
                    return False
        else:
            return False
        return (
            isinstance(value, np.ndarray)
            and value.dtype.kind in "fiu"
            and value.shape[0] == 1
            and bool((value == 1).all())
        )

    def e_RowCol(self, e):
        operand = self.expr(e.operand)
        is_row = e.which == "row"
        side = e.operand.type.shape[0 if is_row else 1]
        index_fn = self.tile_index(e, e.index, side, (side,))

        def rowcol(st):
            base = _tiles(st, operand(st))
            index = index_fn(st)
            n = max(base.shape[0], index.shape[0])
            lanes = np.arange(n) if base.shape[0] > 1 else np.zeros(n, np.int64)
            index = np.broadcast_to(index, (n,))
            return base[lanes, index, :] if is_row else base[lanes, :, index]

        return rowcol

    def e_Cholesky(self, e):
        operand, eps = self.expr(e.operand), self.expr(e.eps)
        shape = e.type.shape
        return lambda st: _lanes_last(_cholesky, _tiles(st, operand(st)), eps(st), shape=shape)

    def e_SolveTriangular(self, e):
        lower, rhs = self.expr(e.lower), self.expr(e.rhs)
        shape = e.type.shape

        def solve(st):
            factor = _tiles(st, lower(st))
            b = _tiles(st, rhs(st))
            return _lanes_last(_solve_lower, factor, b, shape=shape, dtype=b.dtype)

        return solve
